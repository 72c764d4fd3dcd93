// The command line (docs/cli.md): run, verify, list, info.
#pragma once

namespace attnbench {

// Parses argv, runs the subcommand, returns the exit code (docs/cli.md): 0 all
// verified, 1 a verification failed, 2 bad input or usage, 3 no usable CUDA
// device or a CUDA error.
int run_cli(int argc, char** argv);

}  // namespace attnbench
