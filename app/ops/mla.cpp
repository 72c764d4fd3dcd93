// mla: DeepSeek-V2/V3's multi-head latent attention, decode over a paged latent cache as FlashMLA
// serves it (issue 49). Per sequence b, s_q query tokens (the decode's, and speculative ones:
// the context's last s_q tokens, causal among themselves) of `heads` heads each, over one latent
// KV head: each cached token is a row of latent_dim latent values and rope_dim RoPE values (512 +
// 64 = 576), the keys whole rows, the values their first latent_dim values (FlashMLA's
// flash_mla_with_kvcache with h_kv = 1, d = 576, d_v = 512).
//
// Tensors: q [batch, s_q, heads, width] and o [batch, s_q, heads, latent_dim] in the dtype; the
// cache [num_blocks, block_size, token bytes] in the dtype or FlashMLA's fp8 layout (656 bytes a
// token: 512 e4m3 codes, four fp32 scales, 64 bf16 RoPE values); block tables [batch,
// max_blocks] and context_lens [batch] (int32). Each trial draws the tokens' rows (`kv`, every
// sequence's context one after another), lays the sequences out over a shuffled pool larger than
// needed (lay_out_pool, the paged op's), writes the pool on the host with every slot no token
// owns NaN and uploads it. The fp64 reference reads the contexts back out of that pool through
// the block table, as the cache holds them (fp8: dequantised): never the drawn rows themselves.
#include "app/ops/mla.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "app/numeric.hpp"
#include "app/op.hpp"
#include "app/ops/heads.hpp"
#include "app/ops/paged.hpp"
#include "app/ops/ragged.hpp"
#include "app/plugin.hpp"
#include "app/problem.hpp"
#include "kernels/mla/mla.hpp"
#include "reference/mla.hpp"

namespace attnbench {

float mla_fp8_tile_scale(float amax) {
  const float x = std::max(amax / 448.f, 1e-4f);
  int e;
  const float m = std::frexp(x, &e);  // x = m · 2^e, m in [0.5, 1)
  return m == 0.5f ? x : std::ldexp(1.f, e);
}

std::vector<uint8_t> mla_fp8_pool(const float* tokens, const std::vector<int64_t>& slots, int64_t latent_dim,
                                  int64_t rope_dim, int64_t pool_slots) {
  const int64_t width = latent_dim + rope_dim, bytes = ref::mla_fp8_token_bytes(latent_dim, rope_dim);
  const int64_t tiles = latent_dim / ref::kMlaFp8Tile;
  std::vector<uint8_t> pool(static_cast<size_t>(pool_slots * bytes), 0xff);
  const int64_t n = static_cast<int64_t>(slots.size());
  constexpr int64_t kTokens = 256;  // tokens per task
  parallel_for(ceil_div(n, kTokens), 10.0 * static_cast<double>(n * width), [&](int64_t task) {
    for (int64_t t = task * kTokens; t < std::min(n, (task + 1) * kTokens); ++t) {
      const float* x = tokens + t * width;
      uint8_t* token = pool.data() + slots[t] * bytes;
      for (int64_t tile = 0; tile < tiles; ++tile) {
        const float* v = x + tile * ref::kMlaFp8Tile;
        float amax = 0;
        for (int64_t i = 0; i < ref::kMlaFp8Tile; ++i) amax = std::max(amax, std::fabs(v[i]));
        const float scale = mla_fp8_tile_scale(amax);
        for (int64_t i = 0; i < ref::kMlaFp8Tile; ++i) token[tile * ref::kMlaFp8Tile + i] = float_to_fp8e4m3(v[i] / scale);
        std::memcpy(token + latent_dim + 4 * tile, &scale, 4);
      }
      uint8_t* rope = token + latent_dim + 4 * tiles;
      for (int64_t i = 0; i < rope_dim; ++i) {
        const uint16_t b = float_to_bf16(x[latent_dim + i]);
        std::memcpy(rope + 2 * i, &b, 2);
      }
    }
  });
  return pool;
}

namespace {

class MlaProblem : public TableProblem<MlaParams> {
 public:
  explicit MlaProblem(const CasePoint& p) : TableProblem(p, mla_variants()) {
    const Shape& s = p.shape;
    batch_ = s.num("batch");
    heads_ = s.num("heads");
    s_q_ = s.num("s_q");
    latent_dim_ = s.num("latent_dim");
    rope_dim_ = s.num("rope_dim");
    context_ = s.lengths("context");
    causal_ = s.flag("causal");
    block_size_ = s.num("block_size");
    num_blocks_ = s.num("num_blocks");
    fp8_ = s.word("cache") == "fp8";
    // The scale as the device holds it (fp32), on both sides.
    scale_ = static_cast<float>(s.has("scale") ? s.real("scale") : 1 / std::sqrt(static_cast<double>(width())));
    for (int64_t c : context_) {
      tokens_ += c;
      max_blocks_ = std::max(max_blocks_, ceil_div(c, block_size_));
      host_context_.push_back(static_cast<int32_t>(c));
    }
    add_input("q", p.dtype, {{"batch", batch_}, {"s_q", s_q_}, {"heads", heads_}, {"width", width()}}, 1.f, true,
              "width = latent_dim + rope_dim: the queries with the key projection absorbed");
    add_input("kv", p.dtype, {{"tokens", tokens_}, {"width", width()}}, 1.f, true,
              "every sequence's cached latent rows (latent values, then RoPE values), one sequence after another; "
              "the cache holds them");
    add_output("o", p.dtype,
               {{"batch", batch_, 'b'}, {"s_q", s_q_, 'i'}, {"heads", heads_, 'h'}, {"latent_dim", latent_dim_, 'd'}},
               3);
    cache_ = &add_buffer(static_cast<size_t>(count_elements(
        "cache", {{"num_blocks", num_blocks_}, {"block_size", block_size_}, {"token_bytes", token_bytes()}})));
    tables_ = &add_buffer(4 * static_cast<size_t>(batch_ * max_blocks_));
    context_lens_ = &add_constant(host_context_);
  }

