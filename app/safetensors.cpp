#include "app/safetensors.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "app/errors.hpp"
#include "app/numeric.hpp"
#include "app/text.hpp"

namespace attnbench {
namespace {

// A header larger than this is not a checkpoint's (GPT-2 XL's is under 100 KB).
constexpr uint64_t kMaxHeader = uint64_t{100} << 20;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw InputError(clipped(path) + ": " + what);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

SafeTensor parse_entry(const std::string& path, const std::string& name, const nlohmann::json& e) {
  const std::string where = "tensor " + clipped(name, 100);
  if (!e.is_object()) fail(path, where + ": its header entry is not an object");
  SafeTensor t;
  t.name = name;
  const auto dtype = e.find("dtype");
  if (dtype == e.end() || !dtype->is_string()) fail(path, where + ": no dtype string");
  t.dtype = dtype->get<std::string>();
  if (safetensors_dtype_bytes(t.dtype) == 0) fail(path, where + ": unknown dtype '" + clipped(t.dtype, 20) + "'");
  const auto shape = e.find("shape");
  if (shape == e.end() || !shape->is_array()) fail(path, where + ": no shape list");
  int64_t count = 1;
  for (const auto& d : *shape) {
    if (!d.is_number_unsigned()) fail(path, where + ": a shape entry is not a whole number >= 0");
    const uint64_t v = d.get<uint64_t>();
    if (v > static_cast<uint64_t>(INT64_MAX)) fail(path, where + ": a shape entry is too large");
    t.shape.push_back(static_cast<int64_t>(v));
    if (__builtin_mul_overflow(count, t.shape.back(), &count))
      fail(path, where + ": shape " + shape_text(t.shape) + "... overflows 64-bit arithmetic");
  }
  const auto offsets = e.find("data_offsets");
  if (offsets == e.end() || !offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned())
    fail(path, where + ": data_offsets must be [begin, end], whole numbers");
  t.begin = (*offsets)[0].get<uint64_t>();
  t.end = (*offsets)[1].get<uint64_t>();
  if (t.end < t.begin) fail(path, where + ": data_offsets end before they begin");
  uint64_t want = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(count), uint64_t{safetensors_dtype_bytes(t.dtype)}, &want))
    fail(path, where + ": its bytes overflow 64-bit arithmetic");
  if (t.end - t.begin != want)
    fail(path, where + ": " + t.dtype + " " + shape_text(t.shape) + " is " + std::to_string(want) +
                   " bytes, but its data_offsets hold " + std::to_string(t.end - t.begin));
  return t;
}

}  // namespace

std::size_t safetensors_dtype_bytes(const std::string& dtype) {
  static const std::map<std::string, std::size_t> bytes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"I64", 8},
      {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1}};
  const auto it = bytes.find(dtype);
  return it == bytes.end() ? 0 : it->second;
}

SafeTensors SafeTensors::open(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) fail(path, "cannot open the weights file");
  const auto file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  unsigned char len_bytes[8];
  if (file_size < 8 || !in.read(reinterpret_cast<char*>(len_bytes), 8))
    fail(path, "too short for a safetensors file (" + std::to_string(file_size) + " bytes)");
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = header << 8 | len_bytes[i];  // little-endian
  if (header > kMaxHeader || header > file_size - 8)
    fail(path, "header of " + std::to_string(header) + " bytes in a file of " + std::to_string(file_size) +
                   ": truncated, or not a safetensors file");
  std::string text(header, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(header))) fail(path, "cannot read the header");

  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(path, std::string("the header is not valid JSON: ") + one_line(e.what()));
  }
  if (!j.is_object()) fail(path, "the header is not a JSON object");

  SafeTensors s;
  s.path_ = path;
  s.data_at_ = 8 + header;
  for (const auto& [name, entry] : j.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail(path, "__metadata__ is not an object");
      for (const auto& [k, v] : entry.items())
        if (v.is_string()) s.metadata_[k] = v.get<std::string>();
      continue;
    }
    s.tensors_.push_back(parse_entry(path, name, entry));
  }
  // The ranges tile the data exactly: sorted, no overlap, no hole, ending at the file's end.
  std::vector<const SafeTensor*> by_begin;
  for (const auto& t : s.tensors_) by_begin.push_back(&t);
  std::sort(by_begin.begin(), by_begin.end(), [](auto* a, auto* b) { return a->begin < b->begin || (a->begin == b->begin && a->end < b->end); });
  uint64_t at = 0;
  for (const SafeTensor* t : by_begin) {
    if (t->begin < at) fail(path, "tensor " + clipped(t->name, 100) + ": its bytes overlap another tensor's");
    if (t->begin > at) fail(path, "tensor " + clipped(t->name, 100) + ": a hole before its bytes (the data must be covered exactly)");
    at = t->end;
  }
  const uint64_t data = file_size - s.data_at_;
  if (at != data)
    fail(path, at > data ? "truncated: the tensors need " + std::to_string(at) + " bytes of data, the file holds " +
                               std::to_string(data)
                         : std::to_string(data - at) + " bytes after the last tensor's");
  return s;
}

const SafeTensor* SafeTensors::find(const std::string& name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

const SafeTensor& SafeTensors::tensor(const std::string& name, const std::vector<int64_t>& shape) const {
  const SafeTensor* t = find(name);
  if (!t) fail(path_, "no tensor named " + clipped(name, 100));
  if (t->shape != shape)
    fail(path_, "tensor " + clipped(name, 100) + " has shape " + shape_text(t->shape) + ", expected " +
                    shape_text(shape));
  return *t;
}

std::vector<float> SafeTensors::read(const SafeTensor& t) const {
  const std::size_t e = safetensors_dtype_bytes(t.dtype);
  if (t.dtype != "F32" && t.dtype != "F16" && t.dtype != "BF16")
    fail(path_, "tensor " + clipped(t.name, 100) + " is " + t.dtype + "; weights must be F32, F16 or BF16");
  std::ifstream in(path_, std::ios::binary);
  std::vector<uint8_t> bytes(t.end - t.begin);
  in.seekg(static_cast<std::streamoff>(data_at_ + t.begin));
  if (!in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size())))
    fail(path_, "tensor " + clipped(t.name, 100) + ": cannot read its bytes");
  const DType d = t.dtype == "F32" ? DType::fp32 : t.dtype == "F16" ? DType::fp16 : DType::bf16;
  std::vector<float> out(bytes.size() / e);
  decode_range(d, bytes.data(), static_cast<int64_t>(out.size()), out.data());
  return out;
}

}  // namespace attnbench
