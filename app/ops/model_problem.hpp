// model: the problem of one sweep point (app/ops/model.cpp has its story). Split by concern:
// model.cpp is the op (keys, rows, the reference and the judge), model_forward.cpp the forward
// chain (the prefill and the decode step's rungs, the paged cache, the kernels' params),
// model_checkpoint.cpp GPT-2's weights and a Hugging Face checkpoint of them.
#pragma once
#include <cuda_runtime.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "app/ops/model_checkpoint.hpp"
#include "app/problem.hpp"
#include "app/tokenizer.hpp"
#include "kernels/attention/attention.hpp"
#include "kernels/decode/decode.hpp"
#include "kernels/gemm/gemm.hpp"
#include "kernels/model/model.hpp"
#include "kernels/paged/paged.hpp"
#include "reference/model.hpp"

namespace attnbench::model_impl {

// Tokens a block of the paged cache holds (vLLM's default).
inline constexpr int64_t kPagedBlock = 16;

// A row is PREFILL+DECODE+STEP, STEP a chained rung of the decode step's ladder (launches,
// small_linear) and DECODE the attention variant it launches, or PREFILL+persistent, the whole
// step in one kernel. Its decode half ("DECODE+STEP" or "persistent") as those two names,
// the attention "" for a whole step.
struct DecodeHalf {
  std::string attention, step;
};
DecodeHalf decode_half(const std::string& decode);
// Whether a row's decode half attends with a paged variant (the row then runs over the paged cache).
bool is_paged(const std::string& decode);
// Whether a row's decode half is a whole step in one kernel (its own projections and attention).
bool is_whole_step(const std::string& decode);
// Whether a row's decode step runs on small_linear's fused projections.
bool is_small_linear(const std::string& decode);
// Whether a paged row may run: the case names one, or names none (then -k may).
bool names_paged_pair(const std::vector<std::string>& kernels);

class ModelProblem : public Problem {
 public:
  // model.cpp: the op's side, what the runner asks of a point.
  explicit ModelProblem(const CasePoint& p);
  ~ModelProblem() override;  // model_forward.cpp: the step graphs
  static PairedTables<AttentionParams, DecodeParams> pairs();
  static PairedTables<AttentionParams, PagedParams> paged_pairs();
  static PairedTables<AttentionParams, DecodeStepParams> step_pairs();
  static std::vector<VariantInfo> infos();
  std::vector<VariantChoice> variants(const DeviceCaps& caps) const override;
  std::vector<std::string> default_variants(const DeviceCaps& caps) const override;
  Work work() const override;
  // model_forward.cpp
  std::size_t workspace(const std::string& v) const override;
  void launch(const std::string& v, const LaunchContext& ctx) override;
  // model.cpp
  std::vector<Stage> stages(const std::string& v, const LaunchContext& ctx) override;
  std::string timing_note(const std::string& v, const LaunchContext& ctx) override;
  ref::Matrix reference(const ref::Rows& rows) const override;
  Tolerance tolerance() const override;
  void poison_output(cudaStream_t stream) override;
  Readback read_back(const ref::Rows& rows) const override;
  Comparison judge(const Readback& b, const ref::Rows& rows, const ref::Matrix& ref, Tolerance tol,
                   const Bound* bound) const override;

 protected:
  void prepare(uint64_t seed, const LaunchContext& ctx) override;

 private:
  // model.cpp
  double weight_bytes() const;
  void shift_input(size_t i, float by);
  static void upload_host(Tensor& x);
  void load_checkpoint();
  std::string quoted_text(const std::vector<int64_t>& ids) const;

