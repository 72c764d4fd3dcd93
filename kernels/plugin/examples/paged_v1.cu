// An example plugin: paged attention in vLLM's v1 style, simply. One block of 4 warps per
// (sequence, query head) walks the sequence's block table; a warp takes every 4th token,
// finds its key and value in the pool's layouts, and keeps an online softmax; the warps
// merge at the end. fp8 caches are dequantised with k_scale and v_scale.
//   attnbench run paged --plugin kernels/plugin/examples/paged_v1.cu
#include "example_math.cuh"

namespace {

constexpr int kWarps = 4, kDims = 8;  // head_dim <= 256

template <class T, class Cache>
__global__ void paged_kernel(attnbench_paged_params p) {
  extern __shared__ float scratch[];
  const int64_t b = blockIdx.y, h = blockIdx.x;
  const int64_t g = h / (p.heads / p.kv_heads);
  const int64_t x = 16 / sizeof(Cache);  // a key's head dims come in runs of x
  const int context = p.context_lens[b];
  const int first = example::first_key(context, p.window);
  const int32_t* table = p.block_tables + b * p.max_blocks_per_seq;
  const T* q = (const T*)p.q + (b * p.heads + h) * p.head_dim;
  float qr[kDims];
  example::load_query(q, p.head_dim, qr);
  example::Online<kDims> online;
  for (int t = first + threadIdx.x / 32; t < context; t += kWarps) {
    const int64_t block = table[t / p.block_size], offset = t % p.block_size;
    // k_cache [num_blocks, kv_heads, head_dim / x, block_size, x]; v_cache [num_blocks, kv_heads, head_dim, block_size]
    const Cache* k = (const Cache*)p.k_cache + (block * p.kv_heads + g) * p.head_dim * p.block_size;
    const Cache* v = (const Cache*)p.v_cache + (block * p.kv_heads + g) * p.head_dim * p.block_size;
    float dot = 0.f;
    for (int i = 0; i < kDims; ++i) {
      const int d = threadIdx.x % 32 + 32 * i;
      if (d < p.head_dim) dot += qr[i] * example::to_float(k[(d / x) * p.block_size * x + offset * x + d % x]);
    }
    const float score = example::finish_score(example::warp_sum(dot) * p.k_scale, p.score, (int)h, context - 1 - t);
    online.add(score, (int)p.head_dim,
               [&](int d) { return example::to_float(v[d * p.block_size + offset]) * p.v_scale; });
  }
  online.write(scratch, (int)p.head_dim, (T*)p.o + (b * p.heads + h) * p.head_dim);
}

template <class T, class Cache>
cudaError_t launch_as(const attnbench_paged_params& p, cudaStream_t stream) {
  const size_t smem = kWarps * (2 + 32 * kDims) * sizeof(float);
  paged_kernel<T, Cache><<<dim3((unsigned)p.heads, (unsigned)p.batch), kWarps * 32, smem, stream>>>(p);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_cache(const attnbench_paged_params& p, cudaStream_t stream) {
  return p.kv_dtype == ATTNBENCH_FP8_E4M3 ? launch_as<T, __nv_fp8_e4m3>(p, stream) : launch_as<T, T>(p, stream);
}

cudaError_t launch(const void* params, void*, cudaStream_t stream) {
  const auto& p = *(const attnbench_paged_params*)params;
  return example::by_dtype(p.dtype, [&](auto t) { return launch_cache<decltype(t)>(p, stream); });
}

const char* supports(const void* params, const attnbench_device*) {
  const auto& p = *(const attnbench_paged_params*)params;
  if (const char* why = example::decode_refusal(p.score, p.rope, p.head_dim, p.batch, kDims)) return why;
  if (p.kv_dtype == ATTNBENCH_FP8_E4M3 && p.dtype == ATTNBENCH_FP32)
    return "an fp8 cache goes with fp16 or bf16 queries";
  return nullptr;
}

const attnbench_variant variants[] = {
    {"my_paged_v1", "example plugin: v1 style, a block per (sequence, head), 4 warps online over strided tokens",
     ATTNBENCH_OP_PAGED, supports, nullptr, launch},
};

}  // namespace

ATTNBENCH_PLUGIN(variants)
