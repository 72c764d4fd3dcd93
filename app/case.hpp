// A test case: one TOML file (CASES.md), validated and expanded into sweep points.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "errors.hpp"
#include "kernels/common/dtype.hpp"
#include "kernels/gemm/gemm.hpp"

namespace attnbench {

enum class Op { softmax, gemm, attention, decode, paged, pipeline };
const char* op_name(Op op);

enum class TimingMode { cold, hot, graph };
const char* mode_name(TimingMode m);

// Every [shape] key of every op; an op reads only its own (CASES.md).
struct Shape {
  // softmax
  int64_t rows = 0, cols = 0;
  // gemm
  GemmLayout layout = GemmLayout::nt;
  int64_t m = 0, n = 0, k = 0;
  // gemm (default 1), attention, decode, paged, pipeline
  int64_t batch = 1;
  // attention, decode, paged, pipeline
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  bool alibi = false;
  // attention
  int64_t seq_q = 0, seq_k = 0;
  bool causal = false;
  int64_t window = 0;
  // decode, paged: one length per sequence (an int in the file is repeated batch times)
  std::vector<int64_t> context;
  // decode and pipeline: the cache's allocated length
  int64_t max_context = 0;
  // paged
  int64_t block_size = 16, num_blocks = 0, partition_size = 512;
  DType kv_dtype = DType::fp32;
  // pipeline
  int64_t prompt = 0, generate = 0;
  std::string prefill, decode;  // variant names; empty = the fastest verified
};

struct VerifySpec {
  uint64_t seed = 1;  // trials use seed, seed + 1, ...
  int trials = 2;
  std::optional<double> atol, rtol;  // unset = the dtype's default
  int64_t max_rows = 512;            // 0 = all rows
};

struct BenchSpec {
  TimingMode mode = TimingMode::cold;
  double warmup_ms = 20, min_time_ms = 100, max_noise = 0.005, max_time_ms = 2000;
};

// One fully resolved point of a case's sweep: everything a run needs.
struct CasePoint {
  std::string label;  // the swept values, "seq_q=1024 dtype=bf16"; empty without a sweep
  // The same as --set overrides ("shape.seq_q=1024", "dtype=bf16"): appended to the
  // case's own, they make a command line that runs this point alone.
  std::vector<std::string> pins;
  Op op = Op::softmax;
  DType dtype = DType::fp32;
  Shape shape;
  std::vector<std::string> kernels;  // empty = every variant that supports the point
  std::string baseline;              // resolved: the case's, or the family's
  VerifySpec verify;
  BenchSpec bench;
};

struct Case {
  std::string name, description, file;
  Op op = Op::softmax;
  std::vector<CasePoint> points;  // the cartesian product of [sweep], in file order
};

// Variant names per op, for validating `kernels`, `baseline`, `prefill`, `decode`.
struct KernelCatalog {
  std::map<Op, std::vector<std::string>> variants;
  std::map<Op, std::string> baseline;
};

// `sets` are --set overrides, "key=value" with a TOML value: "shape.seq_q=8192",
// "dtype=\"bf16\"" or "dtype=bf16" (bare words are taken as strings),
// "shape.seq_q=[1024,2048]" (a list on a shape key becomes a sweep).
// Throws InputError with "file:line:col: ..." on any problem.
Case load_case(const std::string& path, const std::vector<std::string>& sets, const KernelCatalog& catalog);
Case parse_case(const std::string& toml_text, const std::string& source, const std::vector<std::string>& sets,
                const KernelCatalog& catalog);

// A case argument to files: a .toml file, a directory (every .toml below it,
// sorted), "all" (every case under cases_dir), or a bare name looked up in cases_dir
// (cases_dir/NAME.toml, cases_dir/NAME/, or a unique NAME.toml anywhere below it).
std::vector<std::string> resolve_case_paths(const std::string& arg, const std::string& cases_dir);

}  // namespace attnbench
