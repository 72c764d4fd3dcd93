// What attention's unfused rungs (1_naive.cu, 2_cublas.cu) share: the workspace holding S and
// P, the elementwise grid, the softmax family's rung that turns S into P, the mask kernel's
// launch (1_naive.cu) and the checks.
#pragma once
#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "kernels/attention/shape.cuh"
#include "kernels/softmax/softmax.hpp"

namespace attnbench::attention_impl {

// S and P are [batch·heads, seq_q, ld] fp32 in the workspace, one after the other, then
// (cublas) six arrays of batch·heads pointers. cublas pads rows to ld = seq_k rounded up
// to 8, so that every matrix row and every per-head matrix starts 32-byte aligned (16 in
// the 16-bit copy of P) for its tensor-core kernels; the padding columns are -inf in S,
// hence 0 in P, and the GEMMs never read them. naive keeps ld = seq_k. With attention sinks
// column seq_k holds the head's sink: the softmax over ld columns takes it into every row's
// max and denominator, and P·V, which reads seq_k columns, drops its weight.
struct UnfusedLayout {
  int64_t ld;                // elements per row of S and P
  std::size_t matrix_bytes;  // one of S, P; a multiple of 256
  std::size_t pointer_bytes;
  std::size_t total() const { return 2 * matrix_bytes + pointer_bytes; }
};

inline UnfusedLayout unfused_layout(const AttentionParams& p, bool for_cublas) {
  UnfusedLayout w;
  const int64_t cols = p.seq_k + (p.score.sinks ? 1 : 0);
  w.ld = for_cublas ? ceil_div(cols, 8) * 8 : cols;
  w.matrix_bytes = round_up_256(static_cast<std::size_t>(p.batch * p.heads * p.seq_q * w.ld) * sizeof(float));
  w.pointer_bytes = for_cublas ? round_up_256(6 * static_cast<std::size_t>(p.batch * p.heads) * sizeof(void*)) : 0;
  return w;
}

constexpr int kElementwiseThreads = 256;

inline unsigned elementwise_blocks(int64_t n) { return static_cast<unsigned>(ceil_div(n, kElementwiseThreads)); }

inline std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

// s: [batch·heads, seq_q, ld] fp32, in place: scaled, ALiBi bias added, masked to -inf
// (scale_and_mask_kernel, 1_naive.cu), and with a block-sparse mask -inf outside its live
// blocks. The caller checks the launch.
void launch_scale_and_mask(float* s, const Shape& sh, int64_t ld, const BlockSparse& sparse, cudaStream_t stream);

inline const Variant<SoftmaxParams>& softmax_variant(const char* name) {
  const Variant<SoftmaxParams>* v = find_variant(softmax_variants(), name);
  if (!v) throw std::logic_error(std::string("attention: softmax variant ") + name + " is gone");
  return *v;
}

// The softmax of the unfused paths: rows of S (fp32, -inf where masked) into P.
inline SoftmaxParams softmax_params(const AttentionParams& p, const float* s, float* out, int64_t ld) {
  SoftmaxParams sp;
  sp.x = s;
  sp.y = out;
  sp.rows = p.batch * p.heads * p.seq_q;
  sp.cols = ld;
  sp.dtype = DType::fp32;
  return sp;
}

// The unfused paths hold S and P for every head at once: refused beyond a quarter of the
// card (total_memory 0 means unknown: allowed), and within what their grids and the
// softmax can index.
inline std::string unfused_reason(const AttentionParams& p, const DeviceCaps& caps, bool for_cublas) {
  std::string r = common_reason(p);
  if (!r.empty()) return r;
  const UnfusedLayout w = unfused_layout(p, for_cublas);
  if (caps.total_memory > 0 && w.total() > caps.total_memory / 4)
    return "score and probability matrices need " + gib(static_cast<double>(w.total())) +
           " (more than a quarter of the card's " + gib(static_cast<double>(caps.total_memory)) + ")";
  // The widest elementwise grid: one thread per score or per output element.
  const int64_t threads = p.batch * p.heads * p.seq_q * std::max(w.ld, p.head_dim);
  if (ceil_div(threads, kElementwiseThreads) > INT_MAX) return "too many scores for one elementwise grid";
  const SoftmaxParams sp = softmax_params(p, nullptr, nullptr, w.ld);
  r = softmax_variant(for_cublas ? "warp_online" : "block_reduce").supports(sp, caps);
  return r.empty() ? r : "softmax: " + r;
}

}  // namespace attnbench::attention_impl
