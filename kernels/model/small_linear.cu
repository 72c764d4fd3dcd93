// A decode step's projections at batch <= 8, with what surrounds them fused in: at m = 1-8
// rows a projection is a matrix-vector product bound by reading W once, and the kernels
// around it (LayerNorm before, bias, GELU, the residual add, the QKV split after) are as long
// as it is. Every warp takes whole output columns (W's rows, read with 16-byte loads), dots
// them with the m input rows each block keeps in shared memory, and writes the column's m
// results through the epilogue. With a LayerNorm prologue each block normalises the m rows of
// the fp32 residual stream itself (a few KB from L2) instead of waiting on a kernel for it.
// Results are rounded exactly where the unfused chain stores them.
#include <algorithm>
#include <cfloat>

#include "kernels/common/dispatch.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/model/model.cuh"
#include "kernels/model/model.hpp"

namespace attnbench {
namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;

// A logit and its id as one 64-bit key whose unsigned order is (larger logit, then lower
// id): the bits of a float made monotone, then the id's complement. atomicMax over the keys
// of a row leaves its greedy token.
__device__ __forceinline__ unsigned long long argmax_key(float v, int64_t id) {
  const unsigned u = __float_as_uint(v);
  const unsigned ordered = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return (static_cast<unsigned long long>(ordered) << 32) | (0xffffffffu - static_cast<unsigned>(id));
}

// acc[r] += the 16-byte chunk of W's row times row r's elements at c, for the m rows.
template <class T>
__device__ __forceinline__ void dot_chunk(const uint4& chunk, const T* a, int64_t k, int64_t m, int64_t c, float* acc) {
  constexpr int kPer = 16 / sizeof(T);
  const T* wv = reinterpret_cast<const T*>(&chunk);
  float wf[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) wf[j] = to_float(wv[j]);
#pragma unroll
  for (int r = 0; r < kSmallLinearRows; ++r) {
    if (r < m) {
      const uint4 in = *reinterpret_cast<const uint4*>(a + r * k + c);
      const T* av = reinterpret_cast<const T*>(&in);
#pragma unroll
      for (int j = 0; j < kPer; ++j) acc[r] = fmaf(wf[j], to_float(av[j]), acc[r]);
    }
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads) small_linear_kernel(SmallLinear p) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* a = reinterpret_cast<T*>(smem);  // [m, k]: the input rows as the chain stores them
  const int64_t m = p.m, k = p.k;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;

  if (p.in == SmallLinear::In::layernorm) {
    // A warp a row, two passes (the deviations' squares summed: no cancellation), no block barrier.
    // (One block reduction for all rows at once measured slower: run 84.)
    const T* g = static_cast<const T*>(p.gamma);
    const T* b = static_cast<const T*>(p.beta);
    for (int64_t r = warp; r < m; r += kWarps) {
      const float* x = p.x + r * k;
      float sum = 0;
      for (int64_t c = lane; c < k; c += 32) sum += x[c];
      const float mean = warp_sum(sum) / static_cast<float>(k);
      float squares = 0;
      for (int64_t c = lane; c < k; c += 32) squares += (x[c] - mean) * (x[c] - mean);
      const float rstd = rsqrtf(warp_sum(squares) / static_cast<float>(k) + p.eps);
      for (int64_t c = lane; c < k; c += 32)
        a[r * k + c] = from_float<T>((x[c] - mean) * rstd * to_float(g[c]) + to_float(b[c]));
    }
  } else {
    const uint4* src = static_cast<const uint4*>(p.a);
    uint4* dst = reinterpret_cast<uint4*>(a);
    for (int64_t i = threadIdx.x; i < m * k * static_cast<int64_t>(sizeof(T)) / 16; i += kThreads) dst[i] = src[i];
  }
  __syncthreads();

  constexpr int64_t kStep = 32 * (16 / sizeof(T));  // a warp's 16-byte loads cover this many elements
  constexpr int kInFlight = 4;                      // loads a lane issues before it uses them
  const T* w = static_cast<const T*>(p.w);
  const T* bias = static_cast<const T*>(p.bias);
  for (int64_t n = blockIdx.x * int64_t{kWarps} + warp; n < p.n; n += int64_t{gridDim.x} * kWarps) {
    float acc[kSmallLinearRows] = {};
    const T* row = w + n * k;
    int64_t c = lane * (16 / sizeof(T));
    for (; c + (kInFlight - 1) * kStep < k; c += kInFlight * kStep) {
      uint4 chunk[kInFlight];
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) chunk[u] = __ldg(reinterpret_cast<const uint4*>(row + c + u * kStep));
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) dot_chunk(chunk[u], a, k, m, c + u * kStep, acc);
    }
    for (; c < k; c += kStep) dot_chunk(__ldg(reinterpret_cast<const uint4*>(row + c)), a, k, m, c, acc);
#pragma unroll
    for (int r = 0; r < kSmallLinearRows; ++r) acc[r] = warp_sum(acc[r]);
    // Lane r writes row r's result.
    if (lane >= m) continue;
    float v = 0;
#pragma unroll
    for (int r = 0; r < kSmallLinearRows; ++r)
      if (r == lane) v = acc[r];
    const int64_t r = lane;
    switch (p.out) {
      case SmallLinear::Out::qkv_to_cache: {
        // q, k, v after their bias, as the unfused split stores them: the product stored, plus the bias, stored.
        const T x = from_float<T>(to_float(from_float<T>(v)) + to_float(bias[n]));
        const int64_t width = p.n / 3, which = n / width, e = n % width;
        if (which == 0)
          static_cast<T*>(p.q)[r * width + e] = x;
        else
          static_cast<T*>(which == 1 ? p.k_cache : p.v_cache)[(r * p.max_context + p.positions[r]) * width + e] = x;
        break;
      }
      case SmallLinear::Out::residual:
        p.residual[r * p.n + n] += to_float(from_float<T>(v)) + to_float(bias[n]);
        break;
      case SmallLinear::Out::bias_gelu:
        static_cast<T*>(p.out_rows)[r * p.n + n] =
            from_float<T>(gelu_tanh(to_float(from_float<T>(v)) + to_float(bias[n])));
        break;
      case SmallLinear::Out::logits: {
        const int64_t step = p.positions[r] - (p.prompt - 1);
        if (step < 0 || step >= p.generate) break;
        p.logits[(step * p.m + r) * p.n + n] = v;
        if (v == v) atomicMax(p.best + r, argmax_key(v, n));
        break;
      }
    }
  }
}

