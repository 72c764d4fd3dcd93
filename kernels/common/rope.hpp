// Rotary position embedding (RoPE) as every kernel takes it: a table of (cos, sin) per
// position and pair, computed once on the host in fp64 and stored in fp32, the way serving
// engines keep theirs (vLLM's cos_sin_cache). Kernels never compute an angle: position ·
// theta^(-2i/d) reaches 1e5 radians, where an fp32 angle is off by 1e-2 and __sinf by more.
// Plain C++: included by host code and device code.
#pragma once
#include <vector_types.h>  // float2

#include <cstdint>

#include "kernels/common/host_device.hpp"

namespace attnbench {

struct RopeTable {
  enum Style : int { none = 0, neox = 1, gptj = 2 };
  // neox pairs element i with i + rotary_dim / 2 (rotate halves), gptj elements 2i and 2i + 1
  // (interleaved); pair i turns by position · theta^(-2i / rotary_dim). Elements from
  // rotary_dim on are left alone.
  int style = none;
  int rotary_dim = 0;               // even, at most head_dim
  int first = 0;                    // the position of the table's row 0 (can be negative)
  int rows = 0;                     // positions in the table: [first, first + rows)
  const float2* cos_sin = nullptr;  // [rows][rotary_dim / 2] on the device
  ATTNBENCH_HOST_DEVICE bool on() const { return style != none; }
};

}  // namespace attnbench

#include <cuda_runtime_api.h>

#include "kernels/common/dtype.hpp"

namespace attnbench {

// The RoPE pass (rope.cu): head rows [batch][seq][heads][head_dim] of src, rotated into dst,
// token i of sequence b at position i + offset, or at last[b] - 1 + i when `last` is given
// (decode: the new token at its context's end). dst has src's layout, unless `start` is
// given: then token i lands in row start[b] + i of a [batch][dst_seq][heads][head_dim] cache
// and sits at that position (cache_append: new keys turned as they are stored).
struct RopeRows {
  const void* src = nullptr;
  void* dst = nullptr;
  DType dtype = DType::fp32;  // fp32, fp16 or bf16
  int64_t batch = 1, seq = 1, heads = 1, head_dim = 64;
  int offset = 0;
  const int32_t* last = nullptr;   // [batch] on the device, or nullptr
  const int32_t* start = nullptr;  // [batch] on the device, or nullptr
  int64_t dst_seq = 0;             // rows per sequence of dst with `start`
  std::size_t bytes() const { return static_cast<std::size_t>(batch * seq * heads * head_dim) * dtype_bytes(dtype); }
};

// One launch on `stream`; the caller checks it.
void rope_rows(const RopeRows& rows, const RopeTable& table, cudaStream_t stream);

}  // namespace attnbench
