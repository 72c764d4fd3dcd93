// An example plugin: decode attention the simple way. One block of 4 warps per (sequence,
// query head); each warp walks every 4th key of the context with an online softmax, the
// lanes splitting the head dims, and the warps merge at the end. GQA, window, ALiBi and
// soft-capping follow attnbench's definitions; RoPE is left to attnbench's own kernels.
//   attnbench run decode --plugin kernels/plugin/examples/decode_simple.cu
#include "example_math.cuh"

namespace {

constexpr int kWarps = 4, kDims = 8;  // head_dim <= 256

template <class T>
__global__ void decode_kernel(attnbench_decode_params p) {
  extern __shared__ float scratch[];
  const int64_t b = blockIdx.y, h = blockIdx.x;
  const int64_t g = h / (p.heads / p.kv_heads);
  const int context = p.context_lens[b];
  const int first = example::first_key(context, p.window);
  const T* q = (const T*)p.q + (b * p.heads + h) * p.head_dim;
  float qr[kDims];
  example::load_query(q, p.head_dim, qr);
  example::Online<kDims> online;
  for (int j = first + threadIdx.x / 32; j < context; j += kWarps) {
    const int64_t row = ((b * p.max_context + j) * p.kv_heads + g) * p.head_dim;
    const T* k = (const T*)p.k_cache + row;
    const T* v = (const T*)p.v_cache + row;
    float dot = 0.f;
    for (int i = 0; i < kDims; ++i) {
      const int d = threadIdx.x % 32 + 32 * i;
      if (d < p.head_dim) dot += qr[i] * example::to_float(k[d]);
    }
    const float score = example::finish_score(example::warp_sum(dot), p.score, (int)h, context - 1 - j);
    online.add(score, (int)p.head_dim, [&](int d) { return example::to_float(v[d]); });
  }
  online.write(scratch, (int)p.head_dim, (T*)p.o + (b * p.heads + h) * p.head_dim);
}

template <class T>
cudaError_t launch_as(const attnbench_decode_params& p, cudaStream_t stream) {
  const size_t smem = kWarps * (2 + 32 * kDims) * sizeof(float);
  decode_kernel<T><<<dim3((unsigned)p.heads, (unsigned)p.batch), kWarps * 32, smem, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t launch(const void* params, void*, cudaStream_t stream) {
  const auto& p = *(const attnbench_decode_params*)params;
  return example::by_dtype(p.dtype, [&](auto t) { return launch_as<decltype(t)>(p, stream); });
}

const char* supports(const void* params, const attnbench_device*) {
  const auto& p = *(const attnbench_decode_params*)params;
  return example::decode_refusal(p.score, p.rope, p.head_dim, p.batch, kDims);
}

const attnbench_variant variants[] = {
    {"my_decode", "example plugin: a block per (sequence, head), 4 warps online over strided keys", ATTNBENCH_OP_DECODE,
     supports, nullptr, launch},
};

}  // namespace

ATTNBENCH_PLUGIN(variants)
