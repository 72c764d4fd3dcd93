// sample: one token per row of logits [batch, vocab] by temperature, min-p, top-k and top-p,
// drawn by inverse CDF with the row's Philox uniform (docs/cases.md, "op sample"). The output
// is int32 token ids; the verdict is exact (app/verify.hpp, compare_integers), up to the
// near-ties reference/sample.hpp derives from fp32's rounding, which the row's note counts.
// Bandwidth-bound: the floor is the logits read once.
// The LM-head form (shape.hidden = d > 0) is the same op with the logits computed, not given:
// hidden [batch, d] · W [vocab, d]ᵀ in the dtype, the same rule and verdict, the reference's
// logits in fp64 from the stored values and each one's fp32 error bound (reference/sample.hpp);
// its floor is W read once.
#include <cmath>
#include <map>
#include <mutex>

#include "app/op.hpp"
#include "app/problem.hpp"
#include "app/text.hpp"
#include "kernels/common/random.hpp"
#include "kernels/sample/sample.hpp"
#include "reference/sample.hpp"

namespace attnbench {
namespace {

// Logits N(0, 4.5²): real LM logits' spread, where top_p 0.9 keeps tens to hundreds of tokens
// at vocab 32k-256k (medians ~80 of 32000, ~300 of 128256, ~400 of 256000).
constexpr float kLogitScale = 4.5f;

class SampleProblem : public TableProblem<SampleParams> {
 public:
  explicit SampleProblem(const CasePoint& p)
      : TableProblem(p, sample_variants()),
        batch_(p.shape.num("batch")),
        vocab_(p.shape.num("vocab")),
        d_(p.shape.num("hidden")) {
    const Shape& s = p.shape;
    options_.temperature = static_cast<float>(s.real("temperature"));
    options_.top_k = s.num("top_k");
    options_.top_p = static_cast<float>(s.real("top_p"));
    options_.min_p = static_cast<float>(s.real("min_p"));
    if (d_ == 0) {
      add_input("logits", p.dtype, {{"batch", batch_, 'b'}, {"vocab", vocab_, 'd'}}, kLogitScale, true);
    } else {
      // hidden N(0, 1) and W N(0, 4.5² / d): logits of the same N(0, 4.5²) as the given form's.
      add_input("hidden", p.dtype, {{"batch", batch_, 'b'}, {"hidden", d_, 'd'}}, 1, true);
      add_input("lm_head", p.dtype, {{"vocab", vocab_, 0}, {"hidden", d_, 'd'}},
                kLogitScale / std::sqrt(static_cast<float>(d_)), true, "W, as a checkpoint stores the LM head");
    }
    // int32 ids in 4-byte slots declared fp32: the poison (all-ones bytes) reads as -1 and as NaN,
    // so the harness's scan counts a row no kernel wrote, and an id (< 2^23) is a finite float's
    // bits. read_back and download_output read the slots as int32.
    add_output("tokens", DType::fp32, {{"batch", batch_, 'b'}, {"token", 1, 'd'}}, 1, "int32 token ids");
  }
  // The logits read once and the tokens written: the floor. A weight (scale, exp) and an add per
  // logit, once.
  // The LM-head form: W and hidden read once, 2d FLOPs a logit more.
  Work work() const override {
    const double logits = static_cast<double>(batch_) * static_cast<double>(vocab_);
    const double bytes = static_cast<double>(dtype_bytes(point().dtype));
    if (d_ > 0) {
      const double d = static_cast<double>(d_);
      return {(2.0 * d + 3.0) * logits, (static_cast<double>(vocab_) + static_cast<double>(batch_)) * d * bytes +
                                            4.0 * batch_,
              Bandwidth::read};
    }
    return {3.0 * logits, logits * bytes + 4.0 * batch_, Bandwidth::read};
  }
  ref::Matrix reference(const ref::Rows& rows) const override {
    std::vector<ref::SampleDraw> draws =
        d_ > 0 ? ref::sample_lm_head(input(0).host.data(), input(1).host.data(), vocab_, d_, rows, options_, rng_seed_)
               : ref::sample(input(0).host.data(), vocab_, rows, options_, rng_seed_);
    ref::Matrix out(static_cast<int64_t>(rows.size()), 1);
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < rows.size(); ++i) {
      out(static_cast<int64_t>(i), 0) = static_cast<double>(draws[i].token);
      draws_[rows[i]] = std::move(draws[i]);
    }
    return out;
  }
  Readback read_back(const ref::Rows& rows) const override {
    Readback b = Problem::read_back(rows);  // the NaN scan
    const std::vector<int32_t> ids = download_ids();
    for (size_t i = 0; i < rows.size(); ++i) b.got[i] = ids[static_cast<size_t>(rows[i])];
    return b;
  }
  std::vector<float> download_output() const override {
    const std::vector<int32_t> ids = download_ids();
    return std::vector<float>(ids.begin(), ids.end());
  }
  // Exact, up to the near-ties of the row's draw (reference/sample.hpp): counted in the note.
  Comparison judge(const Readback& b, const ref::Rows& rows, const ref::Matrix& ref, Tolerance tol,
                   const Bound* bound) const override {
    (void)ref, (void)tol, (void)bound;
    std::vector<IntegerCheck> want;
    int64_t near = 0, filter_near = 0;
    double window = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (int64_t r : rows) {
        const ref::SampleDraw& d = draws_.at(r);
        want.push_back({d.token, std::vector<int64_t>(d.accepted.begin() + 1, d.accepted.end())});
        near += d.near_tie || (d.filter_near_tie && d.accepted.size() > 1);
        filter_near += d.filter_near_tie;
        window = std::max(window, d.window);
      }
    }
    int64_t other = 0;
    Comparison c = compare_integers(want, b.got, rows, &other);
    c.rows_total = output_rows();
    c.nonfinite = b.nonfinite;
    c.also_wrong = b.also_wrong;
    c.note = "tokens: " + std::to_string(c.elements_checked - c.mismatches - other) + " of " +
             std::to_string(c.elements_checked) + " equal the fp64 draw";
    if (other) c.note += ", " + std::to_string(other) + " a neighbour within the near-tie window";
    if (near) c.note += "; near-tie rows: " + std::to_string(near);
    if (filter_near) c.note += " (" + std::to_string(filter_near) + " at a filter's threshold)";
    if (window > 0) c.note += "; widest window " + fmt_sci(window) + " of the kept mass";
    return c;
  }

