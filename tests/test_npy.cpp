// The .npy writer (read back here, and by numpy when it is installed) and the
// --dump naming helpers.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "app/dump.hpp"
#include "app/npy.hpp"

using namespace attnbench;

namespace {

struct Npy {
  std::string descr;
  bool fortran = true;
  std::vector<int64_t> shape;
  std::string data;
  size_t header_bytes = 0;
};

// A reader written from the format's description, independent of the writer.
Npy read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  Npy n;
  EXPECT_EQ(s.substr(0, 6), "\x93NUMPY");
  EXPECT_EQ(s[6], 1);
  EXPECT_EQ(s[7], 0);
  const size_t len = static_cast<unsigned char>(s[8]) | static_cast<size_t>(static_cast<unsigned char>(s[9])) << 8;
  const std::string dict = s.substr(10, len);
  EXPECT_EQ(dict.back(), '\n');
  std::smatch m;
  EXPECT_TRUE(std::regex_search(dict, m, std::regex("'descr': '([^']*)'")));
  n.descr = m[1];
  n.fortran = dict.find("'fortran_order': False") == std::string::npos;
  EXPECT_TRUE(std::regex_search(dict, m, std::regex("'shape': \\(([^)]*)\\)")));
  std::stringstream dims(m[1].str());
  for (std::string d; std::getline(dims, d, ',');)
    if (d.find_first_not_of(' ') != std::string::npos) n.shape.push_back(std::stoll(d));
  n.header_bytes = 10 + len;
  n.data = s.substr(n.header_bytes);
  return n;
}

template <class T>
std::vector<T> values_of(const Npy& n) {
  std::vector<T> v(n.data.size() / sizeof(T));
  std::memcpy(v.data(), n.data.data(), v.size() * sizeof(T));
  return v;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("attnbench-test-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

}  // namespace

TEST(Npy, FloatRoundTrip) {
  const std::string path = temp_path("f4.npy");
  const std::vector<float> v = {1.5f, -2.25f, 3e-8f, 65504.f, 0.f, -0.f};
  write_npy(path, v, {2, 3});
  const Npy n = read_npy(path);
  EXPECT_EQ(n.descr, "<f4");
  EXPECT_FALSE(n.fortran);
  EXPECT_EQ(n.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(n.header_bytes % 64, 0u);  // data aligned, as numpy's own writer does
  EXPECT_EQ(values_of<float>(n), v);
  std::filesystem::remove(path);
}

TEST(Npy, DoubleAndInt64AndOneDimension) {
  const std::string pd = temp_path("f8.npy"), pi = temp_path("i8.npy");
  write_npy(pd, std::vector<double>{0.1, 1e300, -7}, {3});
  write_npy(pi, std::vector<int64_t>{0, 1, int64_t{1} << 40, -5}, {4});
  const Npy d = read_npy(pd), i = read_npy(pi);
  EXPECT_EQ(d.descr, "<f8");
  EXPECT_EQ(d.shape, std::vector<int64_t>{3});
  EXPECT_EQ(values_of<double>(d), (std::vector<double>{0.1, 1e300, -7}));
  EXPECT_EQ(i.descr, "<i8");
  EXPECT_EQ(values_of<int64_t>(i), (std::vector<int64_t>{0, 1, int64_t{1} << 40, -5}));
  // A 1-tuple needs its comma, or Python reads (3) as the int 3.
  EXPECT_NE(npy_header("<f8", {3}).find("'shape': (3,)"), std::string::npos);
  std::filesystem::remove(pd);
  std::filesystem::remove(pi);
}

TEST(Npy, FourDimensionsAndEmpty) {
  const std::string path = temp_path("4d.npy");
  std::vector<float> v(2 * 3 * 4 * 5);
  for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(k);
  write_npy(path, v, {2, 3, 4, 5});
  EXPECT_EQ(read_npy(path).shape, (std::vector<int64_t>{2, 3, 4, 5}));
  write_npy(path, std::vector<float>{}, {0, 8});
  EXPECT_EQ(read_npy(path).shape, (std::vector<int64_t>{0, 8}));
  std::filesystem::remove(path);
}

TEST(Npy, ShapeMustMatch) { EXPECT_THROW(write_npy(temp_path("bad.npy"), std::vector<float>{1, 2, 3}, {2, 2}), InputError); }

// The real reader, where there is one: numpy must load the file and see the same values.
TEST(Npy, NumpyLoadsIt) {
  if (std::system("python3 -c 'import numpy' >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3 with numpy";
  const std::string path = temp_path("np.npy");
  write_npy(path, std::vector<float>{0.f, 1.f, 2.f, 3.f, 4.f, 5.5f}, {1, 2, 3});
  const std::string check = "python3 -c \"import numpy as np; a = np.load('" + path +
                            "'); assert a.dtype == np.float32 and a.shape == (1, 2, 3) and a[0, 1, 2] == 5.5, a\"";
  EXPECT_EQ(std::system(check.c_str()), 0);
  std::filesystem::remove(path);
}

// The manifest's shape: every key of the point's op, and the scale a peer needs.
TEST(Dump, ShapeJsonHasEveryKey) {
  const CasePoint p =
      parse_case("op = \"attention\"\n[shape]\nbatch = 2\nheads = 4\nkv_heads = 2\nseq_q = 5\nseq_k = 7\nhead_dim = 16\n",
                 "t.toml", {})
          .points.at(0);
  const nlohmann::json j = shape_json(p);
  EXPECT_EQ(j["seq_k"], 7);
  EXPECT_EQ(j["kv_heads"], 2);
  EXPECT_EQ(j["causal"], "none");
  EXPECT_DOUBLE_EQ(j["scale"].get<double>(), 0.25);
  EXPECT_EQ(j.size(), p.shape.values().size() + 1);
}

TEST(Dump, PathSlug) {
  EXPECT_EQ(path_slug(""), "default");
  EXPECT_EQ(path_slug("seq_q=1024 dtype=bf16"), "seq_q=1024_dtype=bf16");
  EXPECT_EQ(path_slug("context=[1,7]"), "context=_1,7_");
  EXPECT_EQ(path_slug("../x"), ".._x");
}
