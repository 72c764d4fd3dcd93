// Tool: how fast a cold W4A16 weight matrix can be read at all, by three load paths (built by hand).
// A read-only model of gemm_q's small-m stream (issue 52: W4A16 at m <= 16 >= 3.0x the dense
// fp16 cuBLAS time): the packed weights of n x k int4 (n rows of k / 2 bytes: 8.4 MB at 4096 x
// 4096, 29.4 MB at 4096 x 14336) read once after an L2 flush, each byte folded into an XOR so
// that nothing is skipped, no dequantization, no math. Timed like attnbench's cold mode: a read
// flush, then an event, one launch, an event (the launch's GPU-side start inside the time).
//   empty        a kernel of one block that does nothing: the launch floor of the events
//   ldg_tile     stream_gemv's pattern (4_stream_gemv.cu): 16 rows a tile, 8 warps a tile each
//                a k slice, lane (g, t) 16 bytes of rows g and g + 8 a step, every step's
//                ld.global.nc issued before the first XOR (k 4096: 4 steps, all in flight)
//   ldg_line     the same bytes as whole 512-byte lines: lane i of a warp the i-th 16 bytes
//   bulk_tile    one cp.async.bulk (TMA) a 16-row tile's contiguous rows into shared memory by
//                one thread, split in chunks of 8 KB on one mbarrier; the block XORs its copy
// Whatever ldg_tile reaches is stream_gemv's ceiling with its loads; if bulk_tile is much
// faster, a TMA rung is worth building. Run 287 (H200): empty 2.78 µs; 4096 x 4096 ldg_tile 5.92,
// ldg_line 5.73, bulk_tile 6.14; 14336 x 4096 10.59, 10.27, 10.78 (bench notes, 2026-12-07).
// From the repository root:
//   nvcc -O3 -arch=sm_90a -std=c++17 -I. -o gemv_stream_bench tools/gemv_stream_bench.cu && ./gemv_stream_bench
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "kernels/common/copy.cuh"

using namespace attnbench;
#define CK(x)                                                                      \
  do {                                                                             \
    cudaError_t e = (x);                                                           \
    if (e != cudaSuccess) {                                                        \
      printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e));             \
      exit(1);                                                                     \
    }                                                                              \
  } while (0)

// The read flush (attnbench's default): every line of a buffer of 256 MB read with caching loads,
// so the L2 holds clean lines of it and nothing of the weights.
__global__ void flush_read(const uint4* f, size_t n16, int* out) {
  uint32_t acc = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n16; i += size_t{gridDim.x} * blockDim.x) {
    const uint4 v = f[i];
    acc ^= v.x ^ v.w;
  }
  if (acc == 0x12345678u) out[2] = acc;
}

__global__ void empty_kernel(int* out) {
  if (threadIdx.x == 1023) out[0] = 0;
}

// stream_gemv's loads: tile = blockIdx.x (16 rows), warp w takes steps [w·S/8, (w+1)·S/8) of the
// row's S = row_bytes / 64 steps, lane (g, t) the 16 bytes at step·64 + 16t of rows g, g + 8.
__global__ void __launch_bounds__(256, 2) ldg_tile(const uint8_t* w, int row_bytes, int* out) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int steps = row_bytes / 64, begin = warp * steps / 8, end = (warp + 1) * steps / 8;
  const uint8_t* r0 = w + (int64_t{blockIdx.x} * 16 + g) * row_bytes + 16 * t;
  const uint8_t* r1 = r0 + int64_t{8} * row_bytes;
  const uint64_t pol = l2_policy(true);
  uint32_t acc = 0;
  int i = begin;
  for (; i + 4 <= end; i += 4) {
    uint4 v[8];
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      v[2 * s] = ld_stream(r0 + (i + s) * 64, pol);
      v[2 * s + 1] = ld_stream(r1 + (i + s) * 64, pol);
    }
#pragma unroll
    for (int s = 0; s < 8; ++s) acc ^= v[s].x ^ v[s].y ^ v[s].z ^ v[s].w;
  }
  for (; i < end; ++i) {
    const uint4 a = ld_stream(r0 + i * 64, pol), b = ld_stream(r1 + i * 64, pol);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w;
  }
  if (acc == 0x12345678u) out[1] = acc;
}