 protected:
  void prepare(uint64_t seed, const LaunchContext&) override { rng_seed_ = splitmix64(seed ^ 0x53414d504c45ull); }

 private:
  SampleParams params() const override {
    SampleParams p;
    if (d_ > 0) {
      p.hidden = input(0).device.get();
      p.lm_head = input(1).device.get();
      p.d = d_;
    } else {
      p.logits = input(0).device.get();
    }
    p.tokens = static_cast<int32_t*>(output().device.get());
    p.batch = batch_;
    p.vocab = vocab_;
    p.dtype = point().dtype;
    p.temperature = options_.temperature;
    p.top_k = options_.top_k;
    p.top_p = options_.top_p;
    p.min_p = options_.min_p;
    p.seed = rng_seed_;
    return p;
  }
  std::vector<int32_t> download_ids() const {
    std::vector<int32_t> ids(static_cast<size_t>(batch_));
    output().device.download(ids.data(), ids.size() * sizeof(int32_t));
    return ids;
  }

  int64_t batch_, vocab_, d_;  // d_: the LM head's width, 0 when the logits are given
  ref::SampleOptions options_;
  uint64_t rng_seed_ = 0;
  mutable std::mutex mutex_;
  mutable std::map<int64_t, ref::SampleDraw> draws_;  // the last reference()'s rows
};

void finish_sample(ShapeCheck& c) {
  const Shape& s = c.shape;
  if (s.real("top_p") <= 0) c.fail("top_p", "shape.top_p must be in (0, 1]: 1 is off, and 0 would keep nothing");
  const double t = s.real("temperature");
  if (t != 0 && t < 1e-3)
    c.fail("temperature",
           "shape.temperature must be 0 (greedy) or at least 1e-3 (below it, fp32's 1/T and the weights' "
           "tolerance lose their meaning)");
  if (s.num("hidden") > 0 && c.dtype != DType::fp16 && c.dtype != DType::bf16)
    c.fail("hidden", "shape.hidden (the LM-head form) takes dtype fp16 or bf16, as a checkpoint stores the LM head");
}

}  // namespace

OpSpec sample_op() {
  OpSpec op;
  op.name = "sample";
  op.summary =
      "one token per row of logits [batch, vocab], given or from an LM head: temperature, min-p, top-k, top-p, "
      "seeded Philox draw";
  op.keys = {
      int_key("batch", "rows of logits, one token drawn from each"),
      int_key("vocab", "logits per row (the vocabulary)", std::nullopt, 2),
      number_key("temperature",
                 "logits divided by it before the softmax; 0: greedy (argmax, lowest index of equal "
                 "maxima), the filters ignored",
                 1.0, 0, 100),
      int_key("top_k", "keep tokens with fewer than top_k strictly larger logits (ties with the k-th all kept); 0: off",
              0, 0),
      number_key("top_p",
                 "keep tokens whose strictly more probable kept tokens hold less than top_p of the mass "
                 "(the one crossing top_p is kept); 1: off",
                 1.0, 0, 1),
      number_key("min_p", "keep tokens with probability at least min_p times the largest; 0: off", 0.0, 0, 1),
      int_key("hidden",
              "0: the logits are given; d > 0: they come from an LM head of width d, hidden [batch, d] · "
              "W [vocab, d]ᵀ (fp16/bf16)",
              0, 0),
  };
  op.finish = finish_sample;
  op.variants = [] { return variant_infos(sample_variants()); };
  op.make = [](const CasePoint& p) -> std::unique_ptr<Problem> { return std::make_unique<SampleProblem>(p); };
  return op;
}

}  // namespace attnbench
