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

// The same in 16-byte chunks of N = 16 / sizeof(T) elements. A thread takes one work item of
// a row (a chunk turned with its partner chunk rotary_dim / (2N) further (neox), a chunk
// whose pairs lie within it (gptj), or a chunk past rotary_dim, copied) in up to kHeads heads
// of one token, h0, h0 + stride, ...: every thread has work (a thread per chunk left the neox
// partners' threads idle), the table's entries, the same for every head of a token, are read
// once for all of them, and the heads' loads are all issued before any turn (bench notes runs
// 205-207: the pass 1.3-1.7x faster, at 94% of the copy bandwidth on an H200). Needs
// rotary_dim % (2N) == 0 (neox) or % N == 0 (gptj), and fewer than 2^31 chunks in all, so
// indices are 32-bit.
constexpr int kHeads = 4;

template <class T, bool kNeox>
__global__ void rope_chunks_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, RopeRows r, RopeTable t,
                                   int stride) {
  constexpr int N = 16 / sizeof(T);
  const int chunks = static_cast<int>(r.head_dim) / N, rot_chunks = t.rotary_dim / N, heads = static_cast<int>(r.heads);
  const int skip = kNeox ? rot_chunks / 2 : 0;  // partner chunks: no item of their own
  const int per_row = chunks - skip, total = static_cast<int>(r.batch * r.seq) * stride * per_row;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int j = i % per_row, rest = i / per_row, h0 = rest % stride, token = rest / stride;
    const int c = j < skip ? j : j + skip;
    const int b = token / static_cast<int>(r.seq), s = token % static_cast<int>(r.seq);
    if (r.start && static_cast<unsigned>(r.start[b] + s) >= static_cast<unsigned>(r.dst_seq)) continue;  // not in dst
    const uint4* in = src + int64_t{token} * heads * chunks + c;
    uint4* out = dst + dst_row(r, b, s, 0) * chunks + c;  // a token's head rows are adjacent in both layouts
    const bool turn = c < rot_chunks;
    uint4 x[kHeads], y[kHeads];
#pragma unroll
    for (int q = 0; q < kHeads; ++q) {
      const int h = h0 + q * stride;
      if (h >= heads) break;
      x[q] = in[h * chunks];
      if (kNeox && turn) y[q] = in[h * chunks + skip];
    }
    ChunkTurn<T> k;
    if (turn) k = rope_chunk_turn<T, kNeox>(t, position(r, b, s), c);
#pragma unroll
    for (int q = 0; q < kHeads; ++q) {
      const int h = h0 + q * stride;
      if (h >= heads) break;
      if (turn) {
        rope_turn_chunk<T, kNeox>(x[q], y[q], k);
        if (kNeox) out[h * chunks + skip] = y[q];
      }
      out[h * chunks] = x[q];
    }
  }
}

template <class T>
void launch(const RopeRows& r, const RopeTable& t, cudaStream_t stream) {
  constexpr int kThreads = 256;
  constexpr int64_t N = 16 / sizeof(T);
  const bool neox = t.style == RopeTable::neox;
  const int64_t rows = r.batch * r.seq * r.heads, per_row = r.head_dim / N - (neox ? t.rotary_dim / (2 * N) : 0);
  // kHeads heads a thread where the pass streams enough to be bandwidth-bound (a million
  // items: four per resident thread of an H100); a small one (decode's queries) is
  // latency-bound and takes a head a thread.
  const int64_t stride = rows * per_row >= (int64_t{1} << 20) ? ceil_div(r.heads, kHeads) : r.heads;
  const int64_t items = r.batch * r.seq * stride * per_row;
  const bool vec = rows * (r.head_dim / N) < (int64_t{1} << 31) && t.rotary_dim % (neox ? 2 * N : N) == 0 &&
                   aligned16(r.src) && aligned16(r.dst);
  const int64_t work = vec ? items : rows * (r.head_dim / 2);
  const unsigned blocks = static_cast<unsigned>(std::clamp<int64_t>(ceil_div(work, kThreads), 1, 65535 * 8));
  const auto* src = static_cast<const uint4*>(r.src);
  auto* dst = static_cast<uint4*>(r.dst);
  if (vec && neox)
    rope_chunks_kernel<T, true><<<blocks, kThreads, 0, stream>>>(src, dst, r, t, static_cast<int>(stride));
  else if (vec)
    rope_chunks_kernel<T, false><<<blocks, kThreads, 0, stream>>>(src, dst, r, t, static_cast<int>(stride));
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