  // FLOPs: per (query token, head) and key it sees, the 576-wide score and the 512-wide P·V, 2
  // FLOPs a multiply-add. Bytes: the latent cache read once per sequence, not once per head (all
  // heads and query tokens of a sequence share it: MLA's point, and the floor issue 49 measures
  // against), the queries read and the output written; not the block table (4 bytes a block).
  Work work() const override {
    const double e = dtype_bytes(point().dtype);
    double pairs = 0, cached = 0;
    for (int64_t c : context_) {
      for (int64_t t = 0; t < s_q_; ++t) pairs += static_cast<double>(causal_ ? c - s_q_ + t + 1 : c);
      cached += static_cast<double>(c);
    }
    const double rows = static_cast<double>(batch_ * s_q_ * heads_);
    return {2.0 * static_cast<double>(width() + latent_dim_) * pairs * heads_,
            cached * static_cast<double>(token_bytes()) + e * rows * static_cast<double>(width() + latent_dim_),
            Bandwidth::read};
  }

  // The first and last query token of every sequence (the last sees the most keys, the first the
  // fewest), with the first and last head, sequence by sequence: o's rows are ragged's packing
  // with s_q tokens every sequence.
  ref::Rows must_check_rows() const override {
    return first_and_last_rows(std::vector<int64_t>(static_cast<size_t>(batch_), s_q_), heads_);
  }

  ref::Matrix reference(const ref::Rows& rows) const override { return mla(rows, {}); }
  bool has_faithful() const override { return true; }
  // fp32 arithmetic, P rounded to the queries' dtype before P·V (the tensor-core rungs' operand),
  // over the cache's values as stored (fp8: dequantised), the output rounded to the dtype.
  ref::Matrix faithful(const ref::Rows& rows) const override { return stored(mla(rows, faithful_of())); }

