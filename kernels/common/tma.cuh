// Hopper's tensor memory accelerator and the warp-specialization primitives around it:
// tensor maps (encoded on the host, passed as __grid_constant__ kernel parameters), tensor
// bulk copies completed through an mbarrier (copy.cuh has the mbarrier itself), named
// barriers between warpgroups, and register reallocation between warpgroups (setmaxnreg). sm_90a: device
// callers sit behind __CUDA_ARCH_FEAT_SM90_ALL.
#pragma once
#include <cuda.h>  // CUtensorMap and its enums (the encoder itself comes from the runtime)
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/common/storage.cuh"

namespace attnbench {

// ---- host: tensor maps ----

// The tensor-map element type of T: fp16, bf16, or an fp8 code as its byte.
template <class T>
constexpr CUtensorMapDataType tensor_map_type() {
  if constexpr (kIsFp8<T>) return CU_TENSOR_MAP_DATA_TYPE_UINT8;
  else if constexpr (std::is_same_v<T, __half>) return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  else return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
}

// A tensor map of a 16-bit tensor of up to 5 dimensions, dims[0] contiguous; strides (bytes,
// multiples of 16) of dims 1.., box sizes in elements; 128-byte swizzle (box[0] * 2 must be
// 128: the shared-memory layout wgmma_desc_sw128 describes); reads past a dimension's end
// fill zeros. The encoder is the driver's, reached through the runtime so that nothing links
// libcuda directly.
inline CUtensorMap make_tensor_map_sw128(const void* base, int rank, const uint64_t* dims, const uint64_t* strides,
                                         const uint32_t* box, CUtensorMapDataType type, const char* who) {
  using Encode = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                              const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  static Encode encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<Encode>(fn);
  }();
  if (!encode) throw std::runtime_error(std::string(who) + ": the driver has no cuTensorMapEncodeTiled");
  CUtensorMap map;
  cuuint32_t unit[5] = {1, 1, 1, 1, 1};
  const CUresult r = encode(&map, type, static_cast<cuuint32_t>(rank), const_cast<void*>(base), dims, strides, box,
                            unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw std::runtime_error(std::string(who) + ": cuTensorMapEncodeTiled failed (CUresult " + std::to_string(r) + ")");
  return map;
}

// ---- device ----

// A box of a 4-dimensional tensor map at coordinates (c0..c3, elements) into shared memory at
// dst (1024-byte aligned for the 128-byte swizzle), its bytes counted on mbarrier bar.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap& map, int c0, int c1, int c2, int c3,
                                            uint32_t bar) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(&map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
#endif
}
// A box of a 3-dimensional tensor map at (c0, c1, c2); as tma_load_4d.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap& map, int c0, int c1, int c2,
                                            uint32_t bar) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(&map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
#endif
}
// The same box written into every block of the cluster that `ctas` names (bit i: rank i), at
// the same shared-memory offset in each, its bytes counted on each block's mbarrier at `bar`.
__device__ __forceinline__ void tma_load_3d_multicast(uint32_t dst, const CUtensorMap& map, int c0, int c1, int c2,
                                                      uint32_t bar, uint16_t ctas) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], "
      "[%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(&map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar), "h"(ctas)
      : "memory");
#endif
}
// The other way: a box of shared memory at src (1024-byte aligned, in the map's swizzle) to
// the tensor at (c0, c1, c2), in this thread's current bulk group; what falls past the
// tensor's edges is not written. Before src is written again, bulk_wait_read; before the
// block exits, bulk_wait.
__device__ __forceinline__ void tma_store_3d(const CUtensorMap& map, int c0, int c1, int c2, uint32_t src) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3}], [%4];\n" ::"l"(
                   reinterpret_cast<uint64_t>(&map)),
               "r"(c0), "r"(c1), "r"(c2), "r"(src)
               : "memory");
#endif
}
// bytes (a multiple of 16; both addresses 16-byte aligned) of fp32 at shared src added element by
// element into global dst, each element's add atomic, in this thread's current bulk group: a
// tile's partial sum reduced into an fp32 accumulator without a register round trip. Its
// writes are complete after bulk_wait; before another thread may rely on them, that thread's
// fence_proxy_async_global and a release.
__device__ __forceinline__ void bulk_reduce_add_f32(float* dst, uint32_t src, int bytes) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst), "r"(src),
               "r"(bytes)
               : "memory");
#endif
}
// Orders this thread's global-memory accesses of the generic proxy (ordinary loads, stores,
// atomics) with those of the async proxy (bulk copies and reductions), both ways.
__device__ __forceinline__ void fence_proxy_async_global() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
#endif
}
// Closes this thread's bulk group of stores.
__device__ __forceinline__ void bulk_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}
// Until at most N of this thread's bulk groups still read their shared memory.
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
#endif
}
// Until at most N of this thread's bulk groups are incomplete (their writes done).
template <int N>
__device__ __forceinline__ void bulk_wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}
// The map's descriptor into the constant cache ahead of the first copy.
__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap& map) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&map)) : "memory");
#endif
}

// ---- device: thread-block clusters ----

// This block's rank in its cluster.
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r = 0;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
#endif
  return r;
}
// Every thread of every block of the cluster: its earlier shared-memory work (barrier
// initialisation, the last remote arrivals) visible to the others before any goes on.
__device__ __forceinline__ void cluster_sync() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}
// One arrival on the mbarrier at shared address `bar` of cluster block `cta` (this block's
// own included). The release is the default, at CTA scope, as for a local arrival: what it
// guards are shared-memory reads this thread has waited for (wgmma operands), and a
// cluster-scope release would fence every memory operation in flight at each arrival (the
// consumers of a TMA-fed GEMM stalled half their cycles on it, bench notes run 142).
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t bar, uint32_t cta) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n .reg .b32 remote;\n mapa.shared::cluster.u32 remote, %0, %1;\n"
      " mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(bar),
      "r"(cta)
      : "memory");
#endif
}

// Named barriers (ids 1..15; 0 is __syncthreads) over `threads` threads of the block: sync
// waits for the count, arrive adds to it and goes on.
__device__ __forceinline__ void named_bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Register reallocation between warpgroups: every warp of a warpgroup gives registers back
// (dec) or takes them (inc) to N per thread; the block's total must stay within the file.
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

}  // namespace attnbench
