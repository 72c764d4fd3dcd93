// ragged rung 6, ws_tma: rung 5 (5_ws.cu) with the cache's pages copied by the tensor memory
// accelerator. Rung 5's producer warpgroup moves a 128-key tile as 4096 cp.async of 16 bytes
// (128 threads, 32 each, K and V), every key row found through the block table; run 281 timed
// it at 328 TFLOP/s on the serving mix's prefill part, where flash_ws, whose one producer
// thread issues a TMA box a tile from a dense layout, ran 580 on the same work.
//
// The change (ws.cuh, kTmaPages): the cache is [num_blocks, block_size, kv_heads, head_dim], so
// one page of one kv head is block_size rows of head_dim contiguous in a 4-d tensor map
// (head_dim, kv_heads, block_size, num_blocks): a box (64, 1, block_size, 1) lands a page's 64
// columns in the tile's 128-byte swizzle at the page's rows, which the wgmma descriptors read
// as they read rung 5's. A 128-key tile is 128 / block_size pages; lane t of the producer's
// first warp issues page t's boxes (its table entry loaded a tile ahead) and lane 0 posts the
// tile's bytes on the stage's barriers; the producer's other three warps copy their share of Q
// and leave (after run 283: they spun on the stages' barriers beside the consumers). Only whole pages inside the split go by TMA: the rows after them (the page
// the split's end cuts, pages past it: the split's last tile only) go by cp.async, zeros from
// the end on, as in rung 5, so no slot past a context is ever read (the NaN there would reach
// P V as 0 * NaN). The consumers are rung 5's, unchanged.
// Supports: rung 5's, and a 16-bit cache (the fp8 path widens codes in the producer: rung 5),
// block_size 8, 16, 32 or 64 (a power of two >= 8 keeps a page's rows 1024-byte aligned in
// the swizzle; <= 64 keeps a tile's pages aligned to its 64-key start), 16-byte aligned cache.
// Verified on an H100 (run 282: cases/ragged 38/0, 10 repeats bit for bit, racecheck and
// memcheck clean at block sizes 16, 32, 64 and windows). Timed in the same process as rung 5:
// serving mix 0.6206 ms, 1.44x the separate launches (ws 1.22x); its prefill part 0.3338 ms
// (360 TFLOP/s, ws 0.3626), its decode part 0.1369 (ws 0.1658); all-prefill 0.7639 (0.84x
// separate's flash_ws); all-decode 0.3996 (87% of read bandwidth); sinks +1.0%. With the reversed
// launch order and the <= 64-row tiles on consumer 0 alone (ws.cuh, after run 282), run 283 (H100,
// 2c3c69a; cases/ragged verified beside ws, split_kv and varlen, 347 passed, 0 failed, 10 repeats
// bit for bit, racecheck and memcheck clean): serving mix 0.5494 ms = 1.63x separate (ws 1.43x),
// sinks +0.3%; decode part 0.1217; prefill part 0.3015 (0.69x separate); all-prefill 0.7641 (0.82x:
// the reversed order changed nothing); all-decode 0.3669, 93.5% of read bandwidth (paged_flash
// 0.3518 in the next process: 0.96x).
// Then a ring of three stages (ws.cuh's kWsStages: 225 KB at d128, as flash_ws' d128 ring) and
// the copies from the producer's first warp alone. Nsight Compute had shown all-prefill at 38%
// more instructions than flash_ws on the same work, the producer's 128 threads spinning on the
// stages' barriers (run 287). Run 288 (H100, each binary twice in one call): the one-warp producer
// alone changed nothing (all-prefill 0.7704 / 0.7708 ms, the build before 0.7668 / 0.7715); with the
// third stage all-prefill 0.6144 / 0.6188 = 1.03x / 1.02x separate (issue 48's 0.9x: met), the
// serving mix 0.4246 / 0.4160 = 2.1x / 2.15x, all-decode 0.3560 (97.7% of read bandwidth). Two
// stages left one tile in flight while the consumers took the other: a 128-key tile's 64 KB
// by TMA takes longer than the consumers' S and P V over it. Verified (cases/ragged 38 passed, 0
// failed; racecheck and memcheck clean).
#include <climits>
#include <cstdint>
#include <string>

#include "kernels/common/dispatch.cuh"
#include "kernels/ragged/rungs.hpp"
#include "kernels/ragged/ws.cuh"

namespace attnbench::ragged_impl {
namespace {

// The 16-bit cache at `base` as rung 6's producer reads it: (head_dim, kv_heads, block_size,
// num_blocks), boxes of (64, 1, block_size, 1).
template <class T>
CUtensorMap ws_tma_map(const void* base, const RaggedParams& p) {
  const uint64_t e = sizeof(T);
  const uint64_t dims[4] = {static_cast<uint64_t>(p.head_dim), static_cast<uint64_t>(p.kv_heads),
                            static_cast<uint64_t>(p.block_size), static_cast<uint64_t>(p.num_blocks)};
  const uint64_t strides[3] = {dims[0] * e, dims[0] * dims[1] * e, dims[0] * dims[1] * dims[2] * e};
  const uint32_t box[4] = {64, 1, static_cast<uint32_t>(p.block_size), 1};
  return make_tensor_map_sw128(base, 4, dims, strides, box, tensor_map_type<T>(), "ragged/ws_tma");
}

}  // namespace

void ws_tma(const RaggedParams& p, const LaunchContext& ctx) {
  Splits sp = ws_plan(p);
  attach_partials(p, sp, ctx.workspace);
  with_16bit(p.dtype, "ragged/ws_tma", [&](auto t) {
    using T = decltype(t);
    const CUtensorMap tk = ws_tma_map<T>(p.k_cache, p), tv = ws_tma_map<T>(p.v_cache, p);
    with_value<64, 128>(static_cast<int>(p.head_dim), "ragged/ws_tma", "head_dim", [&](auto d) {
      with_bool(p.score.alibi || p.score.softcap > 0,
                [&](auto terms) { launch_ws<T, T, d, terms, true>(p, ctx, sp, tk, tv); });
    });
  });
}

std::string ws_tma_supports(const RaggedParams& p, const DeviceCaps& caps) {
  if (const std::string r = ws_supports(p, caps); !r.empty()) return r;
  if (p.kv_dtype != p.dtype) return "a cache in q's dtype only (an fp8 cache: ws widens it in its producer)";
  if (p.block_size != 8 && p.block_size != 16 && p.block_size != 32 && p.block_size != 64)
    return "block_size 8, 16, 32 or 64 (a page is a TMA box of whole swizzle atoms inside a 64-key tile)";
  if (reinterpret_cast<uintptr_t>(p.k_cache) % 16 != 0 || reinterpret_cast<uintptr_t>(p.v_cache) % 16 != 0)
    return "the cache must be 16-byte aligned (a tensor map's base)";
  if (p.num_blocks > INT_MAX) return "num_blocks must fit in int32 (a TMA coordinate)";
  const std::size_t smem = p.head_dim == 64 ? ws_smem<64, false, kWsStages<true>>() : ws_smem<128, false, kWsStages<true>>();
  if (caps.smem_per_block_optin != 0 && caps.smem_per_block_optin < smem)
    return "needs " + std::to_string((smem + 1023) / 1024) + " KB of shared memory per block (three stages)";
  return {};
}

std::size_t ws_tma_workspace(const RaggedParams& p) { return ws_workspace(p); }

}  // namespace attnbench::ragged_impl
