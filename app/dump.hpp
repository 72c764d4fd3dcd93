// --dump DIR: a point's inputs, its variants' outputs and the fp64 reference as
// .npy files with a manifest.json, so a mismatch can be taken apart outside
// attnbench (numpy.load, torch.from_numpy). tools/npy_sdpa_check.py feeds an
// attention dump to PyTorch's scaled_dot_product_attention.
//
//   DIR/CASE/POINT/seedN/manifest.json    what every file is, the shape keys, tolerances
//                       q.npy k.npy ...   inputs in their natural shapes, float32 (the
//                                         storage values exactly; "storage" names the dtype)
//                       reference.npy     float64 [len(rows), output_cols]: the checked rows
//                       reference_rows.npy int64: those rows of the output viewed as
//                                         [output_rows, output_cols]
//                       out_VARIANT.npy   the variant's output, float32, natural shape
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "app/case.hpp"
#include "app/problem.hpp"

namespace attnbench {

// The point's [shape] as json: every key of its op, and the softmax scale where there
// is a head_dim (what a peer needs to recompute the reference).
nlohmann::json shape_json(const CasePoint& p);
// A sweep label as a directory name: "seq_q=1024 dtype=bf16" -> "seq_q=1024_dtype=bf16".
std::string path_slug(const std::string& label);

class PointDump {
 public:
  PointDump(const std::string& root, const Case& c, const CasePoint& p, bool failures_only);

  // After one variant's check in one trial: writes the variant's output once (the
  // first trial, or with failures_only the first trial it failed), with that trial's
  // inputs and reference beside it.
  void add(const Problem& problem, uint64_t seed, const ref::Rows& rows, const ref::Matrix& want,
           const std::string& variant, const Comparison& trial, Tolerance tol, const std::string& command);

  // The directories written, for the last line of a run.
  const std::set<std::string>& dirs() const { return dirs_; }

 private:
  std::string dir_;
  const CasePoint& point_;
  std::string case_name_;
  bool failures_only_;
  std::map<uint64_t, nlohmann::json> manifests_;  // per seed
  std::set<std::string> dumped_, dirs_;
};

}  // namespace attnbench
