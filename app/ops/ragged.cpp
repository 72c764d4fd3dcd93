// ragged: one batch as a serving engine runs it in one launch (vLLM V1's unified attention,
// FlashInfer's batch attention; issue 48): chunked prefills, speculative verifications and
// decodes side by side over one paged KV cache. Sequence b brings query_len[b] new tokens whose
// keys and values are already in the cache as the last query_len[b] of its context_len[b] keys;
// its queries attend causally, aligned bottom-right within their own sequence (query t at
// position context_len - query_len + t). The batch is a list of [query_len, context_len] pairs
// or a string in vLLM's benchmark grammar (batch_mix.hpp).
//
// Tensors: q and o [Σ query_len, heads, head_dim], packed, sequence after sequence, found
// through cu_seqlens_q (int32 [batch + 1]); context_lens (int32 [batch]); the block table
// (int32 [batch, max_blocks]); the cache in the flash layout [num_blocks, block_size, kv_heads,
// head_dim] for k and for v (kernels/ragged/ragged.hpp), in the dtype or fp8 e4m3 with one
// scale per tensor. Each trial draws the contexts' K/V, lays the sequences out over a shuffled
// pool larger than needed (lay_out_pool, as the paged op), writes the pool on the host with every
// slot no token owns NaN (the spare blocks, and the slots after each sequence's last key) and
// uploads it. The fp64 reference reads the contexts gathered back out of that pool through the
// block table: the logical K/V as the cache holds them, never the pool itself.
#include "app/ops/ragged.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "app/numeric.hpp"
#include "app/op.hpp"
#include "app/ops/batch_mix.hpp"
#include "app/ops/heads.hpp"
#include "app/plugin.hpp"
#include "app/problem.hpp"
#include "kernels/ragged/ragged.hpp"

namespace attnbench {

std::vector<uint8_t> flash_pool(const float* tokens, const std::vector<int64_t>& slots, int64_t kv_heads,
                                int64_t head_dim, int64_t pool_slots, DType kv_dtype, float scale) {
  const int64_t width = kv_heads * head_dim, e = static_cast<int64_t>(dtype_bytes(kv_dtype));
  std::vector<uint8_t> pool(static_cast<size_t>(pool_slots * width * e), 0xff);
  const int64_t n = static_cast<int64_t>(slots.size());
  constexpr int64_t kTokens = 256;  // tokens per task
  parallel_for(ceil_div(n, kTokens), 10.0 * static_cast<double>(n * width), [&](int64_t task) {
    std::vector<float> row(static_cast<size_t>(width));
    for (int64_t t = task * kTokens; t < std::min(n, (task + 1) * kTokens); ++t) {
      const float* from = tokens + t * width;
      for (int64_t i = 0; i < width; ++i) row[i] = kv_dtype == DType::fp8_e4m3 ? from[i] / scale : from[i];
      encode_range(kv_dtype, row.data(), width, pool.data() + slots[t] * width * e);  // rounds to kv_dtype
    }
  });
  return pool;
}

std::vector<float> gather_flash_pool(const uint8_t* pool, const PoolLayout& layout, const std::vector<int64_t>& context,
                                     int64_t block_size, int64_t kv_heads, int64_t head_dim, DType kv_dtype,
                                     float scale) {
  const int64_t width = kv_heads * head_dim, e = static_cast<int64_t>(dtype_bytes(kv_dtype));
  std::vector<int64_t> first(context.size() + 1, 0);  // each sequence's first key in the output
  std::partial_sum(context.begin(), context.end(), first.begin() + 1);
  std::vector<float> out(static_cast<size_t>(first.back() * width));
  parallel_for(static_cast<int64_t>(context.size()), 4.0 * static_cast<double>(out.size()), [&](int64_t b) {
    for (int64_t j = 0; j < context[b]; ++j) {
      const int64_t slot = int64_t{layout.table[b * layout.max_blocks + j / block_size]} * block_size + j % block_size;
      float* to = out.data() + (first[b] + j) * width;
      decode_range(kv_dtype, pool + slot * width * e, width, to);
      if (kv_dtype == DType::fp8_e4m3)
        for (int64_t i = 0; i < width; ++i) to[i] *= scale;
    }
  });
  return out;
}

ref::Rows first_and_last_rows(const std::vector<int64_t>& query_len, int64_t heads) {
  ref::Rows rows;
  int64_t first = 0;
  for (int64_t q : query_len) {
    ref::Rows mine;  // one token (a decode) or one head: fewer than four
    for (int64_t t : {first, first + q - 1})
      for (int64_t h : {int64_t{0}, heads - 1}) mine.push_back(t * heads + h);
    std::sort(mine.begin(), mine.end());
    mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
    rows.insert(rows.end(), mine.begin(), mine.end());
    first += q;
  }
  return rows;
}

namespace {

class RaggedProblem : public TableProblem<RaggedParams> {
 public:
  explicit RaggedProblem(const CasePoint& p)
      : TableProblem(p, ragged_variants()), scores_(p.shape, p.shape.num("heads")) {
    const Shape& s = p.shape;
    heads_ = s.num("heads");
    kv_heads_ = s.num("kv_heads");
    head_dim_ = s.num("head_dim");
    block_size_ = s.num("block_size");
    num_blocks_ = s.num("num_blocks");
    window_ = s.num("window");
    kv_dtype_ = dtype_from_name(s.word("kv_dtype"));
    for (const auto& [q, c] : ragged_sequences(s)) {
      query_len_.push_back(q);
      context_len_.push_back(c);
      cu_.push_back(static_cast<int32_t>(cu_.back() + q));
      context_.push_back(static_cast<int32_t>(c));
      queries_ += q;
      keys_ += c;
      max_blocks_ = std::max(max_blocks_, ceil_div(c, block_size_));
    }
    longest_context_ = *std::max_element(context_len_.begin(), context_len_.end());
    longest_query_ = *std::max_element(query_len_.begin(), query_len_.end());
    rope_ = RopeOptions(s, 0, longest_context_);
    add_input("q", p.dtype, {{"tokens", queries_}, {"heads", heads_}, {"head_dim", head_dim_}}, 1.f, true,
              "every sequence's new tokens, one sequence after another");
    for (const char* name : {"k", "v"})
      add_input(name, p.dtype, {{"keys", keys_}, {"kv_heads", kv_heads_}, {"head_dim", head_dim_}}, 1.f, true,
                "every sequence's context, one after another; the cache holds them");
    add_output("o", p.dtype, {{"tokens", queries_, 'i'}, {"heads", heads_, 'h'}, {"head_dim", head_dim_, 'd'}}, 2);
    const int64_t pool = count_elements("k_cache", {{"num_blocks", num_blocks_},
                                                    {"block_size", block_size_},
                                                    {"kv_heads", kv_heads_},
                                                    {"head_dim", head_dim_}});
    k_cache_ = &add_buffer(dtype_bytes(kv_dtype_) * static_cast<size_t>(pool));
    v_cache_ = &add_buffer(dtype_bytes(kv_dtype_) * static_cast<size_t>(pool));
    tables_ = &add_buffer(4 * static_cast<size_t>(batch() * max_blocks_));
    cu_seqlens_ = &add_constant(cu_);
    context_lens_ = &add_constant(context_);
    scores_.upload(constant_adder());
    rope_.upload(constant_adder());
  }

