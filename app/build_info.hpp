// What this binary is: attnbench's version, the commit it was built from, the CUDA runtime it
// was built against and runs with, and the GPU architectures compiled in. `--version` prints
// it and every json report records it, so a number can be traced to the code that made it.
#pragma once
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace attnbench {

// {"version", "commit", "cuda_runtime_built", "cuda_runtime", "architectures"}
nlohmann::json build_identity();
// "attnbench 0.1.0 (commit abc123, CUDA runtime 13.0 built / 13.0 loaded, architectures 90a)"
std::string version_text();

}  // namespace attnbench
