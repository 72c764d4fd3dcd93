// NumPy .npy files (format version 1.0), which numpy.load and torch.from_numpy read
// directly: a magic string, a Python-dict header with dtype and shape, then the
// data in C order, little-endian.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace attnbench {

// Throws InputError when the file cannot be written. The product of `shape` must be
// `values.size()`.
void write_npy(const std::string& path, const std::vector<float>& values, const std::vector<int64_t>& shape);
void write_npy(const std::string& path, const std::vector<double>& values, const std::vector<int64_t>& shape);
void write_npy(const std::string& path, const std::vector<int64_t>& values, const std::vector<int64_t>& shape);

// The header a .npy file of this dtype ("<f4", "<f8", "<i8") and shape starts with,
// padded so that the data starts on a 64-byte boundary.
std::string npy_header(const std::string& descr, const std::vector<int64_t>& shape);

}  // namespace attnbench
