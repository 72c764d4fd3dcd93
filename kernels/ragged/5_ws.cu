// ragged rung 5, ws: the Hopper rung. Rung 4 (4_split_kv.cu) with FlashAttention-3's machinery
// in place of FlashAttention-2's loop: warpgroup mma (wgmma), warp specialization with an
// mbarrier pipeline, register reallocation, ping-pong consumers and each key tile's softmax
// overlapped with the previous tile's P V (attention's flash_ws, kernels/attention/6_flash_ws.cu,
// whose consumer this follows step for step). Rung 4's tensor-core rate is what held the
// prefill part of a mix back (run 271: 187 TFLOP/s on 4 x 4096 causal prefills against
// flash_ws' 431 on the same work in a dense layout).
//
// Design:
//   - Blocks are rung 4's: (row tile, kv head, split), a row tile 128 rows of (query token,
//     query head of the kv head's group) of one sequence, so that each K/V tile serves every
//     query head that reads it (a decode's whole group in one tile); 128 / group tokens a tile.
//     Long row tiles split their keys over blocks (plan_splits, on 128-key edges) and rung 4's
//     combine merges the partials. Launched in reverse: the last row tile of the last sequence
//     first, so the longest causal tiles start first and the short ones fill the tail.
//   - Three warpgroups: a producer and two consumers of 64 rows each. The producer's 128
//     threads copy the Q tile and a three-stage ring of K and V tiles (two with an fp8 cache,
//     ws.cuh's kWsStages) by cp.async, key row by key
//     row through the block table (any block size; keys past the split's last are zero-filled,
//     never read, so the NaN traps after a context stay untouched: TMA boxes of whole pages would
//     read them), into the 128-byte swizzle the wgmma descriptors name; each thread's
//     cp.async.mbarrier.arrive lands on the stage's "full" barrier once its copies have, and the
//     consumers hand a stage back through its "empty" one.
//   - The consumers: S = Q Kᵀ (m64n128k16, both from shared memory), the masks (the sequence's
//     causal limit and its end, a window, soft-capping, ALiBi) only on the tiles that need them,
//     FlashAttention-4's lazy row max, P packed from S's accumulators as the A operand of
//     O += P V (V N-major); tile j's S issued beside tile j - 1's P V, and the two consumers take
//     turns at the tensor cores (named barriers) so that one's softmax runs under the other's
//     products. A row tile of at most 64 rows (decodes, short verifications) is consumer 0's
//     alone, without turns: consumer 1 would compute on zero rows and wait on consumer 0.
//   - One split: O / l (with the sink) into each live row's token and head. Several: rung 4's
//     partials (fp32 O, and m, l in exp2 units) and its combine.
//   - RoPE: each consumer turns its 64 query rows in shared memory once they land, at their
//     tokens' positions (the cache holds keys turned when they were stored).
//   - An fp8 e4m3 cache: the producer copies the codes into raw stages and widens each of its
//     own chunks into the 16-bit tiles (exact), so the consumers' loop is the 16-bit cache's;
//     k_scale joins the softmax scale and v_scale multiplies O once (rung 3's way).
// Not here (supports() says so): head_dim other than 64
// and 128, groups that do not divide 128 rows, other cards than sm_90.
// The producer's look-ups: one producer thread a key row finds the row's slot in the cache a
// tile ahead, into a table in shared memory the copies read (below, at fetch and publish).
// Verified on an H100 (run 273: smoke/ragged and cases/ragged, RoPE, fp8, windows, block sizes;
// run 281 with the slot table: the same 75 rows; racecheck, memcheck and 10 repeats bit for bit
// ran clean on a build with a third stage around the same slot table).
// Timed (H100, run 281, the same call as the rung before the slot table): serving mix 0.7300 ms,
// 1.22x the separate launches (before: 1.2162 ms, 0.73x); its prefill part 0.3667 ms, 328
// TFLOP/s, 0.57x separate's flash_ws (before 0.6100, 0.34x); its decode part 0.1657 ms, 4.1x
// separate (before 0.2285). The slot table with a third stage: all-prefill 0.9661 ms (0.66x
// separate, was 0.47x), all-decode 0.4070 ms (84% of read bandwidth, split_kv 0.3763).
// Three stages again, the look-ups now a tile ahead (run 290, H100, against this build's two
// stages in the same call): all-prefill 0.7320 ms against 0.8592 (0.87x separate), the mix
// 0.5106 against 0.6277 (1.74x separate), all-decode 0.3614 against 0.4180 (94.5% of read
// bandwidth); verified over smoke/ragged and cases/ragged with rung 6 (113 passed, 0 failed),
// racecheck 17/0 and memcheck 38/0 clean.
// The serving mix ran 0.4277 ms (ws_tma, run 290) where its two parts apart took 0.2231 + 0.1164:
// its 32k decodes took two splits of ~140 128-key tiles, each as long as an SM's whole share at
// a decode tile's cost, and the second halves started last (the grid's z). Since run 294: a row
// tile's splits are adjacent in the grid (x = row tile x max_splits + split, no z), and the
// small row tiles of a mix split in their own, shorter chunks (varlen.cuh's plan_splits, the
// tiles weighed by cost). Run 294 (H100, one process each, main's build then this): the mix
// 0.4238 -> 0.3466 ms with ws_tma (2.58x separate; predicted 0.33-0.36), ws 0.5138 -> 0.4179;
// with sinks 0.3440; all-prefill and all-decode unchanged (0.6019 and 0.3560 with ws_tma).
// Verified: smoke/ragged and cases/ragged with ws and ws_tma 113 passed, 0 failed; racecheck
// 17/0, memcheck 38/0; `verify all` 8418/0 (run 295).
// The kernel is in ws.cuh, shared with rung 6 (6_ws_tma.cu, whole pages by TMA); this file is
// the rung's host side.
#include <climits>
#include <string>

