#include "app/dump.hpp"

#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <variant>

#include "app/npy.hpp"
#include "app/output.hpp"

namespace attnbench {

namespace fs = std::filesystem;

nlohmann::json shape_json(const CasePoint& p) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, value] : p.shape.values()) std::visit([&, key = key](const auto& v) { j[key] = v; }, value);
  // The scale a peer needs: the case's, else the default 1/sqrt(head_dim).
  if (p.shape.has("head_dim") && !p.shape.has("scale"))
    j["scale"] = 1 / std::sqrt(static_cast<double>(p.shape.num("head_dim")));
  return j;
}

std::string path_slug(const std::string& label) {
  if (label.empty()) return "default";
  std::string out;
  for (char c : label.substr(0, 120))
    out += std::isalnum(static_cast<unsigned char>(c)) || c == '=' || c == '.' || c == '-' || c == ',' ? c : '_';
  // One path component that stays inside the dump directory: never "." or "..".
  if (out.find_first_not_of('.') == std::string::npos) out.assign(out.size(), '_');
  return out;
}

namespace {

void write_manifest(const std::string& dir, const nlohmann::json& m) {
  write_file(dir + "/manifest.json", [&](std::ostream& out) { out << m.dump(1) << "\n"; });
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
         {"op", point_.op},
         {"dtype", dtype_name(point_.dtype)},
         {"seed", seed},
         {"case_seed", point_.verify.seed},  // the first trial's: what seeded masks (block-sparse) are drawn from
         {"shape", shape_json(point_)},
         {"inputs", nlohmann::json::object()},
         {"outputs", nlohmann::json::object()}};
    const std::vector<const Tensor*> inputs = problem.input_tensors();
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor* t = inputs[i];
      const auto shape = t->shape();
      write_npy(dir + "/" + t->name + ".npy", std::vector<float>(t->host.begin(), t->host.end()), shape);
      m["inputs"][t->name] = {
          {"file", t->name + ".npy"}, {"shape", shape}, {"layout", t->layout()}, {"storage", dtype_name(t->dtype)}};
      // How it was drawn ([inputs], docs/cases.md): the distribution, its scale and offset, and
      // the op's own draw of the tensor; null where the op fills it itself (a checkpoint's weights).
      const Problem::InputDraw d = problem.input_draw(i);
      if (d.distribution.empty()) {
        m["inputs"][t->name]["distribution"] = nullptr;
      } else {
        m["inputs"][t->name]["distribution"] = d.distribution;
        m["inputs"][t->name]["scale"] = d.scale;
        m["inputs"][t->name]["offset"] = d.offset;
        m["inputs"][t->name]["op_draw"] = d.op_shape;
      }
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
  const auto shape = o.shape();
  const std::string file = "out_" + variant + ".npy";
  write_npy(dir + "/" + file, problem.download_output(), shape);
  m["outputs"][variant] = {{"file", file},
                           {"tensor", o.name},
                           {"shape", shape},
                           {"layout", o.layout()},
                           {"storage", dtype_name(o.dtype)},
                           {"passed", trial.passed()},
                           {"max_abs", finite_or_nan(trial.max_abs)},
                           {"mismatches", trial.mismatches},
                           {"nonfinite", trial.nonfinite},
                           {"command", command}};
  if (trial.bound) {
    const Bound& b = *trial.bound;
    m["outputs"][variant]["rel_l2"] = finite_or_nan(trial.rel_l2);
    m["outputs"][variant]["margin"] = finite_or_nan(trial.margin);
    m["bound"] = {{"k_max", b.k_max},
                  {"k_l2", b.k_l2},
                  {"faithful_max", finite_or_nan(b.faithful_max)},
                  {"faithful_l2", finite_or_nan(b.faithful_l2)},
                  {"floor", b.floor},
                  {"allowed_max", finite_or_nan(b.allowed_max)},
                  {"allowed_l2", finite_or_nan(b.allowed_l2)},
                  {"rule", "max_abs <= allowed_max and rel_l2 <= allowed_l2 (docs/measuring.md, The bounds)"}};
  }
  if (std::isfinite(tol.atol))
    m["tolerance"] = {{"atol", tol.atol}, {"rtol", tol.rtol}, {"rule", "|got - ref| <= atol + rtol * |ref|"}};
  write_manifest(dir, m);
}

}  // namespace attnbench
