// GPT-2's byte-level BPE vocabulary, for printing a model's prompt and generated tokens:
// vocab.json maps each token (its bytes written as printable characters by GPT-2's
// bytes_to_unicode table) to its id; decoding an id sequence joins the tokens and maps each
// character back to its byte. Encoding text needs the merges too and is not here.
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

// GPT-2's bytes_to_unicode: the code point that stands for byte b in vocab.json (printable
// bytes stand for themselves; the others are moved to 256 and up).
uint32_t gpt2_char_of_byte(uint8_t b);

}  // namespace attnbench
