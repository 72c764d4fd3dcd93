// Device helpers shared by the kernel families: storage types, conversions,
// warp reductions. Included only from .cu files.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "dtype.hpp"

namespace attnbench {

// C++ storage type of each DType.
template <DType T> struct Storage;
template <> struct Storage<DType::fp32> { using type = float; };
template <> struct Storage<DType::fp16> { using type = __half; };
template <> struct Storage<DType::bf16> { using type = __nv_bfloat16; };

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// Two floats as one register of 16-bit values (__half or __nv_bfloat16), `lo` in the low
// half: the lower k or column of an mma fragment, the lower index in memory.
template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// cp.async groups: close the group of the copies issued so far; wait until at most N of this
// thread's groups are pending (their shared writes are then visible to this thread; a barrier
// or __syncwarp makes them visible to the others).
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Bulk copies (sm_90's TMA unit) into shared memory, completed through an mbarrier: one thread
// initialises the barrier (count 1), then per use announces the bytes to come (arrive +
// expect_tx) and issues the copies; every waiting thread spins on the phase parity. Whole
// regions at once: paged.cu streams 2 KB cache regions this way, which cp.async moved at
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

// Warpgroup mma (sm_90a; callers sit behind __CUDA_ARCH_FEAT_SM90_ALL). A descriptor of an
// operand in the 128-byte swizzle (PTX ISA, "Matrix Descriptor Format"): start address,
// `lead` bytes (N-major: between 64-element column blocks; K-major: unused, 16) and 1024 bytes
// between groups of 8 rows, atoms 1024-byte aligned. Advancing k by 16 adds 32 bytes to a
// K-major start address, 16 rows of 128 bytes to an N-major one.
__device__ __forceinline__ uint64_t wgmma_desc_sw128(uint32_t addr, uint32_t lead = 16) {
  return ((addr & 0x3ffffu) >> 4) | (uint64_t{lead >> 4} << 16) | (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}
// Before a wgmma that reads registers ordinary instructions wrote (accumulators, A fragments).
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Until at most N of this warpgroup's wgmma groups are pending.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Orders this thread's generic-proxy shared writes (cp.async, stores) before async-proxy
// reads of them (wgmma operands); a barrier then publishes them to the block.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Four 8x8 matrices of 16-bit values from shared memory: lane l gives the address of row l % 8
// of matrix l / 8; register i receives matrix i in the mma fragment layout (row lane / 4,
// columns 2 (lane % 4), 2 (lane % 4) + 1).
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// The same, each matrix transposed: register i holds (column lane / 4, rows 2 (lane % 4),
// 2 (lane % 4) + 1) of matrix i.
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__host__ __device__ constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace attnbench
