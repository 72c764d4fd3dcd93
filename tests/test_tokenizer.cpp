// GPT-2's byte-level vocabulary: the byte alphabet is a bijection with GPT-2's own numbers,
// and a vocabulary written with it decodes ids back to the bytes, spaces and newlines
// included; bad files are one InputError each. The pre-tokenizer cuts text where GPT-2's
// pattern does, and keeps every byte, UTF-8 or not.
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

using Words = std::vector<std::string>;

TEST(Gpt2Pretokenize, CutsWhereGpt2sPatternDoes) {
  // A letter, number or other run takes one leading space with it.
  EXPECT_EQ(gpt2_pretokenize(" hello world"), (Words{" hello", " world"}));
  EXPECT_EQ(gpt2_pretokenize("a1b2"), (Words{"a", "1", "b", "2"}));
  EXPECT_EQ(gpt2_pretokenize("x!!"), (Words{"x", "!!"}));
  EXPECT_EQ(gpt2_pretokenize(" 123 !?"), (Words{" 123", " !?"}));
  // Contractions, lower case only; anywhere else ' is an other character.
  EXPECT_EQ(gpt2_pretokenize("don't"), (Words{"don", "'t"}));
  EXPECT_EQ(gpt2_pretokenize("they're"), (Words{"they", "'re"}));
  EXPECT_EQ(gpt2_pretokenize("'ll'"), (Words{"'ll", "'"}));
  EXPECT_EQ(gpt2_pretokenize("'S"), (Words{"'", "S"}));
  EXPECT_EQ(gpt2_pretokenize(" 's"), (Words{" '", "s"}));  // the space goes with the other run
  // Whitespace before a word leaves its last character to it: a space joins the word, any
  // other whitespace is a word of its own.
  EXPECT_EQ(gpt2_pretokenize("  two spaces"), (Words{" ", " two", " spaces"}));
  EXPECT_EQ(gpt2_pretokenize("hello  world"), (Words{"hello", " ", " world"}));
  EXPECT_EQ(gpt2_pretokenize("a\n\nb"), (Words{"a", "\n", "\n", "b"}));
  EXPECT_EQ(gpt2_pretokenize("x\t\ty"), (Words{"x", "\t", "\t", "y"}));
  // At the end of the text, whitespace stays whole.
  EXPECT_EQ(gpt2_pretokenize("hi  "), (Words{"hi", "  "}));
  EXPECT_EQ(gpt2_pretokenize("hi \n"), (Words{"hi", " \n"}));
  EXPECT_EQ(gpt2_pretokenize("\n\n"), (Words{"\n\n"}));
  EXPECT_EQ(gpt2_pretokenize(""), (Words{}));
}

TEST(Gpt2Pretokenize, ClassifiesTheExactBlocks) {
  EXPECT_EQ(gpt2_pretokenize("caf\u00e9 au lait"), (Words{"caf\u00e9", " au", " lait"}));  // é: a letter
  EXPECT_EQ(gpt2_pretokenize("na\u00efve\u00b2"), (Words{"na\u00efve", "\u00b2"}));        // ²: a number
  EXPECT_EQ(gpt2_pretokenize("x\u2014y"), (Words{"x", "\u2014", "y"}));                    // em dash: other
  EXPECT_EQ(gpt2_pretokenize("\u20ac5"), (Words{"\u20ac", "5"}));                          // euro sign
  EXPECT_EQ(gpt2_pretokenize("e\u0301"), (Words{"e", "\u0301"}));        // a combining accent: not a letter
  EXPECT_EQ(gpt2_pretokenize("a\u00a0b"), (Words{"a", "\u00a0", "b"}));  // no-break space: \s
  EXPECT_EQ(gpt2_pretokenize("a\u3000\u3000b"), (Words{"a", "\u3000", "\u3000", "b"}));
  // An emoji with a skin tone modifier, then '!': one other run, with its space.
  EXPECT_EQ(gpt2_pretokenize("hi \U0001F44B\U0001F3FD!"), (Words{"hi", " \U0001F44B\U0001F3FD!"}));
  EXPECT_EQ(gpt2_pretokenize("\uff21 \uff11\uff12"), (Words{"\uff21", " \uff11\uff12"}));  // fullwidth A 1 2
}

TEST(Gpt2Pretokenize, CountsOtherNonAsciiAsLetters) {
  // The documented approximation: ARABIC-INDIC DIGIT THREE is \p{N}, where GPT-2 would cut
  // "x", "\u0663"; here it is a letter. A full Unicode table would change this test.
  EXPECT_EQ(gpt2_pretokenize("x\u0663"), (Words{"x\u0663"}));
}

TEST(Gpt2Pretokenize, KeepsBytesThatAreNotUtf8) {
  // Each byte of a bad sequence is an other character of its own.
  EXPECT_EQ(gpt2_pretokenize("a\xff\xfez"), (Words{"a", "\xff\xfe", "z"}));
  EXPECT_EQ(gpt2_pretokenize(" \xc3"), (Words{" \xc3"}));                              // truncated
  EXPECT_EQ(gpt2_pretokenize("\xc3\xa9\xc3"), (Words{"\xc3\xa9", "\xc3"}));            // é, then truncated
  EXPECT_EQ(gpt2_pretokenize("\xc0\xafz"), (Words{"\xc0\xaf", "z"}));                  // overlong '/'
  EXPECT_EQ(gpt2_pretokenize("\xed\xa0\x80x"), (Words{"\xed\xa0\x80", "x"}));          // a surrogate
  EXPECT_EQ(gpt2_pretokenize("\xf4\x90\x80\x80z"), (Words{"\xf4\x90\x80\x80", "z"}));  // past U+10FFFF
  EXPECT_EQ(gpt2_pretokenize("\x80!"), (Words{"\x80!"}));                              // a lone continuation
}

}  // namespace
}  // namespace attnbench
