// Paged decode (vLLM): decode attention over a KV cache kept in fixed-size blocks of
// a shared pool, found through per-sequence block tables, optionally stored as fp8
// e4m3 with a per-tensor scale. The cache is written by the reshape_and_cache op's
// kernel; its check is reported as a row of its own.
#include "app/ops/paged.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "app/numeric.hpp"
#include "app/op.hpp"
#include "app/ops/heads.hpp"
#include "app/plugin.hpp"
#include "app/problem.hpp"
#include "kernels/common/random.hpp"
#include "kernels/paged/paged.hpp"
#include "kernels/reshape_and_cache/reshape_and_cache.hpp"

namespace attnbench {
namespace {

// Each trial draws the tokens' K/V, a random block table over a pool larger than
// needed (lay_out_pool), and writes the cache with reshape_and_cache (quantising to fp8
// when asked); every token's slot is then checked bit for bit, and every slot no
// sequence owns holds NaN.
int64_t longest_context(const Shape& s) {
  const auto& context = s.lengths("context");
  return *std::max_element(context.begin(), context.end());
}

class PagedProblem : public TableProblem<PagedParams> {
 public:
  explicit PagedProblem(const CasePoint& p)
      : TableProblem(p, paged_variants()), h_(p.shape, longest_context(p.shape)) {
    const Shape& s = p.shape;
    block_size_ = s.num("block_size");
    num_blocks_ = s.num("num_blocks");
    partition_size_ = s.num("partition_size");
    kv_dtype_ = dtype_from_name(s.word("kv_dtype"));
    for (int64_t c : h_.context) {
      first_.push_back(tokens_);
      tokens_ += c;
      max_blocks_ = std::max(max_blocks_, ceil_div(c, block_size_));
    }
    add_input("q", p.dtype, {{"batch", h_.batch}, {"heads", h_.heads}, {"head_dim", h_.head_dim}}, 1.f, true);
    for (const char* name : {"k", "v"})
      add_input(name, p.dtype, {{"tokens", tokens_}, {"kv_heads", h_.kv_heads}, {"head_dim", h_.head_dim}}, 1.f, true,
                "every sequence's tokens, one after another");
    add_output("o", p.dtype, {{"batch", h_.batch, 'b'}, {"heads", h_.heads, 'h'}, {"head_dim", h_.head_dim, 'd'}}, 2);
    const std::size_t kv = dtype_bytes(kv_dtype_);
    k_cache_ = &add_buffer(kv * cache_elements());
    v_cache_ = &add_buffer(kv * cache_elements());
    tables_ = &add_buffer(4 * h_.batch * max_blocks_);
    context_lens_ = &add_constant(std::vector<int32_t>(h_.context.begin(), h_.context.end()));
    slots_ = &add_buffer(8 * tokens_);
    h_.upload(constant_adder());
  }
  // The tokens the queries see (all of them without a window) and their table entries.
  Work work() const override {
    const double kv = dtype_bytes(kv_dtype_), e = dtype_bytes(point().dtype);
    double seen = 0, entries = 0;
    for (int64_t c : h_.context) {
      seen += static_cast<double>(seen_keys(c, h_.window));
      entries += static_cast<double>(ceil_div(seen_keys(c, h_.window), block_size_));
    }
    return {4.0 * h_.heads * seen * h_.head_dim,
            kv * 2.0 * seen * h_.kv_heads * h_.head_dim + e * 2.0 * h_.batch * h_.heads * h_.head_dim + 4.0 * entries,
            Bandwidth::read};
  }
  // The math, whatever the layout: decode over each sequence's tokens as the cache holds
  // them (the stored codes times the scale), read in place, one sequence after another.
  // The layout is reshape_and_cache's job and is checked bit for bit in prepare().
  ref::Matrix reference(const ref::Rows& rows) const override { return decode(rows, {}); }
  bool has_faithful() const override { return true; }
  // The cache's values as the kernels read them (fp8 codes times their scale): P is kept in the
  // query's dtype, the storage of everything but the cache.
  ref::Matrix faithful(const ref::Rows& rows) const override {
    return stored(decode(rows, faithful_of()));
  }
  ref::Matrix decode(const ref::Rows& rows, const ref::Faithful& faithful) const {
    ref::DecodeShape d = h_.reference(faithful);
    d.max_context = h_.longest;
    d.first = first_;
    return ref::decode(d, input(0).host.data(), cached(0).data(), cached(1).data(), rows);
  }

