// The safetensors reader: a file written here by the format's rules reads back exactly;
// every way a checkpoint can be wrong is one InputError naming the file and the tensor.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/errors.hpp"
#include "app/numeric.hpp"
#include "app/safetensors.hpp"

namespace attnbench {
namespace {

namespace fs = std::filesystem;

// Writes a safetensors file: the 8-byte little-endian length, `header` as JSON, then `data`.
std::string write_file(const std::string& name, const std::string& header, const std::vector<uint8_t>& data,
                       int64_t length_delta = 0) {
  const std::string path = (fs::temp_directory_path() / ("attnbench_st_" + name + ".safetensors")).string();
  std::ofstream out(path, std::ios::binary);
  uint64_t n = header.size() + static_cast<uint64_t>(length_delta);
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>(n >> (8 * i) & 0xff));
  out << header;
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  return path;
}

std::vector<uint8_t> bytes_of(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Two tensors: wte F32 [2, 3] = 0..5, then ln.b BF16 [2] = (1.5, -2).
std::string good_header() {
  return R"({"__metadata__": {"format": "pt"},
    "wte": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
    "ln.b": {"dtype": "BF16", "shape": [2], "data_offsets": [24, 28]}})";
}
std::vector<uint8_t> good_data() {
  std::vector<uint8_t> d = bytes_of({0, 1, 2, 3, 4, 5});
  for (float f : {1.5f, -2.f}) {
    const uint16_t h = float_to_bf16(f);
    d.push_back(static_cast<uint8_t>(h & 0xff));
    d.push_back(static_cast<uint8_t>(h >> 8));
  }
  return d;
}

std::string error_of(const std::string& path) {
  try {
    SafeTensors::open(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

void expect_error(const std::string& path, const std::vector<std::string>& parts) {
  const std::string msg = error_of(path);
  ASSERT_FALSE(msg.empty()) << "no error for " << path;
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
}

TEST(Safetensors, ReadsWhatWasWritten) {
  const SafeTensors s = SafeTensors::open(write_file("good", good_header(), good_data()));
  ASSERT_EQ(s.tensors().size(), 2u);
  EXPECT_EQ(s.metadata().at("format"), "pt");
  EXPECT_EQ(s.read(s.tensor("wte", {2, 3})), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(s.read(s.tensor("ln.b", {2})), (std::vector<float>{1.5f, -2.f}));
}

TEST(Safetensors, WrongShapeOrMissingTensorNamesIt) {
  const SafeTensors s = SafeTensors::open(write_file("good2", good_header(), good_data()));
  try {
    s.tensor("wte", {3, 2});
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor wte has shape [2, 3], expected [3, 2]"), std::string::npos) << e.what();
  }
  try {
    s.tensor("wpe", {1});
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no tensor named wpe"), std::string::npos) << e.what();
  }
}

TEST(Safetensors, BrokenFilesAreOneErrorEach) {
  expect_error("/nonexistent/model.safetensors", {"cannot open"});
  const std::string short_path = (fs::temp_directory_path() / "attnbench_st_short.safetensors").string();
  std::ofstream(short_path, std::ios::binary) << "abc";
  expect_error(short_path, {"too short for a safetensors file (3 bytes)"});
  expect_error(write_file("huge_length", "", {}, -8), {"truncated, or not a safetensors file"});
  expect_error(write_file("long_header", good_header(), good_data(), 1000), {"truncated, or not a safetensors file"});
  expect_error(write_file("not_json", "{\"wte\": [1, 2", {}), {"not valid JSON"});
  expect_error(write_file("not_object", "[1, 2]", {}), {"not a JSON object"});
  std::vector<uint8_t> cut = good_data();
  cut.resize(20);
  expect_error(write_file("truncated", good_header(), cut), {"truncated: the tensors need 28 bytes", "holds 20"});
  std::vector<uint8_t> extra = good_data();
  extra.push_back(0);
  expect_error(write_file("extra", good_header(), extra), {"1 bytes after the last tensor"});
  expect_error(write_file("dtype", R"({"w": {"dtype": "Q4", "shape": [1], "data_offsets": [0, 1]}})", {0}),
               {"tensor w", "unknown dtype 'Q4'"});
  expect_error(write_file("size", R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})", {0, 0, 0, 0}),
               {"tensor w", "F32 [2] is 8 bytes, but its data_offsets hold 4"});
  expect_error(write_file("overlap", R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
                                         "b": {"dtype": "U8", "shape": [2], "data_offsets": [1, 3]}})",
                          {0, 0, 0}),
               {"overlap"});
  expect_error(write_file("hole", R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})", {0, 0}),
               {"tensor a", "a hole"});
  expect_error(write_file("negative", R"({"a": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 0]}})", {}),
               {"tensor a", "shape entry"});
  expect_error(write_file("offsets", R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [1]}})", {0}),
               {"tensor a", "data_offsets"});
  expect_error(write_file("overflow",
                          R"({"a": {"dtype": "F64", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}})",
                          std::vector<uint8_t>(8)),
               {"tensor a"});
}

TEST(Safetensors, OnlyFloatWeightsAreRead) {
  const SafeTensors s = SafeTensors::open(
      write_file("ints", R"({"ids": {"dtype": "I32", "shape": [1], "data_offsets": [0, 4]}})", {1, 0, 0, 0}));
  try {
    s.read(s.tensor("ids", {1}));
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor ids is I32; weights must be F32, F16 or BF16"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace attnbench