// The same bytes as a tile's rows read line by line: 256 threads, each 16 bytes a load, 8 loads
// in flight a thread (32 KB a block at once).
__global__ void __launch_bounds__(256, 2) ldg_line(const uint8_t* w, int tile_bytes, int* out) {
  const uint8_t* base = w + int64_t{blockIdx.x} * tile_bytes;
  const uint64_t pol = l2_policy(true);
  uint32_t acc = 0;
  for (int off = threadIdx.x * 16; off < tile_bytes; off += 8 * 256 * 16) {
    uint4 v[8];
#pragma unroll
    for (int s = 0; s < 8; ++s)
      v[s] = off + s * 4096 < tile_bytes ? ld_stream(base + off + s * 4096, pol) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int s = 0; s < 8; ++s) acc ^= v[s].x ^ v[s].y ^ v[s].z ^ v[s].w;
  }
  if (acc == 0x12345678u) out[1] = acc;
}

// One thread copies the tile's bytes (contiguous: 16 whole rows) into shared memory by bulk
// copies of 8 KB on one mbarrier; then the block XORs them.
__global__ void __launch_bounds__(128) bulk_tile(const uint8_t* w, int tile_bytes, int* out) {
  extern __shared__ __align__(128) uint8_t sm[];
  __shared__ __align__(8) uint64_t bar;
  const uint32_t s0 = static_cast<uint32_t>(__cvta_generic_to_shared(sm));
  const uint32_t b = static_cast<uint32_t>(__cvta_generic_to_shared(&bar));
  if (threadIdx.x == 0) mbar_init(b, 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    mbar_expect_tx(b, tile_bytes);
    const uint8_t* src = w + int64_t{blockIdx.x} * tile_bytes;
    for (int off = 0; off < tile_bytes; off += 8192) bulk_copy(s0 + off, src + off, min(8192, tile_bytes - off), b);
  }
  mbar_wait(b, 0);
  uint32_t acc = 0;
  for (int off = threadIdx.x * 16; off < tile_bytes; off += 128 * 16) {
    const uint4 v = *reinterpret_cast<const uint4*>(sm + off);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) out[1] = acc;
}

int main() {
  CK(cudaFree(0));
  int* out;
  CK(cudaMalloc(&out, 64));
  const size_t flush_bytes = size_t{256} << 20;
  uint8_t* flush;
  CK(cudaMalloc(&flush, flush_bytes));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  printf("shape            path        median us   GB/s   (cold L2: 256 MB read before each launch)\n");
  for (int n : {4096, 14336}) {
    const int k = 4096, row_bytes = k / 2, tile_bytes = 16 * row_bytes;
    const size_t bytes = size_t{static_cast<size_t>(n)} * row_bytes;
    uint8_t* w;
    CK(cudaMalloc(&w, bytes));
    CK(cudaMemset(w, 0x5a, bytes));
    auto time = [&](const char* name, auto launch) {
      std::vector<float> t;
      for (int i = 0; i < 31; ++i) {
        flush_read<<<132 * 8, 256>>>(reinterpret_cast<const uint4*>(flush), flush_bytes / 16, out);
        CK(cudaEventRecord(e0));
        launch();
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        CK(cudaGetLastError());
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms);
      }
      std::sort(t.begin(), t.end());
      const double us = t[t.size() / 2] * 1e3;
      printf("n %5d x k %d  %-10s %9.2f %7.0f\n", n, k, name, us, bytes / us / 1e3);
    };
    const int tiles = n / 16;
    time("empty", [&] { empty_kernel<<<1, 32>>>(out); });
    time("ldg_tile", [&] { ldg_tile<<<tiles, 256>>>(w, row_bytes, out); });
    time("ldg_line", [&] { ldg_line<<<tiles, 256>>>(w, tile_bytes, out); });
    CK(cudaFuncSetAttribute(bulk_tile, cudaFuncAttributeMaxDynamicSharedMemorySize, tile_bytes));
    time("bulk_tile", [&] { bulk_tile<<<tiles, 128, tile_bytes>>>(w, tile_bytes, out); });
    CK(cudaFree(w));
  }
  return 0;
}
