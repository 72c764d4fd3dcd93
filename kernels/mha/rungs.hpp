// mha's fusion steps, one pair of projections and a launcher per rung file, for the step table
// (variants.cpp).
#pragma once
#include "kernels/mha/mha.hpp"

namespace attnbench::mha_impl {

GemmParams launches_qkv(const MhaParams& p);  // 1_launches.cpp
GemmParams launches_out(const MhaParams& p);
void launches(const MhaParams& p, const LaunchContext& ctx);
GemmParams epilogue_qkv(const MhaParams& p);  // 2_epilogue.cpp
GemmParams epilogue_out(const MhaParams& p);
void epilogue(const MhaParams& p, const LaunchContext& ctx);

}  // namespace attnbench::mha_impl