 protected:
  void prepare(uint64_t seed, const LaunchContext&) override {
    const PoolLayout layout = lay_out_pool(seed, context_, block_size_, num_blocks_);
    table_ = layout.table;
    tables_->upload(table_.data(), 4 * table_.size());
    const int64_t slots = num_blocks_ * block_size_;
    const float* rows = input(1).host.data();
    const std::vector<uint8_t> pool =
        fp8_ ? mla_fp8_pool(rows, layout.slots, latent_dim_, rope_dim_, slots)
             : flash_pool(rows, layout.slots, 1, width(), slots, point().dtype, 1.f);  // one head of width
    cache_->upload(pool.data(), pool.size());
    // What the reference reads: the pool's values as the cache holds them, NaN where no token is.
    pool_values_.resize(static_cast<size_t>(slots * width()));
    if (fp8_) {
      parallel_for(slots, 2.0 * static_cast<double>(slots * width()), [&](int64_t slot) {
        ref::mla_fp8_dequantize(pool.data() + slot * token_bytes(), latent_dim_, rope_dim_,
                                pool_values_.data() + slot * width());
      });
    } else {
      const size_t e = dtype_bytes(point().dtype);
      for_chunks(slots * width(), [&](int64_t lo, int64_t hi) {
        decode_range(point().dtype, pool.data() + static_cast<size_t>(lo) * e, hi - lo, pool_values_.data() + lo);
      });
    }
  }

 private:
  int64_t width() const { return latent_dim_ + rope_dim_; }
  int64_t token_bytes() const {
    return fp8_ ? ref::mla_fp8_token_bytes(latent_dim_, rope_dim_)
                : width() * static_cast<int64_t>(dtype_bytes(point().dtype));
  }

  ref::Matrix mla(const ref::Rows& rows, const ref::Faithful& faithful) const {
    ref::MlaShape m;
    m.s_q = s_q_;
    m.heads = heads_;
    m.latent_dim = latent_dim_;
    m.rope_dim = rope_dim_;
    m.context = context_;
    m.causal = causal_;
    m.scale = scale_;
    m.block_size = block_size_;
    m.num_blocks = num_blocks_;
    m.max_blocks = max_blocks_;
    m.faithful = faithful;
    return ref::mla(m, input(0).host.data(), pool_values_.data(), table_.data(), rows);
  }

  MlaParams params() const override {
    MlaParams p;
    p.q = input(0).device.get();
    p.cache = cache_->get();
    p.o = output().device.get();
    p.block_tables = static_cast<const int32_t*>(tables_->get());
    p.context_lens = static_cast<const int32_t*>(context_lens_->get());
    p.host_context_lens = host_context_.data();
    p.batch = batch_;
    p.s_q = s_q_;
    p.heads = heads_;
    p.latent_dim = latent_dim_;
    p.rope_dim = rope_dim_;
    p.block_size = block_size_;
    p.num_blocks = num_blocks_;
    p.max_blocks_per_seq = max_blocks_;
    p.longest_context = *std::max_element(context_.begin(), context_.end());
    p.causal = causal_;
    p.scale = scale_;
    p.dtype = point().dtype;
    p.cache_format = fp8_ ? MlaCache::fp8 : MlaCache::dtype;
    finish_mla_params(p);
    return p;
  }