  // model_forward.cpp: the forward chain. Device pointers of weight i, layer l; of a layer's dense cache.
  const void* weight(size_t i, int64_t l = 0) const;
  void* cache(DeviceBuffer* b, int64_t l) const;
  int32_t* positions() const { return static_cast<int32_t*>(state_->get()); }
  Sequences sequences() const;
  int32_t* contexts() const { return static_cast<int32_t*>(state_->get()) + batch_; }
  std::vector<GemmParams> gemms(int64_t rows, int64_t l) const;
  std::string gemm_why(const DeviceCaps& caps) const;
  std::function<std::string(const Variant<AttentionParams>&)> prefill_why(const DeviceCaps& caps) const;
  std::function<std::string(const Variant<DecodeParams>&)> decode_why(const DeviceCaps& caps) const;
  std::function<std::string(const Variant<DecodeStepParams>&)> step_why(const DeviceCaps& caps) const;
  std::function<std::string(const ChainedStep&)> chained_why() const;
  std::function<std::string(const Variant<PagedParams>&)> paged_why(const DeviceCaps& caps) const;
  void add_paged_cache();
  // Every sequence at row 0: where a staged step's k and v rows go.
  const int32_t* zeros() const { return static_cast<const int32_t*>(zeros_->get()); }
  void* paged(DeviceBuffer* b, int64_t l) const;
  PagedParams paged_params(int64_t l) const;
  void write_pages(const void* k, const void* v, const int64_t* slots, int64_t tokens, int64_t l,
                   const LaunchContext& ctx);
  void step_attention(const std::string& d, int64_t l, const LaunchContext& ctx);
  AttentionParams prefill_params(int64_t l) const;
  DecodeParams decode_params(int64_t l) const;
  DecodeStepParams step_params() const;
  void layers(int64_t n, const int32_t* starts, const std::function<void(int64_t)>& attend, const LaunchContext& ctx);
  void prefill(const std::string& a, const std::string& dec, const LaunchContext& ctx);
  void step_launches(const std::string& d, const LaunchContext& ctx);
  void fused_step(const std::string& dec, const LaunchContext& ctx);
  void decode_step(const std::string& d, const LaunchContext& ctx);

  // The kernel kinds a step's time is split into, each launch group in an NVTX range of its
  // kind's name (Nsight Systems shows the split too); with a breakdown under way, CUDA events
  // around each group.
  enum Kind { kGemm, kAttention, kOther, kKinds };
  static constexpr const char* kKindNames[kKinds] = {"GEMMs", "attention", "the rest"};
  struct Span {
    Kind kind;
    cudaEvent_t start, stop;
  };
  template <class Launch>
  void as(Kind k, cudaStream_t s, const Launch& launch);

  ref::Gpt2Config c_;
  int64_t batch_, prompt_, generate_, max_context_;
  std::vector<Span>* breakdown_ = nullptr;  // while timing_note() splits a step
  std::string gemm_, weights_path_;
  bool graphs_on_ = true, weights_loaded_ = false;
  bool staged_ = false;  // while a paged pair's decode step is launched: k and v go to staged_k_, staged_v_
  std::vector<int64_t> given_prompt_, prompt_ids_;
  std::shared_ptr<Gpt2Vocab> vocab_;
  mutable std::vector<int64_t> ref_tokens_;            // the last reference()'s, [batch, generate]
  mutable std::vector<double> ref_margins_, ref_top_;  // [generate, batch]
  DeviceBuffer *x_, *h_, *qkv_, *q_, *o_, *y_, *f_, *k_cache_, *v_cache_, *logits_, *tokens_, *tokens0_, *state_,
      *state0_, *best_;
  // The paged cache (add_paged_cache), null when the case names no paged pair.
  DeviceBuffer *paged_k_ = nullptr, *paged_v_ = nullptr, *staged_k_ = nullptr, *staged_v_ = nullptr,
               *step_slots_ = nullptr, *block_tables_ = nullptr, *prompt_slots_ = nullptr, *zeros_ = nullptr;
  int64_t blocks_per_seq_ = 0, num_blocks_ = 0;
  std::map<std::string, cudaGraphExec_t> graphs_;
};

}  // namespace attnbench::model_impl
