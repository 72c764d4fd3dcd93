// Mutant suite, GEMM (tests/mutants/README.md). One correct kernel, ctl_gemm, and mutants of
// it that each carry exactly one bug, chosen at compile time by `Bug`.
//
// The kernel: a block of 16x16 threads (8 warps) computes a 16x16 tile of C, one output per
// thread, walking k in 16-wide tiles. Warp 0 stages each tile of A and B in shared memory
// (16 elements of each per lane), a barrier, then every thread reads the tiles; a second
// barrier before the next tile overwrites them. Both layouts, any size, fp32 accumulation.
//   attnbench verify tests/mutants/cases/gemm-odd.toml --plugin tests/mutants/gemm.cu
#include "mutant_math.cuh"

namespace {

using mutant::from_float;
using mutant::to_float;

enum class Bug {
  none,         // the control
  k_tail,       // stops at the last multiple of 16 in k: the partial last k tile is skipped
  no_sync,      // no barrier between staging a tile and reading it: warps 1-7 read a tile
                // warp 0 has not written yet (the previous one, or garbage)
  lowp_acc,     // accumulates in the storage dtype (fp16/bf16) instead of fp32
  stale,        // skips the work when the inputs look like the last launch's (a memo keyed
                // on four elements): the output keeps whatever it held, so only `run`'s check
                // of its last timed launch, which starts from a poisoned output, sees it
  side_stream,  // queues its kernel on a stream of its own (created once), never joined
                // with the stream attnbench passes: attnbench's events time nothing
  nn_as_nt,     // reads B as [n, k] (A.B^T) whatever the layout
};

constexpr int kTile = 16;

// The stale mutant's memo: the bits of a[0], a[1], b[0], b[1] at its last launch.
__device__ unsigned long long g_memo_key = 0;
__device__ int g_memo_valid = 0, g_skip = 0;

template <class T>
__global__ void memo_check(const T* a, const T* b) {
  unsigned long long key = 0;
  const T* src[4] = {a, a + 1, b, b + 1};
  for (int i = 0; i < 4; ++i) {
    unsigned long long bits = 0;
    memcpy(&bits, src[i], sizeof(T));
    key = key * 0x100000001b3ull ^ bits;
  }
  g_skip = g_memo_valid && key == g_memo_key;
  g_memo_key = key;
  g_memo_valid = 1;
}

template <class T, Bug kBug>
__global__ void tiled_gemm(attnbench_gemm_params p) {
  if constexpr (kBug == Bug::stale)
    if (g_skip) return;  // "already computed"
  __shared__ float a_tile[kTile][kTile], b_tile[kTile][kTile + 1];
  const int64_t z = blockIdx.z;
  const T* a = (const T*)p.a + z * p.m * p.k;
  const T* b = (const T*)p.b + z * p.n * p.k;
  const int64_t row0 = blockIdx.y * (int64_t)kTile, col0 = blockIdx.x * (int64_t)kTile;
  const int64_t row = row0 + threadIdx.y, col = col0 + threadIdx.x;
  const int tid = threadIdx.y * kTile + threadIdx.x;  // warp 0 is tid 0..31
  const bool nt = p.layout == 0 || kBug == Bug::nn_as_nt;
  const int64_t k_end = kBug == Bug::k_tail ? p.k / kTile * kTile : p.k;
  using Acc = std::conditional_t<kBug == Bug::lowp_acc, T, float>;
  Acc acc = from_float<Acc>(0.f);
  for (int64_t k0 = 0; k0 < k_end; k0 += kTile) {
    if (tid < 32) {
      for (int e = tid; e < kTile * kTile; e += 32) {
        const int r = e / kTile, c = e % kTile;
        // a_tile[r][c] = A(row0 + r, k0 + c); b_tile[r][c] = B's element (k0 + r, col0 + c)
        const int64_t ar = row0 + r, ak = k0 + c, bk = k0 + r, bc = col0 + c;
        a_tile[r][c] = ar < p.m && ak < p.k ? to_float(a[ar * p.k + ak]) : 0.f;
        float bv = 0.f;
        if (bc < p.n && bk < p.k) bv = to_float(nt ? b[bc * p.k + bk] : b[bk * p.n + bc]);
        b_tile[r][c] = bv;
      }
    }
    if constexpr (kBug != Bug::no_sync) __syncthreads();
    for (int kk = 0; kk < kTile; ++kk) acc = mutant::add_to(acc, a_tile[threadIdx.y][kk] * b_tile[kk][threadIdx.x]);
    __syncthreads();
  }
  if (row < p.m && col < p.n) ((T*)p.c)[z * p.m * p.n + row * p.n + col] = from_float<T>(to_float(acc));
}

template <Bug kBug>
cudaError_t launch(const void* params, void*, cudaStream_t stream) {
  const auto& p = *(const attnbench_gemm_params*)params;
  if constexpr (kBug == Bug::side_stream) {
    static cudaStream_t own = nullptr;  // the bug: its own stream, never joined with `stream`
    if (!own) {
      const cudaError_t e = cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking);
      if (e != cudaSuccess) return e;
    }
    stream = own;
  }
  return mutant::by_dtype(p.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (kBug == Bug::stale) memo_check<T><<<1, 1, 0, stream>>>((const T*)p.a, (const T*)p.b);
    const dim3 grid((unsigned)((p.n + kTile - 1) / kTile), (unsigned)((p.m + kTile - 1) / kTile), (unsigned)p.batch);
    tiled_gemm<T, kBug><<<grid, dim3(kTile, kTile), 0, stream>>>(p);
    return cudaGetLastError();
  });
}

