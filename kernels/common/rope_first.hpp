// RoPE as a separate pass before a decode rung (decode, paged): the unfused baseline of the
// kernels that rotate their query as they load it, and how vLLM's v1 and v2 take RoPE. rope_rows writes the rotated
// queries into scratch after the rung's own, and the rung runs on them with RoPE off. P is DecodeParams or PagedParams
// (q, batch, heads, head_dim, dtype, context_lens, rope).
#pragma once
#include <cstddef>
#include <string>

#include "kernels/common/kernels.hpp"
#include "kernels/common/rope.hpp"

namespace attnbench::rope_first {

// One query per sequence at position context_lens[b] - 1.
template <class P>
RopeRows queries(const P& p) {
  RopeRows r{p.q, nullptr, p.dtype, p.batch, 1, p.heads, p.head_dim};
  r.last = p.context_lens;
  return r;
}

// The rung's own scratch, rounded up: the rotated copies follow it. (A runtime test: with
// sanitizers on, GCC does not take a function's address as a constant.)
template <class P, std::size_t (*Own)(const P&)>
std::size_t own_scratch(const P& p) {
  std::size_t (*const own)(const P&) = Own;
  return own ? round_up_256(own(p)) : 0;
}

template <class P, void (*Rung)(const P&, const LaunchContext&), std::size_t (*Own)(const P&)>
void launch(const P& p, const LaunchContext& ctx) {
  if (!p.rope.on()) return Rung(p, ctx);
  RopeRows q = queries(p);
  q.dst = static_cast<char*>(ctx.workspace) + own_scratch<P, Own>(p);
  rope_rows(q, p.rope, ctx.stream);
  check_launch("rope_rows (q)");
  P r = p;
  r.q = q.dst;
  r.rope = {};
  Rung(r, ctx);
}

template <class P, std::size_t (*Own)(const P&)>
std::size_t workspace(const P& p) {
  return own_scratch<P, Own>(p) + (p.rope.on() ? round_up_256(queries(p).bytes()) : 0);
}

// A rung that takes RoPE only this way (vLLM's v1 and v2, which run after vLLM's own rotary
// kernel): the rung's answer for the point without RoPE.
template <class P, std::string (*Supports)(const P&, const DeviceCaps&)>
std::string passthrough_supports(const P& p, const DeviceCaps& caps) {
  if (p.rope.on() && p.dtype != DType::fp32 && p.dtype != DType::fp16 && p.dtype != DType::bf16)
    return "the RoPE pass writes fp32, fp16 or bf16 queries";
  P r = p;
  r.rope = {};
  return Supports(r, caps);
}

// The unfused baselines apply to points with RoPE only.
template <class P>
bool applies(const P& p) {
  return p.rope.on();
}

// Listed only for cases with RoPE; otherwise the rung's own answer.
template <class P, std::string (*Supports)(const P&, const DeviceCaps&)>
std::string supports(const P& p, const DeviceCaps& caps) {
  if (!p.rope.on()) return "the unfused-RoPE baseline: only for cases with rope";
  if (p.dtype != DType::fp32 && p.dtype != DType::fp16 && p.dtype != DType::bf16)
    return "the RoPE pass writes fp32, fp16 or bf16 queries";
  P r = p;
  r.rope = {};
  return Supports(r, caps);
}

}  // namespace attnbench::rope_first