  // FLOPs of the (query, key) pairs the causal mask and window keep; bytes of q and o and of
  // the keys and values the sequences' queries see (each once) with their table entries.
  Work work() const override {
    const double e = dtype_bytes(point().dtype), kv = dtype_bytes(kv_dtype_);
    double pairs = 0, read = 0, entries = 0;
    for (size_t b = 0; b < query_len_.size(); ++b) {
      const int64_t c = context_len_[b], first_pos = c - query_len_[b];
      for (int64_t pos = first_pos; pos < c; ++pos) pairs += static_cast<double>(seen_keys(pos + 1, window_));
      const int64_t lo = window_ > 0 ? std::max<int64_t>(0, first_pos - window_ + 1) : 0;  // the first query's first key
      read += static_cast<double>(c - lo);
      entries += static_cast<double>(ceil_div(c, block_size_) - lo / block_size_);
    }
    return {4.0 * heads_ * head_dim_ * pairs,
            2.0 * e * queries_ * heads_ * head_dim_ + 2.0 * kv * read * kv_heads_ * head_dim_ + 4.0 * entries,
            Bandwidth::read};
  }

  // The first and last query token of every sequence, with the first and the last query head
  // (kv heads 0 and kv_heads - 1): every kind of sequence in the batch is checked, not only
  // those the sampled rows happen to fall in. Sequence by sequence, so that a [verify] max_rows
  // too small for all of them keeps the first sequences' (the case tests check that none
  // falls out).
  ref::Rows must_check_rows() const override { return first_and_last_rows(query_len_, heads_); }

  ref::Matrix reference(const ref::Rows& rows) const override { return ragged(rows, {}); }
  bool has_faithful() const override { return true; }
  // P kept in the query's dtype (the storage of everything but the cache), as the paged op.
  ref::Matrix faithful(const ref::Rows& rows) const override { return stored(ragged(rows, faithful_of())); }