__global__ void greedy_finish_kernel(GreedyFinish p) {
  const int64_t b = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (b >= p.seq.batch || step_of(p.seq, b) < 0) return;
  const unsigned long long key = p.best[b];
  const int64_t id = 0xffffffffu - static_cast<unsigned>(key & 0xffffffffu);
  p.best[b] = 0;
  // No logit written (all NaN): token 0 keeps the next step's reads in bounds.
  advance(p.seq, b, key && id < p.seq.vocab ? static_cast<int32_t>(id) : 0);
}

}  // namespace

std::string small_linear_supports(int64_t m, int64_t k, DType dtype) {
  if (m < 1 || m > kSmallLinearRows) return "batch " + std::to_string(m) + ": the fused decode step takes 1 to 8";
  if ((k * static_cast<int64_t>(dtype_bytes(dtype))) % 16 != 0) return "rows of W must be whole 16-byte loads";
  return "";
}

void small_linear(const SmallLinear& p, cudaStream_t stream) {
  with_storage(p.dtype, "model/small_linear", [&](auto tag) {
    using T = decltype(tag);
    const std::size_t smem = static_cast<std::size_t>(p.m * p.k) * sizeof(T);
    static bool opted_in = false;  // per instantiation: its own static
    if (!opted_in) {
      check_cuda(cudaFuncSetAttribute(small_linear_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, 160 * 1024),
                 "model/small_linear: shared memory");
      opted_in = true;
    }
    // A column a warp, up to every SM busy a few times over (the logits' 50257 columns then
    // take several a warp, each block's prologue paid once for them).
    const int64_t blocks = std::min<int64_t>(ceil_div(p.n, kWarps), 132 * 4);
    small_linear_kernel<T><<<static_cast<unsigned>(blocks), kThreads, smem, stream>>>(p);
  });
  check_launch("model/small_linear");
}

void greedy_finish(const GreedyFinish& p, cudaStream_t stream) {
  greedy_finish_kernel<<<1, 32, 0, stream>>>(p);
  check_launch("model/greedy_finish");
}

}  // namespace attnbench
