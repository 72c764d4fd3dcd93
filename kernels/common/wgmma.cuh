// Warpgroup mma (sm_90a; callers sit behind __CUDA_ARCH_FEAT_SM90_ALL): shared-memory
// descriptors, the fence / commit / wait protocol, and the m64nNk16 instructions the gemm,
// attention and ceilings kernels issue. Accumulator fragment (m64nN, fp32): register 4j + e of
// a thread holds row 16 (warp % 4) + lane / 4 (+ 8 when e >= 2) of its warpgroup's 64,
// column 8j + 2 (lane % 4) + e % 2.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace attnbench {

// A descriptor of an operand in the 128-byte swizzle (PTX ISA, "Matrix Descriptor Format"):
// start address, `lead` bytes (N-major: between 64-element column blocks; K-major: unused, 16)
// and 1024 bytes between groups of 8 rows, atoms 1024-byte aligned. Advancing k by 16 adds 32
// bytes to a K-major start address, 16 rows of 128 bytes to an N-major one.
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

// Pins accumulator registers in place across an asynchronous wgmma: the compiler may not move
// their reads or writes over this point (the wgmma writes them behind its back until the wait).
template <int N>
__device__ __forceinline__ void fence_operands(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_operands(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

// The accumulator operands: "+f" of d[i .. i + 7], of d[i .. i + 31], of all 64 / 128.
#define ATTNBENCH_D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define ATTNBENCH_D32(i) ATTNBENCH_D8(i), ATTNBENCH_D8(i + 8), ATTNBENCH_D8(i + 16), ATTNBENCH_D8(i + 24)
#define ATTNBENCH_D64 ATTNBENCH_D32(0), ATTNBENCH_D32(32)
#define ATTNBENCH_D128 ATTNBENCH_D32(0), ATTNBENCH_D32(32), ATTNBENCH_D32(64), ATTNBENCH_D32(96)
// The PTX type of T's elements.
#define ATTNBENCH_WGMMA_TYPED(STMT) \
  if constexpr (std::is_same_v<T, __half>) STMT("f16"); else STMT("bf16")

// d (64 x 256, this thread's 128) += A (64 x 16) · B, both from shared memory: A K-major; B
// K-major (B stored n x k, kTransB = 0) or N-major (k x n, kTransB = 1).
template <class T, int kTransB>
__device__ __forceinline__ void wgmma_m64n256k16_ss(float (&d)[128], uint64_t da, uint64_t db) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ATTNBENCH_SS(TYPE, TB)                                                                                   \
  asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, 1, 1, 1, 0, " TB \
               ";\n"                                                                                            \
               : ATTNBENCH_D128                                                                                  \
               : "l"(da), "l"(db))
  if constexpr (std::is_same_v<T, __half>) {
    if constexpr (kTransB) ATTNBENCH_SS("f16", "1"); else ATTNBENCH_SS("f16", "0");
  } else {
    if constexpr (kTransB) ATTNBENCH_SS("bf16", "1"); else ATTNBENCH_SS("bf16", "0");
  }
#undef ATTNBENCH_SS
#endif
}

// d (64 x 256) = (scale_d ? d : 0) + A · B, A from registers (this thread's fragment), B
// K-major in shared memory.
template <class T>
__device__ __forceinline__ void wgmma_m64n256k16_rs(float (&d)[128], const uint32_t (&a)[4], uint64_t db,
                                                    int scale_d) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ATTNBENCH_RS(TYPE)                                                                                  \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"                                              \
               "wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE " "                            \
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132, p, 1, 1, 0;\n}\n"                               \
               : ATTNBENCH_D128                                                                             \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d))
  ATTNBENCH_WGMMA_TYPED(ATTNBENCH_RS);
#undef ATTNBENCH_RS
#endif
}

// d (64 x 128) = (scale_d ? d : 0) + A · Bᵀ, A and B K-major in shared memory.
template <class T>
__device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[64], uint64_t da, uint64_t db, int scale_d) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ATTNBENCH_SS(TYPE)                                                                                  \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                               \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n" \
               : ATTNBENCH_D64                                                                              \
               : "l"(da), "l"(db), "r"(scale_d))
  ATTNBENCH_WGMMA_TYPED(ATTNBENCH_SS);
#undef ATTNBENCH_SS
#endif
}

