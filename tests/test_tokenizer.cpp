// GPT-2's byte-level vocabulary: the byte alphabet is a bijection with GPT-2's own numbers,
// and a vocabulary written with it decodes ids back to the bytes, spaces and newlines
// included; bad files are one InputError each.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "app/errors.hpp"
#include "app/tokenizer.hpp"

namespace attnbench {
namespace {

namespace fs = std::filesystem;

std::string write_vocab(const std::string& name, const std::string& json) {
  const std::string path = (fs::temp_directory_path() / ("attnbench_vocab_" + name + ".json")).string();
  std::ofstream(path) << json;
  return path;
}

// GPT-2's table: space (0x20) is U+0120 'Ġ', newline (0x0a) U+010A 'Ċ', 'a' stays 'a',
// 0xad (soft hyphen) is U+0143, byte 0 is U+0100.
TEST(Gpt2Vocab, ByteAlphabetMatchesGpt2) {
  EXPECT_EQ(gpt2_char_of_byte(' '), 0x120u);
  EXPECT_EQ(gpt2_char_of_byte('\n'), 0x10au);
  EXPECT_EQ(gpt2_char_of_byte('a'), static_cast<uint32_t>('a'));
  EXPECT_EQ(gpt2_char_of_byte(0xad), 0x143u);
  EXPECT_EQ(gpt2_char_of_byte(0), 0x100u);
  std::set<uint32_t> all;
  for (int b = 0; b < 256; ++b) all.insert(gpt2_char_of_byte(static_cast<uint8_t>(b)));
  EXPECT_EQ(all.size(), 256u);  // one character per byte
}

TEST(Gpt2Vocab, DecodesIdsToBytes) {
  // "Hello", " world" (Ġworld), "\n" (Ċ), "é" as its two UTF-8 bytes 0xc3 0xa9 ("Ã©").
  const Gpt2Vocab v = Gpt2Vocab::load(
      write_vocab("good", R"({"Hello": 0, "\u0120world": 1, "\u010a": 2, "\u00c3\u00a9": 3})"));
  EXPECT_EQ(v.size(), 4);
  EXPECT_EQ(v.decode({0, 1, 2, 0}), "Hello world\nHello");
  EXPECT_EQ(v.decode({3}), "\xc3\xa9");
  EXPECT_THROW(v.decode({4}), InputError);
}

TEST(Gpt2Vocab, BadFilesAreOneErrorEach) {
  const auto error_of = [](const std::string& path) -> std::string {
    try {
      Gpt2Vocab::load(path);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of("/nonexistent/vocab.json").find("cannot open"), std::string::npos);
  EXPECT_NE(error_of(write_vocab("json", "{\"a\": ")).find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(write_vocab("list", "[1]")).find("expected an object"), std::string::npos);
  EXPECT_NE(error_of(write_vocab("id", R"({"a": 5})")).find("below the vocabulary's size 1"), std::string::npos);
  EXPECT_NE(error_of(write_vocab("twice", R"({"a": 0, "b": 0})")).find("given to two tokens"), std::string::npos);
  EXPECT_NE(error_of(write_vocab("alphabet", R"({" ": 0})")).find("token 0 has U+0020, outside GPT-2's byte alphabet"),
            std::string::npos);
}

}  // namespace
}  // namespace attnbench
