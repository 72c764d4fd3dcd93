// The list of kernel families. Adding a family: its .cu with its table, one line
// in registry.cpp, one in CMakeLists.txt. No self-registering statics: a static
// library would drop them silently.
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
