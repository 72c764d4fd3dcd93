// The unfused RoPE pass: a kernel that writes rotated copies of head rows, which the
// attention, decode and paged families run before a kernel that does not fuse RoPE (the
// baseline that fused kernels are measured against, and what a framework that rotates in
// its own op does). Memory-bound: each element is read and written once.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <stdexcept>

#include "kernels/common/kernels.hpp"
#include "kernels/common/rope.cuh"

namespace attnbench {
namespace {

// Token s of sequence b: its position, and the row (of `heads` head rows) it lands in.
__device__ __forceinline__ int position(const RopeRows& r, int64_t b, int64_t s) {
  return static_cast<int>(s) + (r.start ? r.start[b] : r.last ? r.last[b] - 1 : r.offset);
}
__device__ __forceinline__ int64_t dst_row(const RopeRows& r, int64_t b, int64_t s, int64_t h) {
  return r.start ? ((b * r.dst_seq + r.start[b] + s) * r.heads + h) : ((b * r.seq + s) * r.heads + h);
}

// Any even rotary_dim: thread k of a row handles two elements: pair k when k < rotary_dim / 2 (neox: elements k
// and k + rotary_dim / 2, which keeps both streams coalesced; gptj: 2k and 2k + 1), else the
// unrotated elements rotary_dim + 2 (k - rotary_dim / 2) and the one after.
template <class T>
__global__ void rope_rows_kernel(const T* __restrict__ src, T* __restrict__ dst, RopeRows r, RopeTable t) {
  const int64_t per_row = r.head_dim / 2, total = r.batch * r.seq * r.heads * per_row;
  const int half = t.rotary_dim / 2;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int k = static_cast<int>(i % per_row);
    const int64_t row = i / per_row, token = row / r.heads;
    const int64_t b = token / r.seq, s = token % r.seq;
    if (r.start && static_cast<uint64_t>(r.start[b] + s) >= static_cast<uint64_t>(r.dst_seq)) continue;  // not in dst
    const T* in = src + row * r.head_dim;
    T* out = dst + dst_row(r, b, s, row % r.heads) * r.head_dim;
    if (k >= half) {
      const int e = t.rotary_dim + 2 * (k - half);
      out[e] = in[e];
      out[e + 1] = in[e + 1];
      continue;
    }
    const int pos = position(r, b, s);
    const int ex = t.style == RopeTable::neox ? k : 2 * k, ey = t.style == RopeTable::neox ? k + half : 2 * k + 1;
    float x = to_float(in[ex]), y = to_float(in[ey]);
    rope_turn(x, y, rope_cos_sin(t, pos, k));
    out[ex] = from_float<T>(x);
    out[ey] = from_float<T>(y);
  }
}

// The same in 16-byte chunks of N = 16 / sizeof(T) elements, one thread per chunk: neox
// threads of the first rotary_dim / 2 elements turn their chunk with its partner chunk
// rotary_dim / 2 further (whose threads stay idle), gptj threads the pairs within their
// chunk, and the rest copy. Needs rotary_dim % (2N) == 0 (neox) or % N == 0 (gptj), and fewer
// than 2^31 chunks, so indices are 32-bit.
template <class T>
__global__ void rope_chunks_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, RopeRows r, RopeTable t) {
  constexpr int N = 16 / sizeof(T);
  const int chunks = static_cast<int>(r.head_dim) / N;
  const int total = static_cast<int>(r.batch * r.seq * r.heads) * chunks;
  const bool neox = t.style == RopeTable::neox;
  const int rot_chunks = t.rotary_dim / N, partner = rot_chunks / 2;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int c = i % chunks, row = i / chunks;
    const int token = row / static_cast<int>(r.heads);
    const int b = token / static_cast<int>(r.seq), s = token % static_cast<int>(r.seq);
    if (r.start && static_cast<unsigned>(r.start[b] + s) >= static_cast<unsigned>(r.dst_seq)) continue;  // not in dst
    uint4* out = dst + dst_row(r, b, s, row % r.heads) * chunks + c;
    if (c >= rot_chunks) {
      *out = src[i];
      continue;
    }
    if (neox && c >= partner) continue;  // turned by the thread of chunk c - partner
    const int pos = position(r, b, s);
    float x[N], y[N];
    unpack<T>(src[i], x);
    if (neox) {
      unpack<T>(src[i + partner], y);
#pragma unroll
      for (int e = 0; e < N; ++e) rope_turn(x[e], y[e], rope_cos_sin(t, pos, c * N + e));
      out[partner] = pack<T>(y);
    } else {
#pragma unroll
      for (int e = 0; e < N; e += 2) rope_turn(x[e], x[e + 1], rope_cos_sin(t, pos, (c * N + e) / 2));
    }
    *out = pack<T>(x);
  }
}

template <class T>
void launch(const RopeRows& r, const RopeTable& t, cudaStream_t stream) {
  constexpr int kThreads = 256;
  constexpr int64_t N = 16 / sizeof(T);
  const int64_t chunks = r.batch * r.seq * r.heads * (r.head_dim / N);
  const bool vec = chunks < (int64_t{1} << 31) && t.rotary_dim % (t.style == RopeTable::neox ? 2 * N : N) == 0 &&
                   aligned16(r.src) && aligned16(r.dst);
  const int64_t work = vec ? chunks : r.batch * r.seq * r.heads * (r.head_dim / 2);
  const unsigned blocks = static_cast<unsigned>(std::clamp<int64_t>(ceil_div(work, kThreads), 1, 65535 * 8));
  if (vec)
    rope_chunks_kernel<T>
        <<<blocks, kThreads, 0, stream>>>(static_cast<const uint4*>(r.src), static_cast<uint4*>(r.dst), r, t);
  else
    rope_rows_kernel<T><<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(r.src), static_cast<T*>(r.dst), r, t);
}

}  // namespace

void rope_rows(const RopeRows& r, const RopeTable& t, cudaStream_t stream) {
  switch (r.dtype) {
    case DType::fp32:
      return launch<float>(r, t, stream);
    case DType::fp16:
      return launch<__half>(r, t, stream);
    case DType::bf16:
      return launch<__nv_bfloat16>(r, t, stream);
    default:
      throw std::invalid_argument(std::string("rope: no ") + dtype_name(r.dtype) + " path");
  }
}

}  // namespace attnbench
