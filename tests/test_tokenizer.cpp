// GPT-2's byte-level vocabulary: the byte alphabet is a bijection with GPT-2's own numbers,
// and a vocabulary written with it decodes ids back to the bytes, spaces and newlines
// included. Encoding: the pre-tokenizer cuts text where GPT-2's pattern does, and keeps
// every byte, UTF-8 or not; BPE merges by rank as encoder.py does (checked by hand on cases
// where other orders differ, and against a line-by-line copy of encoder.py's loop on random
// merges); decode(encode(s)) == s for any bytes. Bad files are one InputError each, naming
// the file (and the line of merges.txt).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
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

// --- Encoding ---

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xc0 | cp >> 6);
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else {  // the byte alphabet stops at U+0143; the tests need no more
    s += static_cast<char>(0xe0 | cp >> 12);
    s += static_cast<char>(0x80 | (cp >> 6 & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return s;
}

// A token's bytes as vocab.json and merges.txt write them: " t" is "Ġt".
std::string written(const std::string& bytes) {
  std::string out;
  for (char c : bytes) out += utf8(gpt2_char_of_byte(static_cast<uint8_t>(c)));
  return out;
}

// A vocabulary of the 256 one-byte tokens, byte b with id b ('a' is 97), then `more` (their
// bytes) with ids 256, 257, ...; `skip_byte` leaves that byte's token out (and the ids
// after it move down one).
std::string byte_vocab(const std::string& name, const std::vector<std::string>& more, int skip_byte = -1) {
  nlohmann::json j = nlohmann::json::object();
  int64_t id = 0;
  for (int b = 0; b < 256; ++b)
    if (b != skip_byte) j[written(std::string(1, static_cast<char>(b)))] = id++;
  for (const std::string& token : more) j[written(token)] = id++;
  return write_vocab(name, j.dump());
}

std::string write_merges(const std::string& name, const std::string& text) {
  const std::string path = (fs::temp_directory_path() / ("attnbench_merges_" + name + ".txt")).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// merges.txt for these pairs of tokens (their bytes), ranked in this order.
std::string merges_file(const std::string& name, const std::vector<std::pair<std::string, std::string>>& merges) {
  std::string text = "#version: 0.2\n";
  for (const auto& [left, right] : merges) text += written(left) + " " + written(right) + "\n";
  return write_merges(name, text);
}

// Ranks: "Ġ t" 0, "h e" 1, "Ġt he" 2, "l l" 3, "b c" 4, "a b" 5, "aa a" 6, "a a" 7. "aa a"
// ranks before "a a", the merge that makes "aa": a real merges.txt never does that, but
// encoder.py reads it all the same (one step merges one pair everywhere, then the next step
// looks for the lowest rank again).
const std::vector<std::string> kMore = {" t", "he", " the", "ll", "bc", "ab", "aa", "aaa"};
enum : int64_t { kSpaceT = 256, kHe, kSpaceThe, kLl, kBc, kAb, kAa, kAaa };

Gpt2Tokenizer small_tokenizer() {
  return Gpt2Tokenizer::load(
      byte_vocab("small", kMore),
      merges_file("small",
                  {{" ", "t"}, {"h", "e"}, {" t", "he"}, {"l", "l"}, {"b", "c"}, {"a", "b"}, {"aa", "a"}, {"a", "a"}}));
}

TEST(Gpt2Tokenizer, MergesByRankNotByPosition) {
  const Gpt2Tokenizer t = small_tokenizer();
  // "abc": "b c" (4) before "a b" (5) -> a bc; left to right would give ab c.
  EXPECT_EQ(t.encode("abc"), (std::vector<int64_t>{'a', kBc}));
  EXPECT_EQ(t.encode("ab"), (std::vector<int64_t>{kAb}));
  // " to": "Ġ t" (0) -> Ġt o.
  EXPECT_EQ(t.encode(" to"), (std::vector<int64_t>{kSpaceT, 'o'}));
  // " the": "Ġ t" (0) -> Ġt h e; "h e" (1) -> Ġt he; "Ġt he" (2) -> Ġthe.
  EXPECT_EQ(t.encode(" the"), (std::vector<int64_t>{kSpaceThe}));
  // "hello": "h e" (1) then "l l" (3) -> he ll o.
  EXPECT_EQ(t.encode("hello"), (std::vector<int64_t>{kHe, kLl, 'o'}));
  // The words "the" and " the": "the" has no "Ġ t", so only "h e" -> t he.
  EXPECT_EQ(t.encode("the the"), (std::vector<int64_t>{'t', kHe, kSpaceThe}));
  // Nothing to merge: the bytes' own tokens.
  EXPECT_EQ(t.encode("xyz"), (std::vector<int64_t>{'x', 'y', 'z'}));
  EXPECT_EQ(t.encode(""), (std::vector<int64_t>{}));
}

TEST(Gpt2Tokenizer, OneStepMergesItsPairEverywhereFirst) {
  const Gpt2Tokenizer t = small_tokenizer();
  // "aaaa": the only pair with a merge is "a a" (7); it is merged everywhere, left to
  // right, giving aa aa, which has none. Merging one pair at a time would give aa a a, then
  // "aa a" (6) -> aaa a.
  EXPECT_EQ(t.encode("aaaa"), (std::vector<int64_t>{kAa, kAa}));
  // "aaa": the overlapping pairs take the left one first -> aa a; then "aa a" -> aaa.
  EXPECT_EQ(t.encode("aaa"), (std::vector<int64_t>{kAaa}));
  // "aaaaa": aa aa a, then "aa a" -> aa aaa.
  EXPECT_EQ(t.encode("aaaaa"), (std::vector<int64_t>{kAa, kAaa}));
}

// encoder.py's bpe(), line by line, on strings: the pair of lowest rank, merged everywhere
// left to right, until no pair has a merge.
std::vector<std::string> encoder_py_bpe(const std::string& token,
                                        const std::map<std::pair<std::string, std::string>, int>& ranks) {
  std::vector<std::string> word;
  for (char c : token) word.emplace_back(1, c);
  while (word.size() > 1) {
    const std::pair<std::string, std::string>* bigram = nullptr;
    int best = 0;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      const auto it = ranks.find({word[i], word[i + 1]});
      if (it != ranks.end() && (!bigram || it->second < best)) bigram = &it->first, best = it->second;
    }
    if (!bigram) break;
    std::vector<std::string> merged;
    for (size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && word[i] == bigram->first && word[i + 1] == bigram->second) {
        merged.push_back(word[i] + word[i + 1]);
        i += 2;
      } else {
        merged.push_back(word[i++]);
      }
    }
    word = merged;
  }
  return word;
}

TEST(Gpt2Tokenizer, MatchesEncoderPyOnRandomMerges) {
  std::mt19937 rng(15);
  for (int table = 0; table < 20; ++table) {
    // Merges of random pairs of tokens over a, b, c, in random order, so that a merge may
    // rank before the merges that make its tokens.
    std::vector<std::string> tokens = {"a", "b", "c"}, more;
    std::vector<std::pair<std::string, std::string>> merges;
    for (int k = 0; k < 40; ++k) {
      const std::string l = tokens[rng() % tokens.size()], r = tokens[rng() % tokens.size()];
      if (l.size() + r.size() > 12 || std::find(merges.begin(), merges.end(), std::pair{l, r}) != merges.end())
        continue;
      merges.emplace_back(l, r);
      if (std::find(tokens.begin(), tokens.end(), l + r) == tokens.end()) {
        tokens.push_back(l + r);
        more.push_back(l + r);
      }
    }
    std::shuffle(merges.begin(), merges.end(), rng);
    std::map<std::pair<std::string, std::string>, int> ranks;
    for (size_t rank = 0; rank < merges.size(); ++rank) ranks[merges[rank]] = static_cast<int>(rank);
    const auto t = Gpt2Tokenizer::load(byte_vocab("random", more), merges_file("random", merges));
    const auto id_of = [&](const std::string& s) {  // as byte_vocab numbers them
      if (s.size() == 1) return static_cast<int64_t>(static_cast<uint8_t>(s[0]));
      return static_cast<int64_t>(256 + (std::find(more.begin(), more.end(), s) - more.begin()));
    };
    // Words up to 100 letters: those over 64 bytes skip the word cache; each word is
    // encoded twice, the second time from the cache where it fits.
    std::vector<std::string> words;
    for (int w = 0; w < 100; ++w) {
      std::string word(rng() % 101, 'a');
      for (char& c : word) c = static_cast<char>('a' + rng() % 3);
      words.push_back(word);
    }
    for (int pass = 0; pass < 2; ++pass) {
      for (const std::string& word : words) {
        std::vector<int64_t> expected;
        for (const std::string& s : encoder_py_bpe(word, ranks)) expected.push_back(id_of(s));
        ASSERT_EQ(t.encode(word), expected) << "table " << table << ", word " << word;
      }
      std::reverse(words.begin(), words.end());
    }
  }
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

TEST(Gpt2Tokenizer, DecodesWhatItEncodes) {
  const Gpt2Tokenizer t = small_tokenizer();
  std::string every_byte;
  for (int b = 0; b < 256; ++b) every_byte += static_cast<char>(b);
  const std::vector<std::string> texts = {
      "",
      "Hello, world! It's the 2nd test -- don't   stop.\n\n\tthe end  \n",
      "na\u00efve caf\u00e9 \u2014 \u65e5\u672c\u8a9e \U0001F600 e\u0301 \u0663",
      "\xff\xfe\xc3\x28\xed\xa0\x80\xf4\x90\x80\x80 \xc3",
      every_byte,
  };
  for (const std::string& s : texts) EXPECT_EQ(t.decode(t.encode(s)), s) << s;
  std::mt19937 rng(7);
  for (int k = 0; k < 200; ++k) {
    std::string s(rng() % 40, ' ');
    for (char& c : s) c = static_cast<char>(rng() % 256);
    ASSERT_EQ(t.decode(t.encode(s)), s);
  }
}

TEST(Gpt2Tokenizer, AcceptsCrlf) {
  const auto t = Gpt2Tokenizer::load(byte_vocab("crlf", {"ab"}), write_merges("crlf", "#version: 0.2\r\na b\r\n"));
  EXPECT_EQ(t.encode("ab"), (std::vector<int64_t>{256}));
}

TEST(Gpt2Tokenizer, BadFilesAreOneErrorEach) {
  const std::string vocab = byte_vocab("errors", {"ab", "bc"});
  const auto error_of = [&](const std::string& vocab_path, const std::string& merges_path) -> std::string {
    try {
      Gpt2Tokenizer::load(vocab_path, merges_path);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  const auto merges_error = [&](const std::string& name, const std::string& text) {
    return error_of(vocab, write_merges(name, text));
  };
  const auto at = [](const std::string& name, int line) {
    return (fs::temp_directory_path() / ("attnbench_merges_" + name + ".txt")).string() + ":" + std::to_string(line) +
           ": ";
  };
  const std::string good = write_merges("good", "#version: 0.2\na b\n");
  EXPECT_EQ(error_of(vocab, good), "");
  EXPECT_NE(error_of("/nonexistent/vocab.json", good).find("/nonexistent/vocab.json: cannot open"), std::string::npos);
  EXPECT_NE(error_of(vocab, "/nonexistent/merges.txt").find("/nonexistent/merges.txt: cannot open the merges"),
            std::string::npos);
  // Every byte needs its token: here 'q' (0x71) has none.
  const std::string no_q = byte_vocab("no_q", {"ab"}, 'q');
  EXPECT_NE(error_of(no_q, good).find(no_q + ": no token for byte 0x71"), std::string::npos);
  EXPECT_NE(merges_error("empty", "").find(at("empty", 1) + "expected a \"#version\" line first"), std::string::npos);
  EXPECT_NE(merges_error("header", "a b\n").find(at("header", 1) + "expected a \"#version\" line first"),
            std::string::npos);
  for (const char* bad : {"ab", "a  b", "a b c", " a", "a ", ""})
    EXPECT_NE(merges_error("shape", std::string("#version: 0.2\nb c\n") + bad + "\n")
                  .find(at("shape", 3) + "expected two tokens separated by one space"),
              std::string::npos)
        << "'" << bad << "'";
  EXPECT_NE(merges_error("alphabet", "#version: 0.2\na \xe2\x80\x94\n")
                .find(at("alphabet", 2) + "token '\xe2\x80\x94' has U+2014, outside GPT-2's byte alphabet"),
            std::string::npos);
  EXPECT_NE(merges_error("part", "#version: 0.2\nxy z\n").find(at("part", 2) + "token 'xy' is not in the vocabulary"),
            std::string::npos);
  EXPECT_NE(merges_error("result", "#version: 0.2\na b\nx y\n")
                .find(at("result", 3) + "the merge's result 'xy' is not in the vocabulary"),
            std::string::npos);
  EXPECT_NE(
      merges_error("repeat", "#version: 0.2\na b\nb c\na b\n").find(at("repeat", 4) + "repeats the merge on line 2"),
      std::string::npos);
}

}  // namespace
}  // namespace attnbench
