// ragged rung 4, split_kv: rung 3 (3_varlen.cu) with each row tile's keys split over several
// blocks, as Flash-Decoding splits a decode's. In rung 3 a row tile is one block whatever its
// context: in a serving mix, a decode over 32k keys is one block walking 512 key tiles while a
// chunk of a prefill over 8k walks 128, so the launch ends on a few long blocks with most SMs
// idle (run 269: the mix 2.82 ms against 0.90 for rung 2, whose decode kernel splits).
// Here a launch plans a split length for the whole batch from the lengths the host has (a
// serving engine's scheduler has them): the key tiles of every row tile added up (per kv
// head), divided over two blocks a streaming multiprocessor (132 SMs assumed: the workspace
// is sized without the card), at least 16 tiles (1024 keys) a split. A row tile with more
// tiles than that takes several splits, blockIdx.z: each walks its share and writes its
// unnormalised o and (m, l) (fp32) to the partials; a combine kernel (varlen.cuh) merges them
// and adds the sink. Row tiles of one split write o themselves, as in rung 3, so a batch of
// short contexts costs nothing more than rung 3. Rung 3's caches too: an fp8 one's partials are
// O times v_scale already, so the combine is the same (varlen.cuh).
// H100, run 271: the serving mix 1.229 ms against rung 3's 1.617 and rung 2's 0.893 (the prefill
// chunks' tensor-core rate is what is left: rung 3's 187 TFLOP/s against flash_ws' 431).
#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "kernels/common/dispatch.cuh"
#include "kernels/ragged/rungs.hpp"
#include "kernels/ragged/varlen.cuh"

namespace attnbench::ragged_impl {
namespace {

// Two blocks a streaming multiprocessor (132 SMs assumed: the workspace is sized without the card).
Splits plan(const RaggedParams& p) { return plan_splits(p, tokens_per_tile(p), 2 * kAssumedSms); }

}  // namespace

void split_kv(const RaggedParams& p, const LaunchContext& ctx) {
  Splits sp = plan(p);
  attach_partials(p, sp, ctx.workspace);
  with_varlen_kernel(p, "ragged/split_kv", [&](auto t, auto c, auto d) {
    launch_varlen<decltype(t), decltype(c), decltype(d)::value>(p, ctx, sp);
  });
}

std::string split_kv_supports(const RaggedParams& p, const DeviceCaps& caps) {
  if (const std::string r = varlen_supports(p, caps); !r.empty()) return r;
  if (!p.host_cu_seqlens_q || !p.host_context_lens) return "plans from the batch's lengths on the host, not given";
  if (p.total_queries * p.heads * (p.longest_context / 64 + 2) > (int64_t{1} << 40))
    return "the partials would pass 2^40 elements";
  return {};
}

std::size_t split_kv_workspace(const RaggedParams& p) {
  if (!p.host_cu_seqlens_q || !p.host_context_lens || p.batch < 1 || p.kv_heads < 1 || p.heads < p.kv_heads) return 0;
  return partials_bytes(p, plan(p));
}

}  // namespace attnbench::ragged_impl