 protected:
  void prepare(uint64_t seed, const LaunchContext&) override {
    const PoolLayout layout = lay_out_pool(seed, context_len_, block_size_, num_blocks_);
    tables_->upload(layout.table.data(), 4 * layout.table.size());
    // An fp8 cache stores value / scale, the scale putting the largest |value| at 448.
    k_scale_ = v_scale_ = 1.f;
    if (kv_dtype_ == DType::fp8_e4m3) {
      k_scale_ = fp8_scale(input(1).host.data(), input(1).count);
      v_scale_ = fp8_scale(input(2).host.data(), input(2).count);
    }
    for (int which = 0; which < 2; ++which) {
      const float scale = which ? v_scale_ : k_scale_;
      const std::vector<uint8_t> pool = flash_pool(input(1 + which).host.data(), layout.slots, kv_heads_, head_dim_,
                                                   num_blocks_ * block_size_, kv_dtype_, scale);
      (which ? v_cache_ : k_cache_)->upload(pool.data(), pool.size());
      cached_[which] = gather_flash_pool(pool.data(), layout, context_len_, block_size_, kv_heads_, head_dim_,
                                         kv_dtype_, scale);
    }
  }

 private:
  int64_t batch() const { return static_cast<int64_t>(query_len_.size()); }

  ref::Matrix ragged(const ref::Rows& rows, const ref::Faithful& faithful) const {
    ref::RaggedShape r;
    r.heads = heads_;
    r.kv_heads = kv_heads_;
    r.head_dim = head_dim_;
    r.query_len = query_len_;
    r.context_len = context_len_;
    r.window = window_;
    r.score = scores_.reference();
    r.rope = rope_.reference();
    r.faithful = faithful;
    return ref::ragged(r, input(0).host.data(), cached_[0].data(), cached_[1].data(), rows);
  }

  RaggedParams params() const override {
    RaggedParams p;
    p.q = input(0).device.get();
    p.k_cache = k_cache_->get();
    p.v_cache = v_cache_->get();
    p.o = output().device.get();
    p.cu_seqlens_q = static_cast<const int32_t*>(cu_seqlens_->get());
    p.context_lens = static_cast<const int32_t*>(context_lens_->get());
    p.block_tables = static_cast<const int32_t*>(tables_->get());
    p.host_cu_seqlens_q = cu_.data();
    p.host_context_lens = context_.data();
    p.batch = batch();
    p.total_queries = queries_;
    p.heads = heads_;
    p.kv_heads = kv_heads_;
    p.head_dim = head_dim_;
    p.block_size = block_size_;
    p.num_blocks = num_blocks_;
    p.max_blocks_per_seq = max_blocks_;
    p.longest_context = longest_context_;
    p.longest_query = longest_query_;
    p.window = window_;
    scores_.set_params(p);
    p.rope = rope_.device();
    p.dtype = point().dtype;
    p.kv_dtype = kv_dtype_;
    p.k_scale = k_scale_;
    p.v_scale = v_scale_;
    finish_ragged_params(p);
    return p;
  }

