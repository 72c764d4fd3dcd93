#include "app/dump.hpp"

#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "app/npy.hpp"

namespace attnbench {

namespace fs = std::filesystem;

std::vector<int64_t> tensor_shape(const CasePoint& p, const std::string& tensor, int64_t count, std::string* layout) {
  const Shape& s = p.shape;
  std::vector<int64_t> shape;
  std::string words;
  switch (p.op) {
    case Op::softmax:
      shape = {s.rows, s.cols}, words = "[rows, cols]";
      break;
    case Op::gemm:
      if (tensor == "a") shape = {s.batch, s.m, s.k}, words = "[batch, m, k]";
      if (tensor == "b" && s.layout == GemmLayout::nt) shape = {s.batch, s.n, s.k}, words = "[batch, n, k] (C = A B^T)";
      if (tensor == "b" && s.layout == GemmLayout::nn) shape = {s.batch, s.k, s.n}, words = "[batch, k, n] (C = A B)";
      if (tensor == "c") shape = {s.batch, s.m, s.n}, words = "[batch, m, n]";
      break;
    case Op::attention:
      if (tensor == "q" || tensor == "o") shape = {s.batch, s.seq_q, s.heads, s.head_dim}, words = "[batch, seq_q, heads, head_dim]";
      if (tensor == "k" || tensor == "v") shape = {s.batch, s.seq_k, s.kv_heads, s.head_dim}, words = "[batch, seq_k, kv_heads, head_dim]";
      break;
    case Op::decode:
      if (tensor == "q" || tensor == "o") shape = {s.batch, s.heads, s.head_dim}, words = "[batch, heads, head_dim]";
      if (tensor == "k_cache" || tensor == "v_cache")
        shape = {s.batch, s.max_context, s.kv_heads, s.head_dim}, words = "[batch, max_context, kv_heads, head_dim]";
      break;
    default: break;
  }
  int64_t n = shape.empty() ? -1 : 1;
  for (int64_t d : shape) n *= d;
  if (n != count) shape = {count}, words = "flat";
  if (layout) *layout = words;
  return shape;
}

std::string path_slug(const std::string& label) {
  if (label.empty()) return "default";
  std::string out;
  for (char c : label)
    out += std::isalnum(static_cast<unsigned char>(c)) || c == '=' || c == '.' || c == '-' || c == ',' ? c : '_';
  return out;
}

namespace {

nlohmann::json shape_json(const CasePoint& p) {
  const Shape& s = p.shape;
  switch (p.op) {
    case Op::softmax: return {{"rows", s.rows}, {"cols", s.cols}};
    case Op::gemm:
      return {{"layout", s.layout == GemmLayout::nt ? "nt" : "nn"}, {"batch", s.batch}, {"m", s.m}, {"n", s.n},
              {"k", s.k}};
    case Op::attention:
      return {{"batch", s.batch},     {"heads", s.heads},   {"kv_heads", s.kv_heads}, {"seq_q", s.seq_q},
              {"seq_k", s.seq_k},     {"head_dim", s.head_dim}, {"causal", s.causal}, {"window", s.window},
              {"alibi", s.alibi},     {"scale", 1 / std::sqrt(static_cast<double>(s.head_dim))}};
    case Op::decode:
      return {{"batch", s.batch},       {"heads", s.heads},   {"kv_heads", s.kv_heads}, {"head_dim", s.head_dim},
              {"context", s.context},   {"max_context", s.max_context}, {"alibi", s.alibi},
              {"scale", 1 / std::sqrt(static_cast<double>(s.head_dim))}};
    default:
      return {{"batch", s.batch}, {"heads", s.heads}, {"kv_heads", s.kv_heads}, {"head_dim", s.head_dim}};
  }
}

void write_manifest(const std::string& dir, const nlohmann::json& m) {
  std::ofstream out(dir + "/manifest.json");
  out << m.dump(1) << "\n";
  if (!out) throw InputError(dir + "/manifest.json: error: cannot write");
}

// Unbounded errors have no json number.
double finite_or_nan(double v) { return std::isfinite(v) ? v : NAN; }

}  // namespace

PointDump::PointDump(const std::string& root, const Case& c, const CasePoint& p, bool failures_only)
    : dir_((fs::path(root) / path_slug(c.name) / path_slug(p.label)).string()),
      point_(p),
      case_name_(c.name),
      failures_only_(failures_only) {}

void PointDump::add(const Problem& problem, uint64_t seed, const ref::Rows& rows, const ref::Matrix& want,
                    const std::string& variant, const Comparison& trial, Tolerance tol, const std::string& command) {
  if (dumped_.count(variant) || (failures_only_ && trial.passed())) return;
  dumped_.insert(variant);
  const std::string dir = dir_ + "/seed" + std::to_string(seed);
  auto [it, fresh] = manifests_.try_emplace(seed);
  nlohmann::json& m = it->second;
  if (fresh) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw InputError(dir + ": error: cannot create the dump directory (" + ec.message() + ")");
    m = {{"case", case_name_},
         {"point", point_.label},
         {"op", op_name(point_.op)},
         {"dtype", dtype_name(point_.dtype)},
         {"seed", seed},
         {"shape", shape_json(point_)},
         {"inputs", nlohmann::json::object()},
         {"outputs", nlohmann::json::object()}};
    for (const Tensor* t : problem.input_tensors()) {
      std::string layout;
      const auto shape = tensor_shape(point_, t->name, t->count, &layout);
      write_npy(dir + "/" + t->name + ".npy", t->host, shape);
      m["inputs"][t->name] = {{"file", t->name + ".npy"}, {"shape", shape}, {"layout", layout},
                              {"storage", dtype_name(t->dtype)}};
    }
    const int64_t cols = problem.output_cols();
    std::vector<double> ref(want.data(), want.data() + want.size());
    write_npy(dir + "/reference.npy", ref, {static_cast<int64_t>(rows.size()), cols});
    write_npy(dir + "/reference_rows.npy", rows, {static_cast<int64_t>(rows.size())});
    m["reference"] = {{"file", "reference.npy"},
                      {"rows_file", "reference_rows.npy"},
                      {"output_view", {problem.output_rows(), cols}},
                      {"note", "fp64 reference of the listed rows of the output viewed as output_view"}};
    dirs_.insert(dir);
  }
  const Tensor& o = problem.output_tensor();
  std::string layout;
  const auto shape = tensor_shape(point_, o.name, o.count, &layout);
  const std::string file = "out_" + variant + ".npy";
  write_npy(dir + "/" + file, problem.download_output(), shape);
  m["outputs"][variant] = {{"file", file},
                           {"tensor", o.name},
                           {"shape", shape},
                           {"layout", layout},
                           {"storage", dtype_name(o.dtype)},
                           {"passed", trial.passed()},
                           {"max_abs", finite_or_nan(trial.max_abs)},
                           {"mismatches", trial.mismatches},
                           {"nonfinite", trial.nonfinite},
                           {"command", command}};
  m["tolerance"] = {{"atol", tol.atol}, {"rtol", tol.rtol}, {"rule", "|got - ref| <= atol + rtol * |ref|"}};
  write_manifest(dir, m);
}

}  // namespace attnbench
