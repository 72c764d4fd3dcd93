// Moving bytes: cp.async (global -> shared, bypassing registers) and its groups, bulk copies
// completed through an mbarrier (sm_90's TMA unit), and global loads with an L2 policy.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace attnbench {

// Shared-memory address of a generic pointer into shared memory, as cp.async, ldmatrix and
// the mbarrier instructions take it.
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// L2 prefetch hint of a cp.async: none, or the aligned 128 bytes around the chunk, pulled
// into L2 before a neighbouring block asks for them (gemm's tiles).
enum class L2Prefetch { none, b128 };

// 16 bytes global -> shared through L2 only (.cg: the data is used once per block, so it is
// kept out of L1): the first src_bytes (0..16) from src, zeros after them. src_bytes 0
// zero-fills a chunk past a tensor's end; src must still be a valid address.
template <L2Prefetch kPrefetch = L2Prefetch::none>
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int src_bytes) {
  if constexpr (kPrefetch == L2Prefetch::b128)
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
                 : "memory");
  else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
// The whole chunk when `valid`, zeros otherwise.
template <L2Prefetch kPrefetch = L2Prefetch::none>
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  cp_async_16<kPrefetch>(dst, src, valid ? 16 : 0);
}
// A chunk known to be in bounds: no src-size operand, no predicate.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
// 8 bytes (0..8 from src, zeros after them); .cg copies only 16, so this one is .ca.
__device__ __forceinline__ void cp_async_8(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}

// An arrival on the mbarrier at `bar` once every cp.async this thread has issued so far has
// landed (.noinc: the barrier's count must include this arrival), so that threads that wait on
// the barrier, not the copier, consume the copies: a cp.async producer warpgroup's "full"
// barriers. The waiters still order the generic-proxy writes before wgmma's reads
// (fence_proxy_async_shared) after their wait.
__device__ __forceinline__ void cp_async_mbar_arrive(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

// cp.async groups: close the group of the copies issued so far; wait until at most N of this
// thread's groups are pending (their shared writes are then visible to this thread; a barrier
// or __syncwarp makes them visible to the others). The "memory" clobber keeps the compiler
// from moving shared-memory reads above the wait.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Bulk copies (sm_90's TMA unit) into shared memory, completed through an mbarrier: one thread
// initialises the barrier (count 1), then per use announces the bytes to come (arrive +
// expect_tx) and issues the copies; every waiting thread spins on the phase parity. Whole
// regions at once: paged_flash streams 2 KB cache regions this way, which cp.async moved at
// ~70% of the read bandwidth (bench notes, run 23). sm_80 builds trap if they get here.
__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n"
               "fence.mbarrier_init.release.cluster;\n" ::"r"(bar), "r"(count) : "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, int bytes) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
#endif
}
// bytes (a multiple of 16, both addresses 16-byte aligned) from global src to shared dst.
__device__ __forceinline__ void bulk_copy(uint32_t dst, const void* src, int bytes, uint32_t bar) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
#endif
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, int parity) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n .reg .pred done;\n wait:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra wait;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#endif
}

// Asks the L2 for bytes [p, p + bytes) (a multiple of 16, p 16-byte aligned) without waiting:
// the TMA unit fetches them while the thread goes on.
__device__ __forceinline__ void prefetch_l2(const void* p, unsigned bytes) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#endif
}

// One arrival on an mbarrier (release: this thread's earlier reads of what it guards are done).
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#endif
}

// L2 policy of streamed loads: evict-first when no other block reads the bytes, so that the
// stream recycles its own lines rather than evicting what the L2 held before it (whatever is
// dirty there would be written back in the middle of the stream, on the same DRAM bus);
// evict-normal when other blocks reuse them through L2.
__device__ __forceinline__ uint64_t l2_policy(bool evict_first) {
  uint64_t pol;
  if (evict_first)
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
  else
    asm("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;\n" : "=l"(pol));
  return pol;
}

// 16 bytes read once by this block: not kept in L1 (nothing reuses them there), L2 policy pol.
__device__ __forceinline__ uint4 ld_stream(const void* ptr, uint64_t pol) {
  uint4 r;
  asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;\n"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
      : "l"(ptr), "l"(pol));
  return r;
}

}  // namespace attnbench