// d (64 x 128) += A · B, A from registers (this thread's fragment), B N-major in shared memory.
template <class T>
__device__ __forceinline__ void wgmma_m64n128k16_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t db) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ATTNBENCH_RS(TYPE)                                                                                  \
  asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n" \
               : ATTNBENCH_D64                                                                              \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db))
  ATTNBENCH_WGMMA_TYPED(ATTNBENCH_RS);
#undef ATTNBENCH_RS
#endif
}

// d (64 x 32) = (scale_d ? d : 0) + A · Bᵀ, A and B K-major in shared memory.
template <class T>
__device__ __forceinline__ void wgmma_m64n32k16_ss(float (&d)[16], uint64_t da, uint64_t db, int scale_d) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ATTNBENCH_SS(TYPE)                                                                                  \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"                                               \
               "wgmma.mma_async.sync.aligned.m64n32k16.f32." TYPE "." TYPE " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}\n" \
               : ATTNBENCH_D8(0), ATTNBENCH_D8(8)                                                           \
               : "l"(da), "l"(db), "r"(scale_d))
  ATTNBENCH_WGMMA_TYPED(ATTNBENCH_SS);
#undef ATTNBENCH_SS
#endif
}

// d (64 x 64) = (scale_d ? d : 0) + A · Bᵀ, A and B K-major in shared memory.
template <class T>
__device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[32], uint64_t da, uint64_t db, int scale_d) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ATTNBENCH_SS(TYPE)                                                                                  \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                               \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n" \
               : ATTNBENCH_D32(0)                                                                           \
               : "l"(da), "l"(db), "r"(scale_d))
  ATTNBENCH_WGMMA_TYPED(ATTNBENCH_SS);
#undef ATTNBENCH_SS
#endif
}

// d (64 x 64) += A · B, A from registers (this thread's fragment), B N-major in shared memory.
template <class T>
__device__ __forceinline__ void wgmma_m64n64k16_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t db) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ATTNBENCH_RS(TYPE)                                                                                  \
  asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, 1, 1, 1, 1;\n" \
               : ATTNBENCH_D32(0)                                                                           \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db))
  ATTNBENCH_WGMMA_TYPED(ATTNBENCH_RS);
#undef ATTNBENCH_RS
#endif
}

// d (64 x 64) = (scale_d ? d : 0) + A · B, both from shared memory and both stored transposed
// from the K-major form: A M-major (stored k x m, m contiguous: imm-trans-a = 1) and B N-major
// (k x n: imm-trans-b = 1). Both descriptors are the N-major kind: wgmma_desc_sw128 with
// `lead` the bytes between 64-element M (N) blocks, 1024 between groups of 8 k rows; a k16 step
// adds 16 rows of 128 bytes. 16-bit types only (PTX transposes only .f16/.bf16 descriptors).
// The backward's dQ = dS K with dS kept as dSᵀ [key][query] (kernels/backward/4_flash_wgmma.cu).
template <class T>
__device__ __forceinline__ void wgmma_m64n64k16_ss_mn(float (&d)[32], uint64_t da, uint64_t db, int scale_d) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ATTNBENCH_SS(TYPE)                                                                                  \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                               \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 1, 1;\n}\n" \
               : ATTNBENCH_D32(0)                                                                           \
               : "l"(da), "l"(db), "r"(scale_d))
  ATTNBENCH_WGMMA_TYPED(ATTNBENCH_SS);
#undef ATTNBENCH_SS
#endif
}

// d (64 x 256) += A · B, A from registers (this thread's fragment), B N-major in shared memory.
template <class T>
__device__ __forceinline__ void wgmma_m64n256k16_rs_n(float (&d)[128], const uint32_t (&a)[4], uint64_t db) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ATTNBENCH_RS(TYPE)                                                                                  \
  asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132, 1, 1, 1, 1;\n" \
               : ATTNBENCH_D128                                                                             \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db))
  ATTNBENCH_WGMMA_TYPED(ATTNBENCH_RS);
#undef ATTNBENCH_RS
#endif
}