  int64_t heads_, kv_heads_, head_dim_, block_size_, num_blocks_, window_;
  DType kv_dtype_;
  std::vector<int64_t> query_len_, context_len_;
  std::vector<int32_t> cu_ = {0}, context_;  // cu_seqlens_q and context_lens as uploaded, for the host's side of params
  int64_t queries_ = 0, keys_ = 0, max_blocks_ = 0, longest_context_ = 0, longest_query_ = 0;
  ScoreOptions scores_;
  RopeOptions rope_;  // positions [0, the longest context)
  std::vector<float> cached_[2];  // K and V gathered back out of the pool, as the cache holds them
  float k_scale_ = 1, v_scale_ = 1;
  DeviceBuffer *k_cache_, *v_cache_, *tables_, *cu_seqlens_, *context_lens_;
};

// mix and sequences: exactly one names the batch; a mix becomes sequences here, so that the
// problem, dumps and reports read one form.
void finish_batch(ShapeCheck& c) {
  Shape& s = c.shape;
  const bool mix = c.given("mix"), sequences = c.given("sequences");
  if (mix && sequences)
    c.fail("sequences", "shape.mix and shape.sequences both name the batch: give one of them");
  if (!mix && !sequences)
    c.fail("mix", "the batch is missing: give shape.mix (vLLM's grammar, like \"2q2k_32s1k\") or shape.sequences "
                  "(a list of [query_len, context_len] pairs)");
  if (mix) {
    std::vector<BatchSequence> batch;
    try {
      batch = parse_batch_mix(s.word("mix"));
    } catch (const std::invalid_argument& e) {
      c.fail("mix", std::string("shape.mix: ") + e.what());
    }
    IntPairs pairs;
    for (const BatchSequence& b : batch) pairs.emplace_back(b.query_len, b.context_len);
    s.set("sequences", pairs);
  }
  const IntPairs& seqs = ragged_sequences(s);
  if (seqs.empty()) c.fail("sequences", "shape.sequences is empty: the batch needs at least one sequence");
  for (size_t i = 0; i < seqs.size(); ++i)
    if (seqs[i].first > seqs[i].second)
      c.fail("sequences", "shape.sequences[" + std::to_string(i) + "] = [" + std::to_string(seqs[i].first) + ", " +
                              std::to_string(seqs[i].second) + "]: query_len " + std::to_string(seqs[i].first) +
                              " exceeds context_len " + std::to_string(seqs[i].second) +
                              " (the new tokens are the last keys of the context)");
}

// As finish_paged_pool: kv_dtype defaults to dtype, and the pool holds what the sequences need
// plus a quarter and one spare block that stays NaN (finish_num_blocks).
void finish_pool(ShapeCheck& c) {
  Shape& s = c.shape;
  if (!c.given("kv_dtype")) s.set("kv_dtype", std::string(dtype_name(c.dtype)));
  std::vector<int64_t> context;
  for (const auto& [q, len] : ragged_sequences(s)) context.push_back(len);
  finish_num_blocks(c, context);
}

// What a plugin's variant receives (kernels/plugin/include/attnbench/plugin.h).
attnbench_ragged_params ragged_abi(const RaggedParams& p) {
  attnbench_ragged_params a{};
  a.q = p.q;
  a.k_cache = p.k_cache;
  a.v_cache = p.v_cache;
  a.o = p.o;
  a.cu_seqlens_q = p.cu_seqlens_q;
  a.context_lens = p.context_lens;
  a.block_tables = p.block_tables;
  a.host_cu_seqlens_q = p.host_cu_seqlens_q;
  a.host_context_lens = p.host_context_lens;
  a.batch = p.batch;
  a.total_queries = p.total_queries;
  a.heads = p.heads;
  a.kv_heads = p.kv_heads;
  a.head_dim = p.head_dim;
  a.block_size = p.block_size;
  a.num_blocks = p.num_blocks;
  a.max_blocks_per_seq = p.max_blocks_per_seq;
  a.longest_context = p.longest_context;
  a.longest_query = p.longest_query;
  abi_score_options(a, p);
  a.kv_dtype = abi_dtype(p.kv_dtype);
  a.k_scale = p.k_scale;
  a.v_scale = p.v_scale;
  return a;
}

}  // namespace

OpSpec ragged_op() {
  OpSpec op;
  op.name = "ragged";
  op.summary = "a serving engine's mixed batch (prefill chunks, spec verification, decodes) over a paged KV cache";
  // mix: a word of the [shape], so that a sweep can vary it (text keys are top-level otherwise).
  KeySpec mix = text_key("mix", "the batch in vLLM's grammar: 2q2k_32s1k is 2 prefills of 2048 tokens and 32 decodes "
                                "over 1024 keys (docs/cases.md); or give sequences");
  mix.top_level = false;
  op.keys = joined_keys({{
      mix,
      pairs_key("sequences", "the batch as [query_len, context_len] per sequence, 1 <= query_len <= context_len; or give "
                             "mix", 1),
      heads_key(),
      kv_heads_key(),
      head_dim_key(),
      int_key("block_size", "tokens per cache block: any positive integer", 16),
      derived_int_key("num_blocks", "blocks in the pool; more than the sequences need (one spare at least)",
                      "needed + needed / 4 + 1"),
      choice_key("kv_dtype", "the cache's storage type", {"fp32", "fp16", "bf16", "fp8_e4m3"}, std::nullopt, "dtype"),
      decode_window_key(),
  }, score_keys(), rope_keys()});
  op.finish = [](ShapeCheck& c) {
    finish_batch(c);
    finish_head_keys(c);
    finish_pool(c);
  };
  op.variants = [] { return variant_infos(ragged_variants()); };
  op.plugin_op = ATTNBENCH_OP_RAGGED;
  op.add_plugin = [](const attnbench_variant& v, const char* file) { add_variant(plugin_variant(v, file, ragged_abi)); };
  op.make = [](const CasePoint& p) -> std::unique_ptr<Problem> { return std::make_unique<RaggedProblem>(p); };
  return op;
}

}  // namespace attnbench
