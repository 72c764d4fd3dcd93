// decode rung 3, split_kv: Flash-Decoding (Dao et al., 2023): rung 2's kernel, with the context
// cut into `splits` chunks of keys, one block each, when batch x kv heads would leave SMs idle;
// each block writes its unnormalised o and (m, l) as an fp32 partial, and a combine kernel
// merges them: o = sum_s exp2(m_s - M) o_s / sum_s exp2(m_s - M) l_s. Splits fill the card's
// resident blocks (SMs x occupancy) in one round, as exactly as whole key steps of the kernel
// allow (plan_splits): batch 1 x 8 kv heads takes 66 splits = 528 blocks on 132 SMs x 4; chunks
// of at least min_chunk keys; 1 split means no partials and no combine, rung 2's launch
// itself. The combine is a programmatic dependent launch on sm_90 (its blocks are resident and
// its launch done before the main kernel ends), and it reads the partials in one round of
// loads per thread. The partial layout, the combine, its launch and the device helpers are
// common/split_kv.cuh's, shared with paged_flash.
// H200, run 36: bf16 b1 kv8 ctx131072 0.1279 ms, 95.2% of read bandwidth (24x rung 2 in run
// 19); b64 kv8 ctx4096 99.9%; with a write flush 0.99-1.01x cuDNN, 1.01-1.71x FA2.
#include <algorithm>
#include <cstdint>

#include "kernels/decode/args.hpp"
#include "kernels/decode/rungs.hpp"

namespace attnbench::decode_impl {
namespace {

// The most splits any launch of p uses.
int64_t max_splits(const DecodeParams& p) {
  return splitkv::max_splits_by_slots(longest_context(p), p.head_dim, p.batch, p.kv_heads);
}

}  // namespace

std::size_t split_workspace(const DecodeParams& p) { return partials_workspace(p, max_splits(p)); }

namespace {

// Splits: at most as many as fill one round of `slots` resident blocks with `units` blocks per
// split (and max_splits). The chunk is the fewest whole `step`-key steps of the kernel (its
// 16-key tiles, or the CUDA-core kernel's block step) that cover the longest context in that
// many splits, and the splits are the fewest of that chunk: the longest block as short as the
// steps allow. Batch 1 x 8 kv heads x 131072 keys on 132 SMs x 4: 66 splits of 2000 keys (the
// last 1072), 528 blocks; 64-key chunks gave 64 of 2048, 512 blocks. One split means none:
// the kernel writes o and no combine runs.
void plan_splits(Decode& d, const DecodeParams& p, int64_t units, int64_t slots, int64_t step) {
  const int64_t want = std::min(slots / units, max_splits(p));
  if (want <= 1) return;
  const int64_t longest = longest_context(p, step);
  const int64_t chunk = ceil_div(ceil_div(longest, want), step) * step;
  const int64_t splits = ceil_div(longest, chunk);
  if (splits <= 1) return;
  d.splits = static_cast<int>(splits);
  d.chunk = static_cast<int>(chunk);
}

}  // namespace

void split_kv(const DecodeParams& p, const LaunchContext& ctx) { launch_fused_variant(p, ctx, {"decode/split_kv", plan_splits}); }

}  // namespace attnbench::decode_impl
