// Host memory for tensors: large blocks kept for reuse, and the size of an allocation
// that failed, so that an out-of-memory exit can say "asked for 16.0 GiB".
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <utility>

namespace attnbench {

// Bytes the last failed allocation on this thread asked for; 0 when unknown (a
// sanitizer build keeps its own allocator, or nothing failed).
std::size_t last_failed_allocation();

// Blocks of at least kLargeBlock bytes come from a process-wide cache and go back to it.
// A fresh block's pages are faulted in and zeroed by the kernel on first touch: `verify
// all` spent more time in the kernel than in its own code doing that, point after point,
// for the same few gigabytes. Smaller sizes use operator new. The memory is uninitialised.
constexpr std::size_t kLargeBlock = std::size_t{1} << 20;
void* host_allocate(std::size_t bytes);
void host_release(void* p, std::size_t bytes) noexcept;
// Bytes held in the cache, free for reuse (for tests).
std::size_t host_cached_bytes();

// std::allocator's interface over host_allocate, leaving elements uninitialised on
// resize(): the parallel loops that fill a tensor write every element anyway.
template <class T>
struct HostAllocator {
  using value_type = T;
  HostAllocator() = default;
  template <class U>
  HostAllocator(const HostAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(host_allocate(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { host_release(p, n * sizeof(T)); }
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <class U>
  bool operator==(const HostAllocator<U>&) const noexcept {
    return true;
  }
  template <class U>
  bool operator!=(const HostAllocator<U>&) const noexcept {
    return false;
  }
};

// Uninitialised host bytes from the cache, returned to it when the pointer goes.
struct HostRelease {
  std::size_t bytes = 0;
  void operator()(uint8_t* p) const noexcept { host_release(p, bytes); }
};
using HostBytes = std::unique_ptr<uint8_t[], HostRelease>;
inline HostBytes host_bytes(std::size_t n) { return HostBytes(static_cast<uint8_t*>(host_allocate(n)), HostRelease{n}); }

}  // namespace attnbench
