// sample rung 1, sort: the way PyTorch-style samplers do it (vLLM's apply_top_k_top_p sorts
// each row, reads the top-k threshold at position k - 1, takes a cumulative sum of the sorted
// probabilities for top-p). Here: every row sorted at once by one CUB radix sort of 64-bit keys,
// the row in the high bits and the logit's order key (descending) below it, as PyTorch sorts
// segments (CUB's segmented radix sort spills registers on sm_90a, this does not); then a
// block per row reads the thresholds off its sorted row: the
// max at 0, top-k's k-th largest at k - 1, top-p's from a prefix scan of the sorted weights
// (the first position whose mass before it reaches top_p · Z; the value just before it is
// the smallest kept), and the draw over the original row in vocabulary order
// (draw.cuh). The radix sort reads and writes 8-byte keys once per 8-bit digit (4-5 passes for
// fp16/bf16, 6-7 for fp32), which is what the sorting-free rung 2 saves.
// Not yet timed on a GPU (written for issue 52; compiled for sm_90a).
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>

#include "kernels/common/dispatch.cuh"
#include "kernels/common/philox.hpp"
#include "kernels/sample/draw.cuh"
#include "kernels/sample/rungs.hpp"

namespace attnbench::sample_impl {
namespace {

constexpr int kPer = 4;  // consecutive elements a thread scans per chunk

// The workspace: the keys and the sorted keys [batch, vocab] (uint64: the row, then the logit's
// order key complemented, so that ascending order is descending logits), then CUB's scratch.
struct SortLayout {
  std::size_t sorted = 0, cub = 0, cub_bytes = 0, total = 0;
  int end_bit = 0;
};

std::size_t align256(std::size_t b) { return (b + 255) / 256 * 256; }

int bits_for(int64_t batch) {
  int bits = 0;
  while ((int64_t{1} << bits) < batch) ++bits;
  return bits;
}

SortLayout layout(const SampleParams& p) {
  SortLayout l;
  const std::size_t items = static_cast<std::size_t>(p.batch * p.vocab);
  l.end_bit = static_cast<int>(dtype_bytes(p.dtype)) * 8 + bits_for(p.batch);
  l.sorted = align256(items * sizeof(uint64_t));
  l.cub = l.sorted + align256(items * sizeof(uint64_t));
  const cudaError_t query =
      cub::DeviceRadixSort::SortKeys(nullptr, l.cub_bytes, static_cast<const uint64_t*>(nullptr),
                                     static_cast<uint64_t*>(nullptr), static_cast<int>(items), 0, l.end_bit);
  // Without a device to ask (a dry run's listing), CUB's bound: the keys' second buffer and
  // its tuning state.
  if (query != cudaSuccess) l.cub_bytes = items * sizeof(uint64_t) + (std::size_t{1} << 20);
  l.total = l.cub + align256(l.cub_bytes);
  return l;
}

template <class T>
__global__ void key_kernel(const T* x, uint64_t* keys, int64_t vocab, int64_t items) {
  constexpr uint32_t all = kKeyBits<T> == 32 ? ~0u : (1u << kKeyBits<T>)-1;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < items; i += int64_t{gridDim.x} * blockDim.x)
    keys[i] = (static_cast<uint64_t>(i / vocab) << kKeyBits<T>) | (all - order_key<T>(logit(x[i])));
}

// A block per row over its sorted keys (descending logits) and its logits x.
template <class T>
__global__ void __launch_bounds__(kSampleThreads)
    select_kernel(const T* logits, const uint64_t* sorted, SampleParams p) {
  using Reduce = cub::BlockReduce<float, kSampleThreads>;
  __shared__ typename Reduce::TempStorage reduce_tmp;
  __shared__ float shared_value;
  const int64_t row = blockIdx.x;
  const int n = static_cast<int>(p.vocab);
  const T* x = logits + row * n;
  const uint64_t* keys = sorted + row * n;
  constexpr uint32_t all = kKeyBits<T> == 32 ? ~0u : (1u << kKeyBits<T>)-1;
  auto s = [&](int i) { return key_value<T>(all - static_cast<uint32_t>(keys[i] & all)); };

  if (p.temperature == 0) {  // greedy: the first index of the max
    float m;
    int arg;
    row_max(x, n, m, arg);
    if (threadIdx.x == 0) p.tokens[row] = static_cast<int32_t>(arg);
    return;
  }
  const float m = s(0), inv_t = 1.f / p.temperature, min_p = p.min_p;
  // top-k: every token at least the k-th largest value.
  const float kth = p.top_k > 0 && p.top_k < n ? s(static_cast<int>(p.top_k) - 1) : -INFINITY;
  auto in_k = [&](float v, float w) { return v >= kth && (min_p <= 0 || w >= min_p); };
  // Z: the mass of what min-p and top-k keep, over the sorted row.
  auto mass = [&](auto keep) {
    float local = 0;
    for (int i = threadIdx.x; i < n; i += kSampleThreads) {
      const float v = s(i), w = weight(v, m, inv_t);
      if (keep(v, w)) local += w;
    }
    const float total = Reduce(reduce_tmp).Sum(local);
    if (threadIdx.x == 0) shared_value = total;
    __syncthreads();
    const float out = shared_value;
    __syncthreads();
    return out;
  };
  float smallest = kth;  // the smallest kept logit
  float total = mass(in_k);
  if (p.top_p < 1) {
    // The first sorted position whose kept mass before it reaches top_p · Z.
    const float bound = p.top_p * total;
    const int cut = first_in_prefix<kPer>(
                        n,
                        [&](int i) {
                          const float v = s(i), w = weight(v, m, inv_t);
                          return in_k(v, w) ? w : 0.f;
                        },
                        [&](float before, float) { return before >= bound; })
                        .first;
    // cut >= 1: nothing is before position 0, and top_p · Z > 0.
    if (cut != INT_MAX) smallest = fmaxf(smallest, s(cut - 1));
    total = mass([&](float v, float w) { return v >= smallest && in_k(v, w); });
  }
  const float target = sample_uniform(p.seed, static_cast<uint64_t>(row)) * total;
  const int token =
      draw_token<kPer>(x, n, m, inv_t, target, [&](float v, float w) { return v >= smallest && in_k(v, w); });
  if (threadIdx.x == 0) p.tokens[row] = static_cast<int32_t>(token);
}

}  // namespace