 protected:
  void prepare(uint64_t seed, const LaunchContext& ctx) override {
    const PoolLayout pool = lay_out_pool(seed, h_.context, block_size_, num_blocks_);
    table_ = pool.table;
    tables_->upload(table_.data(), 4 * table_.size());
    slots_->upload(pool.slots.data(), 8 * pool.slots.size());

    // An fp8 cache stores value / scale, the scale putting the largest value at 448.
    k_scale_ = v_scale_ = 1.f;
    if (kv_dtype_ == DType::fp8_e4m3) {
      k_scale_ = fp8_scale(input(1).host.data(), input(1).count);
      v_scale_ = fp8_scale(input(2).host.data(), input(2).count);
    }
    // NaN everywhere, then the tokens into their slots.
    for (DeviceBuffer* c : {k_cache_, v_cache_})
      check_cuda(cudaMemsetAsync(c->get(), 0xff, c->bytes(), ctx.stream), "poison paged cache");
    ReshapeAndCacheParams w{input(1).device.get(), input(2).device.get(), k_cache_->get(), v_cache_->get(),
                            static_cast<const int64_t*>(slots_->get())};
    w.tokens = tokens_;
    w.kv_heads = h_.kv_heads;
    w.head_dim = h_.head_dim;
    w.block_size = block_size_;
    w.dtype = point().dtype;
    w.kv_dtype = kv_dtype_;
    w.k_scale = k_scale_;
    w.v_scale = v_scale_;
    reshape_and_cache(w, ctx);
    check_cuda(cudaStreamSynchronize(ctx.stream), "reshape_and_cache");
    setup_checks_.push_back({"reshape_and_cache", check_cache(pool.slots)});
  }

 private:
  int64_t cache_elements() const {
    return count_elements(
        "k_cache",
        {{"num_blocks", num_blocks_}, {"kv_heads", h_.kv_heads}, {"head_dim", h_.head_dim}, {"block_size", block_size_}});
  }

  // The tokens' values as the cache holds them: the stored codes (times the scale for
  // fp8); the tokens themselves when the cache keeps their dtype.
  const HostValues& cached(int which) const {
    return kv_dtype_ == point().dtype ? input(1 + which).host : stored_[which];
  }

  // The device's caches against what each token's slot must hold, bit for bit: the value
  // rounded to kv_dtype, or for fp8 value / scale rounded to e4m3. The same pass keeps what
  // the codes mean (stored_) for the reference, when the cache has another dtype.
  Comparison check_cache(const std::vector<int64_t>& slots) {
    switch (dtype_bytes(kv_dtype_)) {
      case 1: return check_cache_as<uint8_t>(slots);
      case 2: return check_cache_as<uint16_t>(slots);
      default: return check_cache_as<uint32_t>(slots);
    }
  }

  // check_cache with the element's bits as one `Bits`: an integer compare an element, and the
  // layout placed once a run of elements rather than once an element.
  template <class Bits>
  Comparison check_cache_as(const std::vector<int64_t>& slots) {
    const std::size_t e = sizeof(Bits);
    const int64_t x = paged_x(kv_dtype_);
    const ref::PagedLayout layout{h_.kv_heads, h_.head_dim, block_size_, x};
    const bool fp8 = kv_dtype_ == DType::fp8_e4m3, keep = kv_dtype_ != point().dtype;
    Comparison c;
    for (int which = 0; which < 2; ++which) {
      const HostValues& tokens = input(1 + which).host;
      const float scale = which ? v_scale_ : k_scale_;
      HostValues& stored = stored_[which];
      stored.resize(keep ? tokens.size() : 0);
      const auto bytes = host_bytes(e * static_cast<size_t>(cache_elements()));
      (which ? v_cache_ : k_cache_)->download(bytes.get(), e * static_cast<size_t>(cache_elements()));
      const Bits* got = reinterpret_cast<const Bits*>(bytes.get());
      constexpr int64_t kTokens = 256;  // tokens per task
      std::vector<Comparison> parts(static_cast<size_t>((tokens_ + kTokens - 1) / kTokens));
      // About ten operations an element (the threshold is in flops): counted as one, caches of
      // a few thousand tokens were checked on one thread, a third of a second a point.
      parallel_for(static_cast<int64_t>(parts.size()), 10.0 * static_cast<double>(tokens_) * h_.kv_heads * h_.head_dim,
                   [&](int64_t task) {
                     // Tallies stay local until the end: tasks' Comparisons share cache lines, and
                     // counting into them element by element cost 40 ns an element on 16 cores.
                     int64_t checked = 0, mismatches = 0;
                     double max_abs = 0;
                     std::vector<float> row(static_cast<size_t>(h_.head_dim));
                     std::vector<Bits> want(static_cast<size_t>(h_.head_dim));
                     const auto differs = [&](int64_t at, int64_t j) {
                       ++mismatches;
                       const double have = decode_element(kv_dtype_, bytes.get(), at);
                       const double should = decode_element(kv_dtype_, reinterpret_cast<const uint8_t*>(want.data()), j);
                       max_abs = std::isfinite(have) ? std::max(max_abs, std::fabs(have - should)) : INFINITY;
                     };
                     for (int64_t t = task * kTokens; t < std::min(tokens_, (task + 1) * kTokens); ++t) {
                       const int64_t block = slots[t] / block_size_, offset = slots[t] % block_size_;
                       for (int64_t h = 0; h < h_.kv_heads; ++h) {
                         const int64_t first = (t * h_.kv_heads + h) * h_.head_dim;
                         for (int64_t j = 0; j < h_.head_dim; ++j)
                           row[j] = fp8 ? tokens[first + j] / scale : tokens[first + j];
                         // Rounds to kv_dtype.
                         encode_range(kv_dtype_, row.data(), h_.head_dim, reinterpret_cast<uint8_t*>(want.data()));
                         if (keep) {
                           decode_range(kv_dtype_, reinterpret_cast<const uint8_t*>(want.data()), h_.head_dim,
                                        &stored[first]);
                           if (fp8)
                             for (int64_t j = 0; j < h_.head_dim; ++j) stored[first + j] *= scale;
                         }
                         checked += h_.head_dim;
                         if (which == 0) {
                           // The key's row is head_dim / x runs of x consecutive elements.
                           for (int64_t j0 = 0; j0 < h_.head_dim; j0 += x) {
                             const int64_t at = layout.k(block, h, j0, offset);
                             for (int64_t i = 0; i < x; ++i)
                               if (got[at + i] != want[j0 + i]) differs(at + i, j0 + i);
                           }
                         } else {
                           // The value's row is head_dim elements a fixed step apart.
                           const int64_t at = layout.v(block, h, 0, offset), step = layout.v(block, h, 1, offset) - at;
                           for (int64_t j = 0; j < h_.head_dim; ++j)
                             if (got[at + j * step] != want[j]) differs(at + j * step, j);
                         }
                       }
                     }
                     Comparison& part = parts[static_cast<size_t>(task)];
                     part.elements_checked = checked;
                     part.mismatches = mismatches;
                     part.max_abs = max_abs;
                   });
      for (const Comparison& part : parts) {
        c.elements_checked += part.elements_checked;
        c.mismatches += part.mismatches;
        c.max_abs = std::max(c.max_abs, part.max_abs);
      }
    }
    c.rows_checked = c.rows_total = 2 * tokens_ * h_.kv_heads;
    return c;
  }

