// Warp-level tensor cores (sm_80+): mma.sync m16n8k16 with fp32 accumulators, and the
// ldmatrix / movmatrix shuffles that put 16-bit tiles into its fragment layouts.
//
// m16n8k16 fragments (PTX ISA), lane = 4 g + t: A (16x16, row) {a0, a1, a2, a3} = rows {g,
// g + 8, g, g + 8} x cols {2t.., 2t.., 2t + 8.., 2t + 8..}; B (16x8, col) {b0, b1} = rows
// {2t.., 2t + 8..} x col g; C (16x8) = rows {g, g, g + 8, g + 8} x cols {2t, 2t + 1, 2t, 2t + 1}.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace attnbench {

// d += a b for one m16n8k16 tile; T (__half or __nv_bfloat16) is the input type. Not
// volatile: the compiler may schedule it like arithmetic, and drops it when d is unused.
template <class T>
__device__ __forceinline__ void mma_16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                          uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __half>) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
}
// The same with the A fragment as an array (as ldmatrix.x4 fills it), and B as one too.
template <class T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  mma_16816<T>(d, a[0], a[1], a[2], a[3], b0, b1);
}
template <class T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  mma_16816<T>(d, a[0], a[1], a[2], a[3], b[0], b[1]);
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

// The inverse of ldsm_x4: register i (matrix i in the fragment layout) into shared memory,
// lane l giving the address of row l % 8 of matrix l / 8 (sm_90).
__device__ __forceinline__ void stsm_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
#endif
}

// Transposes an 8x8 matrix of 16-bit values held in the mma fragment layout (lane holds row
// lane / 4, columns 2 (lane % 4) and 2 (lane % 4) + 1).
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

}  // namespace attnbench
