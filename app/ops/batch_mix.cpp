// vLLM's batch grammar (batch_mix.hpp), read left to right with one character of lookahead.
#include "app/ops/batch_mix.hpp"

#include <cctype>
#include <stdexcept>

namespace attnbench {
namespace {

constexpr int64_t kMaxSequences = 1 << 20;  // a batch, not a data set
constexpr int64_t kMaxLength = int64_t{1} << 30;

class MixReader {
 public:
  explicit MixReader(const std::string& text) : text_(text) {}

  std::vector<BatchSequence> read() {
    std::vector<BatchSequence> batch;
    if (text_.empty()) fail("an empty batch");
    for (;;) {
      const int64_t count = peek_digit() ? number("count") : 1;
      if (count < 1) fail("a count of at least 1");
      const BatchSequence seq = sequence();
      if (static_cast<int64_t>(batch.size()) + count > kMaxSequences) fail("at most 2^20 sequences in all");
      batch.insert(batch.end(), static_cast<size_t>(count), seq);
      if (at_ == text_.size()) return batch;
      if (text_[at_] != '_') fail("'_' between segments, or the end");
      ++at_;
    }
  }

 private:
  BatchSequence sequence() {
    BatchSequence s;
    if (take("spec")) {
      s.query_len = length("spec");
      expect('s', "s<keys> after spec<tokens>");
      s.context_len = length("s");
    } else if (take("q")) {
      s.query_len = s.context_len = length("q");
      if (take("s")) s.context_len = length("s");
    } else if (take("s")) {
      s.context_len = length("s");
    } else {
      fail("q, s or spec");
    }
    if (s.query_len > s.context_len)
      fail("at most as many new tokens as keys (the new tokens are among them), not " +
           std::to_string(s.query_len) + " over " + std::to_string(s.context_len));
    return s;
  }
  // A length: a number >= 1, times 1024 with a k after it.
  int64_t length(const char* after) {
    int64_t n = number(std::string("a number after ") + after);
    if (take("k")) n *= 1024;
    if (n < 1 || n > kMaxLength) fail("a length from 1 to 2^30");
    return n;
  }
  int64_t number(const std::string& what) {
    if (!peek_digit()) fail(what);
    int64_t n = 0;
    while (peek_digit()) {
      n = n * 10 + (text_[at_++] - '0');
      if (n > kMaxLength) fail("a number below 2^30");
    }
    return n;
  }
  bool peek_digit() const { return at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_])); }
  bool take(const char* word) {
    const std::string w(word);
    if (text_.compare(at_, w.size(), w) != 0) return false;
    at_ += w.size();
    return true;
  }
  void expect(char c, const char* what) {
    if (at_ >= text_.size() || text_[at_] != c) fail(what);
    ++at_;
  }
  [[noreturn]] void fail(const std::string& expected) const {
    throw std::invalid_argument("batch \"" + text_ + "\": expected " + expected + " at character " +
                                std::to_string(at_ + 1) + " (segments like 2q2k, 32q1s1k, s4k or spec4s1k, joined by _)");
  }

  const std::string& text_;
  size_t at_ = 0;
};

}  // namespace

std::vector<BatchSequence> parse_batch_mix(const std::string& text) { return MixReader(text).read(); }

}  // namespace attnbench
