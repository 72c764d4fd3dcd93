#include "app/checked.hpp"

namespace attnbench {

void overflow(const std::string& what) {
  throw InputError(what + " overflows 64-bit arithmetic (far beyond any card)");
}

int64_t checked_product(std::initializer_list<int64_t> factors, const std::string& what) {
  int64_t n = 1;
  for (int64_t f : factors) n = checked_mul(n, f, what);
  return n;
}

}  // namespace attnbench
