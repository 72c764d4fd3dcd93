// Python files as plugins (docs/plugins.md, "Python kernels"): the host side of the bridge.
// attnbench needs no Python to build or run; a .py plugin makes it find a python3
// ($ATTNBENCH_PYTHON, else python3 on PATH), load that interpreter's libpython, then the
// bridge library built beside attnbench (app/python/bridge.cpp), which embeds the
// interpreter and turns the file's variants into plugin-ABI variants. From there a Python
// variant is one more plugin variant (app/plugin.cpp).
#pragma once
#include <cstdint>
#include <string>

#include "kernels/plugin/include/attnbench/plugin.h"

namespace attnbench {

// Runs `file` and returns its variants; `library` is set to the bridge's path. Throws
// InputError with one line that says what to install or what the file did wrong.
const attnbench_plugin* open_python_plugin(const std::string& file, int device, std::string& library);

// The message of the last Python launch that raised, taken once ("" when none, or when no
// Python plugin is loaded).
std::string take_python_error();

// The host microseconds a launch of `op` spends in the bridge and Python before any work
// (a no-op callable through the same marshalling), the mean of a few calls; 0 when no Python
// plugin is loaded.
double python_overhead_us(int32_t op, const void* abi_params);

}  // namespace attnbench
