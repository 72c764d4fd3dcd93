// GPT-2's byte-level BPE tokenizer, for a model's prompt and generated tokens.
//
// vocab.json maps each token (its bytes written as printable characters by GPT-2's
// bytes_to_unicode table) to its id; decoding an id sequence joins the tokens and maps each
// character back to its byte. Encoding also needs merges.txt, the ranked list of pairs that
// BPE joins, and GPT-2's pre-tokenizer, which cuts text into words that BPE never joins
// across: Gpt2Tokenizer holds both files and encodes as GPT-2's encoder.py (and Hugging
// Face's GPT2Tokenizer) does, except for the Unicode classes noted at gpt2_pretokenize.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace attnbench {

class Gpt2Vocab {
 public:
  // Reads vocab.json ({"token": id, ...}); InputError naming the file when it cannot be
  // read, is not that shape, or uses a character outside GPT-2's byte alphabet.
  static Gpt2Vocab load(const std::string& path);
  int64_t size() const { return static_cast<int64_t>(bytes_.size()); }
  // The bytes of the tokens, concatenated (UTF-8 once whole words are joined); an id
  // outside the vocabulary is an InputError.
  std::string decode(const std::vector<int64_t>& ids) const;
  // The id of the token with these bytes, or -1 when there is none.
  int64_t id_of(const std::string& bytes) const;

 private:
  std::vector<std::string> bytes_;                // id -> the token's bytes
  std::unordered_map<std::string, int64_t> ids_;  // the token's bytes -> id
};

// A vocabulary and its merges: text to ids and back.
class Gpt2Tokenizer {
 public:
  // Reads vocab.json (as Gpt2Vocab::load) and merges.txt: a first line starting "#version",
  // then one merge a line, two tokens separated by one space, ranked by line order (CRLF
  // line ends are accepted). InputError naming the file, and the line for merges.txt, when
  // a file cannot be read, a line is not that shape, a merge repeats an earlier one, or a
  // merge's tokens or its result are not in the vocabulary; also when the vocabulary lacks
  // a token for one of the 256 bytes, since text that no merge covers is encoded byte by byte.
  static Gpt2Tokenizer load(const std::string& vocab_path, const std::string& merges_path);
  const Gpt2Vocab& vocab() const { return vocab_; }
  // gpt2_pretokenize's words, each cut into bytes and joined by BPE: the adjacent pair with
  // the lowest rank is merged everywhere in the word (left to right, not overlapping), again
  // and again until no adjacent pair has a merge. Any bytes are accepted, and
  // decode(encode(s)) == s for every s. Special tokens are not looked for: "<|endoftext|>"
  // in the text is encoded as its characters, as encoder.py does (Hugging Face's tokenizer
  // gives its id instead). Safe to call from several threads: the word cache has a lock.
  std::vector<int64_t> encode(const std::string& text) const;
  std::string decode(const std::vector<int64_t>& ids) const { return vocab_.decode(ids); }

 private:
  struct Merges;  // the ranked merges and a cache of encoded words (app/tokenizer.cpp)
  Gpt2Tokenizer() = default;
  Gpt2Vocab vocab_;
  std::shared_ptr<Merges> merges_;
};

// GPT-2's pre-tokenizer: text cut into the words that BPE encodes one at a time, as the
// pattern  's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// cuts it (a contraction; a run of letters, of numbers, or of other characters, each with
// at most one leading ASCII space; whitespace, leaving its last character to the next word
// when a word follows). The words, joined, are the text.
//
// Exact: the pattern's logic; ASCII; \s, which is Unicode's White_Space property
// (U+0009-000D, 0020, 0085, 00A0, 1680, 2000-200A, 2028, 2029, 202F, 205F, 3000), as in
// Python's regex module; and letters, numbers and the rest in these blocks: Latin-1
// Supplement (U+0080-00FF), Combining Diacritical Marks (0300-036F), General Punctuation
// (2000-206F), Currency Symbols and Combining Marks for Symbols (20A0-20FF), Arrows through
// Miscellaneous Symbols and Arrows (2190-2BFF: math, box drawing, shapes, dingbats, with the
// circled numbers counted as numbers), Supplemental Punctuation (2E00-2E7F), CJK Symbols and
// Punctuation (3000-303F), Variation Selectors through Small Form Variants (FE00-FE6F), the
// byte order mark (FEFF), the fullwidth ASCII forms (FF00-FF65), Specials (FFF0-FFFF),
// Mahjong Tiles through Symbols for Legacy Computing (1F000-1FBFF: emoji among them), and
// Tags and Variation Selectors Supplement (E0000-E01EF). Checked code point by code point
// against Python's regex module (2026.5.9); a later Unicode version could still put a
// letter or a digit at one of these blocks' unassigned code points.
// Approximated: every other non-ASCII code point counts as a letter (\p{L}). That is right
// for the letters of every script, but wrong for their digits (Arabic-Indic, Devanagari,
// ... digits are \p{N}), their combining marks (e.g. Devanagari vowel signs, which GPT-2
// cuts off as "other"), their punctuation (e.g. Arabic comma, Devanagari danda) and private
// use characters: such text is cut into different words than GPT-2 cuts it, so its ids can
// differ from GPT-2's (decode(encode(s)) == s holds regardless).
// Not UTF-8 (GPT-2 only ever sees decoded text, so this is attnbench's choice): each byte of
// a malformed, truncated, overlong or surrogate sequence is one "other" character.
std::vector<std::string> gpt2_pretokenize(const std::string& text);

// GPT-2's bytes_to_unicode: the code point that stands for byte b in vocab.json (printable
// bytes stand for themselves; the others are moved to 256 and up).
uint32_t gpt2_char_of_byte(uint8_t b);

}  // namespace attnbench