  int64_t batch_, heads_, s_q_, latent_dim_, rope_dim_, block_size_, num_blocks_;
  std::vector<int64_t> context_;
  std::vector<int32_t> host_context_;  // context_lens as uploaded, for the host's side of params
  bool causal_, fp8_;
  float scale_;
  int64_t tokens_ = 0, max_blocks_ = 0;
  std::vector<int32_t> table_;  // the trial's block table
  HostValues pool_values_;      // [num_blocks · block_size, width]: the pool as the cache holds it
  DeviceBuffer *cache_, *tables_, *context_lens_;
};

void finish_mla(ShapeCheck& c) {
  const Shape& s = c.shape;
  const int64_t s_q = s.num("s_q"), latent = s.num("latent_dim"), rope = s.num("rope_dim");
  const std::vector<int64_t>& context = s.lengths("context");
  for (size_t b = 0; b < context.size(); ++b)
    if (context[b] < s_q)
      c.fail("context", "shape.context: sequence " + std::to_string(b) + " has " + std::to_string(context[b]) +
                            " tokens, fewer than s_q (" + std::to_string(s_q) +
                            "): the query tokens are the last tokens of their context");
  if (latent % 8 != 0)
    c.fail("latent_dim", "shape.latent_dim (" + std::to_string(latent) + ") must be a multiple of 8");
  if (rope % 8 != 0) c.fail("rope_dim", "shape.rope_dim (" + std::to_string(rope) + ") must be a multiple of 8");
  if (s.word("cache") == "fp8" && latent % ref::kMlaFp8Tile != 0)
    c.fail(c.given("latent_dim") ? "latent_dim" : "cache",
           "shape.latent_dim (" + std::to_string(latent) +
               ") must be a multiple of 128 for cache \"fp8\" (one scale per 128 latent values)");
  finish_num_blocks(c, context);
}

// What a plugin's variant receives (kernels/plugin/include/attnbench/plugin.h).
attnbench_mla_params mla_abi(const MlaParams& p) {
  attnbench_mla_params a{};
  a.q = p.q;
  a.cache = p.cache;
  a.o = p.o;
  a.block_tables = p.block_tables;
  a.context_lens = p.context_lens;
  a.host_context_lens = p.host_context_lens;
  a.batch = p.batch;
  a.s_q = p.s_q;
  a.heads = p.heads;
  a.latent_dim = p.latent_dim;
  a.rope_dim = p.rope_dim;
  a.block_size = p.block_size;
  a.num_blocks = p.num_blocks;
  a.max_blocks_per_seq = p.max_blocks_per_seq;
  a.longest_context = p.longest_context;
  a.token_bytes = p.token_bytes();
  a.scale = p.scale;
  a.causal = p.causal ? 1 : 0;
  a.dtype = abi_dtype(p.dtype);
  a.kv_dtype = p.cache_format == MlaCache::fp8 ? int32_t{ATTNBENCH_FP8_E4M3} : abi_dtype(p.dtype);
  return a;
}

}  // namespace

OpSpec mla_op() {
  OpSpec op;
  op.name = "mla";
  op.summary = "DeepSeek's multi-head latent attention decode (FlashMLA): every head over one paged latent cache, "
               "speculative tokens, fp8 cache optional";
  op.keys = {
      batch_key(),
      heads_key(),
      int_key("s_q", "query tokens per sequence: the context's last, causal among themselves (speculative decoding)",
              1),
      lengths_key("context", "tokens of each sequence, at least s_q: one integer for all, or one per sequence"),
      int_key("latent_dim", "latent values of a cached row (kv_lora_rank): the values, and the keys' first part; a "
                            "multiple of 8",
              512, 8, 1024),
      int_key("rope_dim", "RoPE values of a cached row after the latent ones (keys only); a multiple of 8", 64, 0,
              256),
      bool_key("causal", "query token t sees keys up to context - s_q + t; false: every query token sees the whole "
                         "context",
               true),
      number_key("scale", "the softmax scale: scores are scale·q·k", std::nullopt, 1e-30, 1e30,
                 "1/sqrt(latent_dim + rope_dim)"),
      int_key("block_size", "tokens per cache block: any positive integer", 64),
      derived_int_key("num_blocks", "blocks in the pool; more than the sequences need (one spare at least)",
                      "needed + needed / 4 + 1"),
      choice_key("cache", "how the cache stores a token: \"dtype\" (its row in the dtype) or \"fp8\" (FlashMLA's "
                          "656-byte layout)",
                 {"dtype", "fp8"}, "dtype"),
  };
  op.finish = finish_mla;
  op.variants = [] { return variant_infos(mla_variants()); };
  op.plugin_op = ATTNBENCH_OP_MLA;
  op.add_plugin = [](const attnbench_variant& v, const char* file) { add_variant(plugin_variant(v, file, mla_abi)); };
  op.make = [](const CasePoint& p) -> std::unique_ptr<Problem> { return std::make_unique<MlaProblem>(p); };
  return op;
}

}  // namespace attnbench
