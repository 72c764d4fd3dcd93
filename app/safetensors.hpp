// Reading a safetensors file (Hugging Face's format for model weights): an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype, shape and byte
// range, then the bytes. open() checks the whole header against the file before anything
// is read, so that a bad checkpoint is one clear error (exit 2) naming the tensor, already
// at --dry-run; tensor() and read() then check what a model asks for.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace attnbench {

struct SafeTensor {
  std::string name, dtype;     // dtype as the header spells it: "F32", "F16", "BF16", ...
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range within the data that follows the header
};

class SafeTensors {
 public:
  // Reads and checks the header of `path`: every tensor's dtype is known, its shape's bytes
  // equal its range, ranges lie within the file, cover its data exactly and never overlap.
  // Throws InputError naming the file (and the tensor) otherwise.
  static SafeTensors open(const std::string& path);

  const std::string& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::vector<SafeTensor>& tensors() const { return tensors_; }
  const SafeTensor* find(const std::string& name) const;
  // The tensor `name`, which must exist and have this shape (InputError naming it otherwise).
  const SafeTensor& tensor(const std::string& name, const std::vector<int64_t>& shape) const;
  // Its values widened to float: F32, F16 and BF16 (InputError for other dtypes).
  std::vector<float> read(const SafeTensor& t) const;

 private:
  std::string path_;
  uint64_t data_at_ = 0;  // the file offset of byte 0 of the data
  std::vector<SafeTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Bytes per element of a safetensors dtype; 0 when unknown.
std::size_t safetensors_dtype_bytes(const std::string& dtype);

}  // namespace attnbench