  PagedParams params() const override {
    PagedParams p;
    p.q = input(0).device.get();
    p.k_cache = k_cache_->get();
    p.v_cache = v_cache_->get();
    p.o = output().device.get();
    p.block_tables = static_cast<const int32_t*>(tables_->get());
    p.context_lens = static_cast<const int32_t*>(context_lens_->get());
    h_.set_params(p);
    p.block_size = block_size_;
    p.num_blocks = num_blocks_;
    p.max_blocks_per_seq = max_blocks_;
    p.partition_size = partition_size_;
    p.dtype = point().dtype;
    p.kv_dtype = kv_dtype_;
    p.k_scale = k_scale_;
    p.v_scale = v_scale_;
    finish_paged_params(p);
    return p;
  }

  DecodeHeads h_;  // RoPE positions [0, the longest context)
  int64_t block_size_, num_blocks_, partition_size_;
  DType kv_dtype_;
  int64_t tokens_ = 0, max_blocks_ = 0;
  std::vector<int32_t> table_;
  std::vector<int64_t> first_;  // each sequence's first token
  HostValues stored_[2];        // the K and V tokens as the cache holds them, when not their own dtype
  float k_scale_ = 1, v_scale_ = 1;
  DeviceBuffer *k_cache_, *v_cache_, *tables_, *context_lens_, *slots_;
};

}  // namespace

float fp8_scale(const float* values, int64_t n) {
  std::vector<float> part(static_cast<size_t>((n + kChunk - 1) / kChunk), 0.f);
  for_chunks(n, [&](int64_t lo, int64_t hi) {
    float m = 0;
    for (int64_t i = lo; i < hi; ++i) m = std::max(m, std::fabs(values[i]));
    part[static_cast<size_t>(lo / kChunk)] = m;
  });
  const float amax = part.empty() ? 0.f : *std::max_element(part.begin(), part.end());
  return amax > 0 ? amax / 448.f : 1.f;
}

PoolLayout lay_out_pool(uint64_t seed, const std::vector<int64_t>& context, int64_t block_size, int64_t num_blocks) {
  PoolLayout l;
  for (int64_t c : context) l.max_blocks = std::max(l.max_blocks, ceil_div(c, block_size));
  std::vector<int32_t> pool(static_cast<size_t>(num_blocks));
  for (int64_t i = 0; i < num_blocks; ++i) pool[i] = static_cast<int32_t>(i);
  for (int64_t i = num_blocks - 1; i > 0; --i)
    std::swap(pool[i], pool[random_bits(seed, 0x9a6ed, static_cast<uint64_t>(i)) % static_cast<uint64_t>(i + 1)]);
  const int64_t batch = static_cast<int64_t>(context.size());
  int64_t next = 0;
  for (int64_t b = 0; b < batch; ++b) next += ceil_div(context[b], block_size);
  const int32_t spare = pool[static_cast<size_t>(std::min(next, num_blocks - 1))];
  l.table.assign(static_cast<size_t>(batch * l.max_blocks), spare);
  next = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = 0; j < ceil_div(context[b], block_size); ++j) l.table[b * l.max_blocks + j] = pool[next++];
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < context[b]; ++t)
      l.slots.push_back(int64_t{l.table[b * l.max_blocks + t / block_size]} * block_size + t % block_size);
  return l;
}

