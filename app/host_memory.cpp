#include "app/host_memory.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>

namespace attnbench {
namespace {

thread_local std::size_t failed_bytes = 0;

// Large blocks are whole 2 MiB pages (transparent huge pages: 512 times fewer faults on a
// block's first use), mapped directly so that freeing one keeps it here instead of
// returning it to the kernel as malloc does for anything over 32 MiB.
constexpr std::size_t kPage = std::size_t{2} << 20;

std::size_t rounded(std::size_t bytes) { return (bytes + kPage - 1) / kPage * kPage; }

class BlockCache {
 public:
  void* take(std::size_t bytes) {
    const std::size_t n = rounded(bytes);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // The smallest free block that fits, unless it wastes more than the request.
      auto it = free_.lower_bound(n);
      if (it != free_.end() && it->first <= 2 * n) {
        void* p = it->second;
        cached_ -= it->first;
        sizes_[p] = it->first;
        free_.erase(it);
        return p;
      }
    }
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      // Give back what is cached and try once more before failing.
      trim(0);
      p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) {
        failed_bytes = bytes;
        throw std::bad_alloc();
      }
    }
#ifdef MADV_HUGEPAGE
    madvise(p, n, MADV_HUGEPAGE);  // advice only: without huge pages the block still works
#endif
    std::lock_guard<std::mutex> lock(mutex_);
    sizes_[p] = n;
    return p;
  }

  void give(void* p) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = sizes_.find(p);
    if (it == sizes_.end()) std::abort();  // not ours: a double free or a foreign pointer
    free_.emplace(it->second, p);
    cached_ += it->second;
    sizes_.erase(it);
    trim_locked(limit());
  }

  std::size_t cached() {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_;
  }

 private:
  // What the cache may keep free: a quarter of the machine's memory, so that a run of many
  // points never holds much more than its largest point needs.
  static std::size_t limit() {
    static const std::size_t bytes = [] {
      const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
      return pages > 0 && size > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(size) / 4
                                   : std::size_t{8} << 30;
    }();
    return bytes;
  }
  void trim(std::size_t keep) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    trim_locked(keep);
  }
  // Unmaps the largest free blocks until at most `keep` bytes stay cached.
  void trim_locked(std::size_t keep) noexcept {
    while (cached_ > keep && !free_.empty()) {
      auto last = std::prev(free_.end());
      munmap(last->second, last->first);
      cached_ -= last->first;
      free_.erase(last);
    }
  }

  std::mutex mutex_;
  std::multimap<std::size_t, void*> free_;  // size -> block
  std::map<void*, std::size_t> sizes_;      // blocks in use
  std::size_t cached_ = 0;
};

BlockCache& cache() {
  static BlockCache* c = new BlockCache;  // never destroyed: static tensors may outlive main
  return *c;
}

}  // namespace

std::size_t last_failed_allocation() { return failed_bytes; }

void* host_allocate(std::size_t bytes) {
  if (bytes < kLargeBlock) return ::operator new(bytes);
  return cache().take(bytes);
}

void host_release(void* p, std::size_t bytes) noexcept {
  if (!p) return;
  if (bytes < kLargeBlock) return ::operator delete(p);
  cache().give(p);
}

std::size_t host_cached_bytes() { return cache().cached(); }

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
