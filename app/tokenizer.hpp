// GPT-2's byte-level BPE vocabulary, for printing a model's prompt and generated tokens:
// vocab.json maps each token (its bytes written as printable characters by GPT-2's
// bytes_to_unicode table) to its id; decoding an id sequence joins the tokens and maps each
// character back to its byte. Encoding text needs the merges too and is not here yet; its
// first step, GPT-2's pre-tokenizer, is.
#pragma once
#include <cstdint>
#include <string>
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

 private:
  std::vector<std::string> bytes_;  // id -> the token's bytes
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