void finish_num_blocks(ShapeCheck& c, const std::vector<int64_t>& context) {
  Shape& s = c.shape;
  const int64_t block_size = s.num("block_size");
  int64_t needed = 0;
  for (int64_t len : context) needed += ceil_div(len, block_size);
  // Spare blocks stay NaN: a kernel that reads a block not in its table fails verification.
  if (!c.given("num_blocks")) s.set("num_blocks", needed + needed / 4 + 1);
  // At least one spare: table entries past a sequence's last block point at it.
  if (s.num("num_blocks") <= needed)
    c.fail("num_blocks", "shape.num_blocks (" + std::to_string(s.num("num_blocks")) +
                             ") is too small: the sequences need " + std::to_string(needed) + " blocks of " +
                             std::to_string(block_size) + " tokens, plus one spare that stays NaN");
}

void finish_paged_pool(ShapeCheck& c) {
  Shape& s = c.shape;
  if (!c.given("kv_dtype")) s.set("kv_dtype", std::string(dtype_name(c.dtype)));
  finish_num_blocks(c, s.lengths("context"));
  const DType kv = dtype_from_name(s.word("kv_dtype"));
  const int64_t x = 16 / static_cast<int64_t>(dtype_bytes(kv));
  if (s.num("head_dim") % x != 0)
    c.fail("head_dim", "shape.head_dim (" + std::to_string(s.num("head_dim")) + ") must be a multiple of " +
                           std::to_string(x) + " for kv_dtype " + dtype_name(kv) +
                           " (the key cache packs 16 bytes of head_dim)");
}

namespace {

// What a plugin's variant receives (kernels/plugin/include/attnbench/plugin.h).
attnbench_paged_params paged_abi(const PagedParams& p) {
  attnbench_paged_params a{};
  abi_one_query(a, p);
  a.block_tables = p.block_tables;
  a.block_size = p.block_size;
  a.num_blocks = p.num_blocks;
  a.max_blocks_per_seq = p.max_blocks_per_seq;
  a.partition_size = p.partition_size;
  abi_score_options(a, p);
  a.kv_dtype = abi_dtype(p.kv_dtype);
  a.k_scale = p.k_scale;
  a.v_scale = p.v_scale;
  return a;
}

}  // namespace

OpSpec paged_op() {
  OpSpec op;
  op.name = "paged";
  op.summary = "decode over a paged KV cache (vLLM block tables), fp8 cache optional";
  op.keys = joined_keys({{
      batch_key(),
      heads_key(),
      kv_heads_key(),
      head_dim_key("elements per head: a multiple of 8 (of 16 for fp8), at most 256"),
      int_key("block_size", "tokens per cache block", 16),
      lengths_key("context", "tokens of each sequence: one integer for all, or one per sequence"),
      derived_int_key("num_blocks", "blocks in the pool; more than the sequences need (one spare at least)",
                      "needed + needed / 4 + 1"),
      int_key("partition_size", "v2: tokens per partition, a multiple of block_size", 512),
      choice_key("kv_dtype", "the cache's storage type", {"fp32", "fp16", "bf16", "fp8_e4m3"}, std::nullopt, "dtype"),
      decode_window_key(),
  }, score_keys(), rope_keys()});
  op.finish = [](ShapeCheck& c) {
    finish_head_keys(c);
    finish_paged_pool(c);
    const int64_t partition = c.shape.num("partition_size"), block = c.shape.num("block_size");
    if (partition % block != 0)
      c.fail(c.given("partition_size") ? "partition_size" : "block_size",
             "shape.partition_size (" + std::to_string(partition) + ") must be a multiple of block_size (" +
                 std::to_string(block) + ")");
  };
  op.variants = [] { return variant_infos(paged_variants()); };
  op.plugin_op = ATTNBENCH_OP_PAGED;
  op.add_plugin = [](const attnbench_variant& v, const char* file) { add_variant(plugin_variant(v, file, paged_abi)); };
  op.make = [](const CasePoint& p) -> std::unique_ptr<Problem> { return std::make_unique<PagedProblem>(p); };
  return op;
}

}  // namespace attnbench