#include "kernels/common/dispatch.cuh"
#include "kernels/ragged/rungs.hpp"
#include "kernels/ragged/ws.cuh"

namespace attnbench::ragged_impl {

void ws(const RaggedParams& p, const LaunchContext& ctx) {
  Splits sp = ws_plan(p);
  attach_partials(p, sp, ctx.workspace);
  with_16bit(p.dtype, "ragged/ws", [&](auto t) {
    using T = decltype(t);
    with_value<64, 128>(static_cast<int>(p.head_dim), "ragged/ws", "head_dim", [&](auto d) {
      with_bool(p.score.alibi || p.score.softcap > 0, [&](auto terms) {
        const CUtensorMap none{};  // the tensor maps are rung 6's (6_ws_tma.cu)
        if (p.kv_dtype == DType::fp8_e4m3) launch_ws<T, Fp8, d, terms, false>(p, ctx, sp, none, none);
        else launch_ws<T, T, d, terms, false>(p, ctx, sp, none, none);
      });
    });
  });
}

std::string ws_supports(const RaggedParams& p, const DeviceCaps& caps) {
  if (const std::string r = common_reason(p); !r.empty()) return r;
  if (p.dtype != DType::fp16 && p.dtype != DType::bf16) return "fp16/bf16 only (wgmma on 16-bit inputs)";
  const bool fp8 = p.kv_dtype == DType::fp8_e4m3;
  if (p.kv_dtype != p.dtype && !fp8) return "a cache in q's dtype or fp8 e4m3";
  if (p.rope.style == RopeTable::neox && p.rope.rotary_dim % 16 != 0)
    return "neox RoPE needs rotary_dim % 16 == 0 (a chunk and its partner turn together)";
  if (p.rope.style == RopeTable::gptj && p.rope.rotary_dim % 8 != 0)
    return "gptj RoPE needs rotary_dim % 8 == 0 (whole pairs a chunk)";
  if (p.head_dim != 64 && p.head_dim != 128) return "head_dim 64 or 128 only (split_kv takes every head_dim)";
  if (caps.cc_major != 0 && caps.cc_major != 9) return "needs sm_90 (wgmma; the binary's sm_90a build)";
  const int64_t group = p.heads / p.kv_heads;
  if (128 % group != 0) return "the query heads a kv head has must divide 128 (a row tile's 128 rows hold whole groups)";
  if (!p.host_cu_seqlens_q || !p.host_context_lens) return "plans its splits from the batch's lengths on the host, not given";
  if (p.kv_heads > kMaxGridYZ) return "kv_heads must be <= 65535 (gridDim.y)";
  if ((p.total_queries + p.batch) * ws_plan(p).max_splits > INT_MAX)
    return "too many row tiles x splits for gridDim.x";
  if (p.num_blocks * p.block_size > INT_MAX) return "num_blocks · block_size must fit in int32 (the producer's slot table)";
  if (p.total_queries * p.heads * (p.longest_context / 64 + 2) > (int64_t{1} << 40))
    return "the partials would pass 2^40 elements";
  const std::size_t smem = p.head_dim == 64 ? (fp8 ? ws_smem<64, true>() : ws_smem<64, false, kWsStages<false>>())
                                            : (fp8 ? ws_smem<128, true>() : ws_smem<128, false, kWsStages<false>>());
  if (caps.smem_per_block_optin != 0 && caps.smem_per_block_optin < smem)
    return "needs " + std::to_string((smem + 1023) / 1024) + " KB of shared memory per block";
  return {};
}

std::size_t ws_workspace(const RaggedParams& p) {
  if (!p.host_cu_seqlens_q || !p.host_context_lens || p.batch < 1 || p.kv_heads < 1 || p.heads < p.kv_heads ||
      128 % (p.heads / p.kv_heads) != 0)
    return 0;
  return partials_bytes(p, ws_plan(p));
}

}  // namespace attnbench::ragged_impl
