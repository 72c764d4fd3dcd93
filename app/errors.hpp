// Errors the CLI maps to exit codes (docs/cli.md): InputError -> 2,
// CudaError (kernels/kernels.hpp) and NoDevice -> 3.
#pragma once
#include <stdexcept>
#include <string>

namespace attnbench {

// Bad case file, bad option, unknown name: one clear line for the user.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// No usable CUDA device.
struct NoDevice : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace attnbench
