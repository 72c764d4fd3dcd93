// ragged rung 3, varlen: the whole mixed batch in one launch, on the tensor cores, reading the
// paged cache where it lies. Over rung 2 (2_separate.cu), which gathers every context into
// dense K/V and then launches a decode kernel and one prefill kernel per other sequence:
//   - One launch. Blocks are (row tile, kv head); a row tile is 64 rows of one sequence, each
//     row a (query token, query head of the kv head's GQA group) pair: a decode's group of
//     query heads fills the rows of one tile (vLLM's unified attention packs its
//     BLOCK_M = BLOCK_Q x queries-per-kv the same way), so the K/V tile a block loads serves
//     every head that reads it. Tiles are numbered without a work list: sequence b's start at
//     cu_seqlens_q[b] / tokens_per_tile + b, an upper bound on the tiles before it, so a block
//     finds its sequence by a binary search of cu_seqlens_q and the few numbers past a
//     sequence's last tile exit at once (vLLM's find_seq_idx).
//   - No gather: each 64-key tile is copied by cp.async straight from the cache, key row by
//     key row through the block table (the flash layout keeps a key's dims contiguous, 16-byte
//     chunks of any block size), two stages deep: the next tile's copies run under this one's
//     products. Keys past the last one a tile's rows see are never read: the NaN traps after
//     each context stay untouched.
//   - FlashAttention-2's inner loop (4_flash_mma.cu's fragments: S = Q Kᵀ by mma.sync m16n8k16
//     from ldmatrix, an exact online softmax in exp2 units, P packed from S's accumulators as
//     the A operand of O += P V, V by ldmatrix.trans), with the causal limit, window, ALiBi,
//     soft-capping and the sink per row (each row its own position and head).
// What it does not do yet, and the next rung is for: split a long context over several
// blocks. A decode over 32k keys is one block per kv head walking all of them, where
// paged_flash would run hundreds; a batch of few long decodes leaves most SMs idle.
// fp16/bf16 queries over a cache of their type or an fp8 e4m3 one (per-tensor k_scale and
// v_scale): the fp8 codes are copied as they lie, 16 a copy (head_dim a multiple of 16), and
// widened in shared memory into the query's type, exactly, so the loop is the same; k_scale
// joins the softmax scale and v_scale multiplies O once (varlen.cuh's header; sm_89+ for the
// e4m3 cvt). RoPE turns the staged queries at their tokens' positions.
// The timings below are a 16-bit cache's; the fp8 cache has not run on a GPU yet.
// H100, run 271: all-decode (64 x 4096 keys, GQA 32/8) 0.391 ms, 90% of the read floor, 2.84x
// rung 2; 533 sequences 4.4x; 4 x 4096 causal prefill 187 TFLOP/s, 0.43x rung 2's flash_ws.
// Since session 27 each thread loads its rows' block-table entries before it issues their
// copies (varlen.cuh's load_kv), where each load waited behind the previous row's copies: not
// yet run on a GPU (prediction: bench notes after run 281).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/common/dispatch.cuh"
#include "kernels/ragged/rungs.hpp"
#include "kernels/ragged/varlen.cuh"

namespace attnbench::ragged_impl {

void varlen(const RaggedParams& p, const LaunchContext& ctx) {
  with_varlen_kernel(p, "ragged/varlen", [&](auto t, auto c, auto d) {
    launch_varlen<decltype(t), decltype(c), decltype(d)::value>(p, ctx, Splits{});
  });
}

std::string varlen_supports(const RaggedParams& p, const DeviceCaps& caps) {
  if (const std::string r = common_reason(p); !r.empty()) return r;
  if (p.dtype != DType::fp16 && p.dtype != DType::bf16) return "fp16/bf16 only (mma.sync on 16-bit inputs)";
  // common_reason took the cache's type: the query's, or fp8.
  const bool fp8 = p.kv_dtype == DType::fp8_e4m3;
  if (p.rope.style == RopeTable::neox && p.rope.rotary_dim % 16 != 0)
    return "neox RoPE needs rotary_dim % 16 == 0 (a chunk and its partner turn together)";
  if (p.rope.style == RopeTable::gptj && p.rope.rotary_dim % 8 != 0)
    return "gptj RoPE needs rotary_dim % 8 == 0 (whole pairs a chunk)";
  if (p.head_dim % 8 != 0) return "head_dim must be a multiple of 8 (16-byte rows)";
  if (fp8 && p.head_dim % 16 != 0) return "an fp8 cache needs head_dim % 16 == 0 (16-byte copies of 16 codes)";
  if (p.heads / p.kv_heads > 64) return "more than 64 query heads a kv head (a row tile holds one token's group)";
  if (caps.cc_major != 0 && caps.arch() < 80) return "needs sm_80+ (mma.sync with bf16, cp.async)";
  if (fp8 && caps.cc_major != 0 && caps.arch() < 89) return "an fp8 cache needs sm_89+ (cvt e4m3x2 -> f16x2)";
  const int bytes = varlen_smem_bytes(p);
  if (caps.smem_per_block_optin != 0 && caps.smem_per_block_optin < static_cast<std::size_t>(bytes))
    return "needs " + std::to_string(bytes / 1024) + " KB of shared memory per block";
  if (p.kv_heads > kMaxGridYZ) return "kv_heads must be <= 65535 (gridDim.y)";
  if (p.total_queries + p.batch > INT_MAX) return "too many row tiles for gridDim.x";
  return {};
}

}  // namespace attnbench::ragged_impl
