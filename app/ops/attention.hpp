// What the attention op shares with the ops built on it (the pipeline's prefill):
// which keys a query sees, so FLOPs count only unmasked pairs.
#pragma once
#include <cstdint>
#include <string>

#include "app/op.hpp"

namespace attnbench {

// The keys every op with query heads over kv heads shares, defined once: the op's
// table lists them in its own order.
KeySpec batch_key();
KeySpec heads_key();
KeySpec kv_heads_key();  // defaults to heads (finish_heads)
KeySpec head_dim_key(std::string meaning = "elements per head: a multiple of 8, at most 256");
KeySpec alibi_key();

// kv_heads defaults to heads and must divide it; head_dim is a multiple of 8, at most
// 256. Every op with heads over kv heads finishes its [shape] with this.
void finish_heads(ShapeCheck& check);

// Query i sits at position i + seq_k - seq_q (bottom-right alignment: the last query
// sees the last key). Causal: it sees keys up to its position; a window of w keeps the
// w keys ending at its position (and, without causal, the w - 1 after it too).
struct AttentionMask {
  int64_t seq_q = 1, seq_k = 1;
  bool causal = false;
  int64_t window = 0;  // 0 = none

  int64_t visible_keys(int64_t i) const;
  int64_t pairs() const;  // the (query, key) pairs of one head that are not masked
};

}  // namespace attnbench
