// How much host memory the allocation that failed asked for, so that an out-of-memory
// exit can say "asked for 16.0 GiB" rather than only "out of memory".
#pragma once
#include <cstddef>

namespace attnbench {

// Bytes the last failed operator new on this thread asked for; 0 when unknown (a
// sanitizer build keeps its own allocator, or nothing failed).
std::size_t last_failed_allocation();

}  // namespace attnbench
