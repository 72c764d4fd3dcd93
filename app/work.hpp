// A point's work, what its floor is computed from: the problem states it (app/problem.hpp),
// every result row carries it (app/row.hpp).
#pragma once

namespace attnbench {

enum class Bandwidth { copy, read };  // which measured bandwidth bounds the op

struct Work {
  double flops = 0;  // useful floating-point operations (masked pairs not counted)
  double bytes = 0;  // fewest bytes moved: each tensor read once, written once, at its dtype
  Bandwidth bandwidth = Bandwidth::copy;
};

}  // namespace attnbench
