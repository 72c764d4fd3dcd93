#include "reference/attention.hpp"

#include <cmath>
#include <map>

namespace attnbench::ref {

using namespace detail;

namespace {

void validate(const AttentionShape& s) {
  require(s.batch > 0 && s.heads > 0 && s.kv_heads > 0 && s.seq_q > 0 && s.seq_k > 0 && s.head_dim > 0,
          "attention: batch, heads, kv_heads, seq_q, seq_k and head_dim must be positive");
  require(s.heads % s.kv_heads == 0, "attention: heads (" + std::to_string(s.heads) +
                                         ") must be a multiple of kv_heads (" + std::to_string(s.kv_heads) + ")");
  require(s.window >= 0, "attention: window must be >= 0");
  require(s.score.alibi_slopes.empty() || static_cast<int64_t>(s.score.alibi_slopes.size()) == s.heads,
          "attention: " + std::to_string(s.score.alibi_slopes.size()) + " ALiBi slopes for " + std::to_string(s.heads) +
              " heads");
  require(s.score.softcap >= 0, "attention: softcap must be >= 0");
  require(!s.rope.on() || s.rope.rotary_dim % 2 == 0, "attention: rotary_dim must be even");
  require(s.rope.rotary_dim >= 0 && s.rope.rotary_dim <= s.head_dim, "attention: rotary_dim must be in [0, head_dim]");
  require(s.sparse.empty() || static_cast<int64_t>(s.sparse.size()) == s.heads,
          "attention: one block mask per query head");
  for (const BlockMask& m : s.sparse)
    require(m.block > 0 && m.key_blocks == (s.seq_k + m.block - 1) / m.block &&
                static_cast<int64_t>(m.live.size()) == (s.seq_q + m.block - 1) / m.block * m.key_blocks,
            "attention: a block mask's size does not match seq_q, seq_k and its block");
}

}  // namespace

void detail::plan_attention(const AttentionShape& s, const float* q, const float* k, const float* v, const Rows& rows,
                            const Rows& out, std::vector<KvTask>& tasks) {
  const int64_t d = s.head_dim, group = s.heads / s.kv_heads;
  Score score = s.score;  // each task's: the scale resolved, the slopes in each head's mask instead
  if (score.scale == 0) score.scale = 1 / std::sqrt(static_cast<double>(d));
  score.alibi_slopes = {};
  std::map<int64_t, size_t> open;  // b * kv_heads + kv head -> that group's task still filling up
  for (size_t n = 0; n < rows.size(); ++n) {
    const int64_t h = rows[n] % s.heads, i = rows[n] / s.heads % s.seq_q, b = rows[n] / s.heads / s.seq_q;
    const int64_t key = b * s.kv_heads + h / group;
    auto it = open.find(key);
    if (it == open.end() || tasks[it->second].rows == kRowsPerTask) {
      const int64_t kv_head = (b * s.seq_k * s.kv_heads + h / group) * d;  // k, v: [batch, seq_k, kv_heads, d]
      tasks.push_back({view(k + kv_head, s.seq_k, d, s.kv_heads * d), view(v + kv_head, s.seq_k, d, s.kv_heads * d),
                       score, s.top_left ? 0 : s.seq_k - s.seq_q, s.rope, s.rotate_keys, {}, 0,
                       s.faithful});
      it = open.insert_or_assign(key, tasks.size() - 1).first;
    }
    KvTask& task = tasks[it->second];
    auto head = std::find_if(task.heads.begin(), task.heads.end(), [&](const HeadRows& r) { return r.head == h; });
    if (head == task.heads.end()) {
      const int64_t q_head = (b * s.seq_q * s.heads + h) * d;  // q: [batch, seq_q, heads, d]
      task.heads.push_back({h, view(q + q_head, s.seq_q, d, s.heads * d),
                            Mask{s.causal, s.window, s.score.alibi_slopes.empty() ? 0 : s.score.alibi_slopes[h],
                                 s.sparse.empty() ? nullptr : &s.sparse[h], s.top_left ? 0 : s.seq_k - s.seq_q}});
      head = task.heads.end() - 1;
    }
    head->query.push_back(i);
    head->out.push_back(out[n]);
    ++task.rows;
  }
}

std::vector<double> alibi_slopes(int64_t heads) {
  require(heads > 0, "alibi_slopes: heads must be positive");
  const auto power_of_two = [](int64_t n) {
    std::vector<double> out;
    for (int64_t i = 1; i <= n; ++i) out.push_back(std::exp2(-8.0 * static_cast<double>(i) / static_cast<double>(n)));
    return out;
  };
  int64_t n = 1;
  while (n * 2 <= heads) n *= 2;
  std::vector<double> slopes = power_of_two(n);
  const std::vector<double> finer = power_of_two(2 * n);
  for (int64_t i = 0; static_cast<int64_t>(slopes.size()) < heads; i += 2) slopes.push_back(finer[i]);
  return slopes;
}

// O = softmax(Q Kᵀ·scale + bias + mask) V: every requested row planned onto the dense attention core.
Matrix attention(const AttentionShape& s, const float* q, const float* k, const float* v, const Rows& rows) {
  validate(s);
  check_rows("attention", rows, s.batch * s.seq_q * s.heads);
  Rows out(rows.size());
  for (size_t n = 0; n < out.size(); ++n) out[n] = n;
  std::vector<KvTask> tasks;
  plan_attention(s, q, k, v, rows, out, tasks);
  return run_attention(tasks, rows.size(), s.head_dim);
}

}  // namespace attnbench::ref