// d (64 x 80) = (scale_d ? d : 0) + A · Bᵀ, A and B K-major in shared memory.
template <class T>
__device__ __forceinline__ void wgmma_m64n80k16_ss(float (&d)[40], uint64_t da, uint64_t db, int scale_d) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ATTNBENCH_SS(TYPE)                                                                                  \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %42, 0;\n"                                               \
               "wgmma.mma_async.sync.aligned.m64n80k16.f32." TYPE "." TYPE " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39}, %40, %41, p, 1, 1, 0, 0;\n}\n" \
               : ATTNBENCH_D32(0), ATTNBENCH_D8(32)                                                                           \
               : "l"(da), "l"(db), "r"(scale_d))
  ATTNBENCH_WGMMA_TYPED(ATTNBENCH_SS);
#undef ATTNBENCH_SS
#endif
}

// d (64 x 176) = (scale_d ? d : 0) + A · Bᵀ, A and B K-major in shared memory.
template <class T>
__device__ __forceinline__ void wgmma_m64n176k16_ss(float (&d)[88], uint64_t da, uint64_t db, int scale_d) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ATTNBENCH_SS(TYPE)                                                                                  \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %90, 0;\n"                                               \
               "wgmma.mma_async.sync.aligned.m64n176k16.f32." TYPE "." TYPE " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87}, %88, %89, p, 1, 1, 0, 0;\n}\n" \
               : ATTNBENCH_D32(0), ATTNBENCH_D32(32), ATTNBENCH_D8(64), ATTNBENCH_D8(72), ATTNBENCH_D8(80)                                                                           \
               : "l"(da), "l"(db), "r"(scale_d))
  ATTNBENCH_WGMMA_TYPED(ATTNBENCH_SS);
#undef ATTNBENCH_SS
#endif
}

// fp8 e4m3 (k32 a step; both operands K-major, which is all 8-bit wgmma takes): d (64 x 128)
// = (scale_d ? d : 0) + A · Bᵀ from shared memory, and d += A · Bᵀ with A from registers (this
// thread's fragment: register 0 holds row lane / 4 at k 4 (lane % 4) .. + 3, register 1 the
// same 8 rows down, registers 2 and 3 the same at k + 16; the lowest k in the lowest byte).
__device__ __forceinline__ void wgmma_m64n128k32_ss_e4m3(float (&d)[64], uint64_t da, uint64_t db, int scale_d) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1;\n}\n"
               : ATTNBENCH_D64
               : "l"(da), "l"(db), "r"(scale_d));
#endif
}
__device__ __forceinline__ void wgmma_m64n128k32_rs_e4m3(float (&d)[64], const uint32_t (&a)[4], uint64_t db) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, 1, 1, 1;\n"
               : ATTNBENCH_D64
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
#endif
}

// The shapes flash_ws picks by head_dim and key tile: S = Q Kᵀ (m64 x N, both K-major) and
// O += P V (m64 x N, V N-major; fp8: m64n128k32 both ways, its V transposed to K-major).
template <class T, int N>
__device__ __forceinline__ void wgmma_ss_kmajor(float (&d)[N / 2], uint64_t da, uint64_t db, int scale_d) {
  static_assert(N == 64 || N == 80 || N == 128 || N == 176, "S tiles of 64, 80, 128 or 176 keys");
  if constexpr (std::is_same_v<T, __nv_fp8_e4m3>) {
    static_assert(N == 128, "fp8: S tiles of 128 keys");
    wgmma_m64n128k32_ss_e4m3(d, da, db, scale_d);
  } else if constexpr (N == 64) wgmma_m64n64k16_ss<T>(d, da, db, scale_d);
  else if constexpr (N == 80) wgmma_m64n80k16_ss<T>(d, da, db, scale_d);
  else if constexpr (N == 128) wgmma_m64n128k16_ss<T>(d, da, db, scale_d);
  else wgmma_m64n176k16_ss<T>(d, da, db, scale_d);
}
template <class T, int N>
__device__ __forceinline__ void wgmma_rs_nmajor(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t db) {
  static_assert(N == 64 || N == 128 || N == 256, "head_dim 64, 128 or 256");
  if constexpr (N == 64) wgmma_m64n64k16_rs<T>(d, a, db);
  else if constexpr (N == 128) wgmma_m64n128k16_rs<T>(d, a, db);
  else wgmma_m64n256k16_rs_n<T>(d, a, db);
}

#undef ATTNBENCH_WGMMA_TYPED
#undef ATTNBENCH_D128
#undef ATTNBENCH_D64
#undef ATTNBENCH_D32
#undef ATTNBENCH_D8

}  // namespace attnbench