std::size_t sort_workspace(const SampleParams& p) { return layout(p).total; }

void sort(const SampleParams& p, const LaunchContext& ctx) {
  const SortLayout l = layout(p);
  auto* base = static_cast<uint8_t*>(ctx.workspace);
  auto* keys = reinterpret_cast<uint64_t*>(base);
  auto* sorted = reinterpret_cast<uint64_t*>(base + l.sorted);
  with_storage(p.dtype, "sample sort", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(p.logits);
    const int64_t items = p.batch * p.vocab;
    const int blocks = static_cast<int>(std::min<int64_t>((items + 255) / 256, 4096));
    key_kernel<T><<<blocks, 256, 0, ctx.stream>>>(x, keys, p.vocab, items);
    check_launch("sample/sort: keys");
    std::size_t cub_bytes = l.cub_bytes;
    check_cuda(cub::DeviceRadixSort::SortKeys(base + l.cub, cub_bytes, static_cast<const uint64_t*>(keys), sorted,
                                              static_cast<int>(items), 0, l.end_bit, ctx.stream),
               "sample sort: radix sort");
    select_kernel<T><<<static_cast<unsigned>(p.batch), kSampleThreads, 0, ctx.stream>>>(x, sorted, p);
  });
  check_launch("sample/sort");
}

}  // namespace attnbench::sample_impl
