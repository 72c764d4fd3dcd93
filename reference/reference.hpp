// fp64 CPU reference for every operation, on Eigen: one header and one .cpp per op, the shared pieces (Matrix, Rows,
// the dense attention core) in common.hpp. Including this header gives every op.
#pragma once
#include "reference/common.hpp"
#include "reference/softmax.hpp"
#include "reference/gemm.hpp"
#include "reference/attention.hpp"
#include "reference/decode.hpp"
#include "reference/paged.hpp"
#include "reference/cache_append.hpp"
#include "reference/reshape_and_cache.hpp"
#include "reference/mha.hpp"
#include "reference/ragged.hpp"
