#include "app/host_memory.hpp"

#include <cstdlib>
#include <new>

namespace attnbench {
namespace {
thread_local std::size_t failed_bytes = 0;
}  // namespace

std::size_t last_failed_allocation() { return failed_bytes; }

}  // namespace attnbench

// The global operator new, as the standard library's, but noting the size it failed
// on. Sanitizer builds keep their allocator's own (it checks new/delete pairing).
#if !defined(__SANITIZE_ADDRESS__)
void* operator new(std::size_t n) {
  if (n == 0) n = 1;
  while (true) {
    if (void* p = std::malloc(n)) return p;
    if (std::new_handler h = std::get_new_handler()) {
      h();
      continue;
    }
    attnbench::failed_bytes = n;
    throw std::bad_alloc();
  }
}
void* operator new[](std::size_t n) { return ::operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#endif