const char* supports(const void* params, const attnbench_device*) {
  const auto& p = *(const attnbench_gemm_params*)params;
  if ((p.m + kTile - 1) / kTile > 65535) return "m must be at most 65535 * 16 (gridDim.y)";
  if (p.batch > 65535) return "batch must be at most 65535 (gridDim.z)";
  return nullptr;
}

// The stale mutant reads two elements of A and of B.
const char* supports_stale(const void* params, const attnbench_device* device) {
  const auto& p = *(const attnbench_gemm_params*)params;
  if (p.m * p.k < 2 || p.n * p.k < 2) return "needs two elements of A and of B";
  return supports(params, device);
}

const attnbench_variant variants[] = {
    {"ctl_gemm", "mutant suite control: 16x16 tiles staged by warp 0, fp32 accumulation", ATTNBENCH_OP_GEMM, supports,
     nullptr, launch<Bug::none>},
    {"mut_gemm_k_tail", "MUTANT: skips the partial last k tile (k not a multiple of 16)", ATTNBENCH_OP_GEMM, supports,
     nullptr, launch<Bug::k_tail>},
    {"mut_gemm_no_sync", "MUTANT: no __syncthreads between staging a tile and reading it", ATTNBENCH_OP_GEMM, supports,
     nullptr, launch<Bug::no_sync>},
    {"mut_gemm_lowp_acc", "MUTANT: accumulates in the storage dtype (fp16/bf16) instead of fp32", ATTNBENCH_OP_GEMM,
     supports, nullptr, launch<Bug::lowp_acc>},
    {"mut_gemm_stale", "MUTANT: skips the work when the inputs look like the last launch's (stale output)",
     ATTNBENCH_OP_GEMM, supports_stale, nullptr, launch<Bug::stale>},
    {"mut_gemm_side_stream", "MUTANT: runs on a stream of its own, never joined with attnbench's", ATTNBENCH_OP_GEMM,
     supports, nullptr, launch<Bug::side_stream>},
    {"mut_gemm_nn_as_nt", "MUTANT: reads B as [n, k] (A.B^T) whatever the layout", ATTNBENCH_OP_GEMM, supports, nullptr,
     launch<Bug::nn_as_nt>},
};

}  // namespace

ATTNBENCH_PLUGIN(variants)
