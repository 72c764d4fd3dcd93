// The command line (CASES.md "Command line"): run, verify, list, info.
#pragma once

namespace attnbench {

// Parses argv, runs the subcommand, returns the exit code (DESIGN.md): 0 all
// verified, 1 a verification failed, 2 bad input or usage, 3 no usable CUDA
// device or a CUDA error.
int run_cli(int argc, char** argv);

}  // namespace attnbench
