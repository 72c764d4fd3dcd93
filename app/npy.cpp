#include "app/npy.hpp"
#include "app/output.hpp"

#include <fstream>

#include "app/errors.hpp"

namespace attnbench {

std::string npy_header(const std::string& descr, const std::vector<int64_t>& shape) {
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) dims += ",";  // a Python 1-tuple
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // magic (6) + version (2) + header length (2) + dict + padding + '\n' = a multiple of 64.
  const size_t unpadded = 10 + dict.size() + 1;
  dict += std::string((64 - unpadded % 64) % 64, ' ') + "\n";
  const auto len = static_cast<uint16_t>(dict.size());
  std::string h = "\x93NUMPY";
  h += '\x01';
  h += '\x00';
  h += static_cast<char>(len & 0xff);
  h += static_cast<char>(len >> 8);
  return h + dict;
}

namespace {

// Every platform attnbench builds on is little-endian, as the headers say.
template <class T>
void write_any(const std::string& path, const char* descr, const std::vector<T>& values,
               const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  if (count != static_cast<int64_t>(values.size()))
    throw InputError(path + ": shape does not match " + std::to_string(values.size()) + " values");
  write_file(path, [&](std::ostream& out) {
    out << npy_header(descr, shape);
    out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(T)));
  });
}

}  // namespace

void write_npy(const std::string& path, const std::vector<float>& v, const std::vector<int64_t>& shape) {
  write_any(path, "<f4", v, shape);
}
void write_npy(const std::string& path, const std::vector<double>& v, const std::vector<int64_t>& shape) {
  write_any(path, "<f8", v, shape);
}
void write_npy(const std::string& path, const std::vector<int64_t>& v, const std::vector<int64_t>& shape) {
  write_any(path, "<i8", v, shape);
}

}  // namespace attnbench
