// The list of kernel families. Adding a family: its folder kernels/<op>/ with its
// table, one line in registry.cpp. No self-registering statics: a static library
// would drop them silently.
#pragma once
#include <string>
#include <vector>

namespace attnbench {

struct VariantInfo {
  std::string name, note;
};

struct FamilyInfo {
  std::string op;                     // the case files' `op`
  std::vector<VariantInfo> variants;  // table order; the first is the baseline
};

std::vector<FamilyInfo> kernel_families();

}  // namespace attnbench
