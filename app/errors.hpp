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

// A variant's own failure that leaves the device usable (a Python plugin's launch raised):
// its row says ERROR with this message, and the other variants still run.
struct VariantError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What a supports() reason starts with when asking the question failed (a Python plugin's
// supports() raised): the row is an ERROR, not a skip.
inline constexpr const char* kSupportsError = "ERROR: ";

// No usable CUDA device.
struct NoDevice : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace attnbench
