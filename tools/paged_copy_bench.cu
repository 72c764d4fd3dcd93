// Tool: a copy-only model of paged_flash's streaming, cp.async against bulk copies (built by hand).
// Copy-only model of paged_flash's fp8 d128 streaming (bench notes, run 23): the same grid
// (batch x kv heads, splits), 2 warps per block, 3-stage rings of 32-key tiles, no math, over
// vLLM's layout with sequential or shuffled block tables, the ring filled either by 16-byte
// cp.async per lane (as the kernel did) or by bulk copies (TMA) of whole cache-block regions.
// It showed that cp.async moves the 2 KB regions of block 16 at ~69% of the read bandwidth
// and bulk copies at ~92%, while 4 KB regions (block 32) run at ~93% either way.
// From the repository root (the mbarrier and copy helpers are kernels/common/copy.cuh's):
//   nvcc -O3 -arch=sm_90a -std=c++17 -I. -o paged_copy_bench tools/paged_copy_bench.cu && ./paged_copy_bench
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <random>
#include <algorithm>

#include "kernels/common/copy.cuh"

using namespace attnbench;
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)
constexpr int KVH = 8, D = 128, TK = 32;  // fp8: 128 B per key row
struct P { const char* k; const char* v; const int* tbl; int maxb; int bs; int lbs; int ctx; int splits; int chunk; int* out; };

// MODE 0: cp.async 16 B per lane (ours); MODE 1: bulk copies of whole block regions by lane 0.
template <int MODE, int NS>
__global__ void __launch_bounds__(64) copy_kernel(P p) {
  extern __shared__ __align__(128) unsigned char sm[];
  __shared__ __align__(8) uint64_t bars[2][NS];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int b = blockIdx.x / KVH, h = blockIdx.x % KVH;
  const int begin = blockIdx.y * p.chunk, end = min(p.ctx, begin + p.chunk);
  const int ntiles = (end - begin) / TK;
  const int rb = p.bs * D;  // region bytes
  const int64_t bstride = int64_t{KVH} * rb;
  const int* tbl = p.tbl + b * p.maxb;
  const char* kh = p.k + h * rb; const char* vh = p.v + h * rb;
  const uint32_t ring = (uint32_t)__cvta_generic_to_shared(sm) + warp * NS * 8192;
  const uint32_t bar0 = (uint32_t)__cvta_generic_to_shared(&bars[warp][0]);
  if (MODE == 1 && lane == 0) { for (int s = 0; s < NS; ++s) mbar_init(bar0 + 8 * s, 1); }
  __syncwarp();
  auto issue = [&](int n) {
    const int tile = warp + 2 * n;
    if (tile < ntiles) {
      const int key0 = begin + tile * TK;
      const uint32_t st = ring + (n % NS) * 8192;
      if (MODE == 0) {
        const int key = key0 + lane;
        const char* ks = kh + tbl[key >> p.lbs] * bstride + (key & (p.bs - 1)) * 16;
#pragma unroll
        for (int j = 0; j < 8; ++j) cp_async_16(st + (j * 32 + lane) * 16, ks + (j << p.lbs) * 16);
        const int vd0 = lane >> 1, half = lane & 1, tok = key0 + 16 * half;
        const char* vs = vh + tbl[tok >> p.lbs] * bstride + (vd0 << p.lbs) + (tok & (p.bs - 1));
#pragma unroll
        for (int j = 0; j < 8; ++j) cp_async_16(st + 4096 + (2 * vd0 + half + 32 * j) * 16, vs + ((16 * j) << p.lbs));
      } else if (lane == 0) {
        const uint32_t bar = bar0 + 8 * (n % NS);
        mbar_expect_tx(bar, 8192);
        for (int k = 0; k < TK; k += p.bs) {
          const int64_t off = tbl[(key0 + k) >> p.lbs] * bstride;
          bulk_copy(st + k * 128, kh + off, rb, bar);
          bulk_copy(st + 4096 + k * 128, vh + off, rb, bar);
        }
      }
    }
    if (MODE == 0) cp_async_commit();
  };
  int acc = 0;
  for (int s = 0; s < NS - 1; ++s) issue(s);
  for (int n = 0; warp + 2 * n < ntiles; ++n) {
    __syncwarp();
    issue(n + NS - 1);
    if (MODE == 0) cp_async_wait<NS - 1>(); else mbar_wait(bar0 + 8 * (n % NS), (n / NS) & 1);
    __syncwarp();
    const uint32_t st = ring + (n % NS) * 8192;
    int x; asm volatile("ld.shared.u32 %0, [%1];" : "=r"(x) : "r"(st + lane * 256)); acc += x;
  }
  if (acc == 0x7fffffff) p.out[0] = acc;
}

int main() {
  const int batch = 8, ctx = 32768, splits = 8;
  CK(cudaFree(0));
  int* out; CK(cudaMalloc(&out, 64));
  char* flush; CK(cudaMalloc(&flush, 256 << 20));
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  for (int bs : {16, 32}) for (int rnd = 0; rnd < 2; ++rnd) {
    const int maxb = ctx / bs, need = batch * maxb, nblocks = need + need / 4;
    const int64_t cache = int64_t{nblocks} * KVH * bs * D;
    char *k, *v; CK(cudaMalloc(&k, cache)); CK(cudaMalloc(&v, cache)); CK(cudaMemset(k, 0x11, cache)); CK(cudaMemset(v, 0x22, cache));
    std::vector<int> pool(nblocks); for (int i = 0; i < nblocks; ++i) pool[i] = i;
    std::mt19937 rng(5); if (rnd) std::shuffle(pool.begin(), pool.end(), rng);
    int* tbl; CK(cudaMalloc(&tbl, need * 4)); CK(cudaMemcpy(tbl, pool.data(), need * 4, cudaMemcpyHostToDevice));
    int lbs = 0; while ((1 << lbs) < bs) ++lbs;
    P p{k, v, tbl, maxb, bs, lbs, ctx, splits, ctx / splits, out};
    const double bytes = 2.0 * batch * ctx * KVH * D;
    auto run = [&](const char* name, auto kern, int NS) {
      CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, 2 * NS * 8192));
      std::vector<float> t;
      for (int i = 0; i < 15; ++i) {
        CK(cudaMemsetAsync(flush, i, 256 << 20));
        cudaEventRecord(e0); kern<<<dim3(batch * KVH, splits), 64, 2 * NS * 8192>>>(p); cudaEventRecord(e1);
        CK(cudaEventSynchronize(e1)); CK(cudaGetLastError());
        float ms; cudaEventElapsedTime(&ms, e0, e1); t.push_back(ms);
      }
      std::sort(t.begin(), t.end());
      printf("bs%-2d %-6s %-10s %.4f ms %7.1f GB/s\n", bs, rnd ? "random" : "seq", name, t[7], bytes / t[7] / 1e6);
    };
    run("cpasync3", copy_kernel<0, 3>, 3);
    run("cpasync4", copy_kernel<0, 4>, 4);
    run("bulk3", copy_kernel<1, 3>, 3);
    run("bulk4", copy_kernel<1, 4>, 4);
    cudaFree(k); cudaFree(v); cudaFree(tbl);
  }
}
