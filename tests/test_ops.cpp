// The work the ops count: attention's unmasked (query, key) pairs, and each op's
// tensors, so TFLOP/s and GB/s mean what the README says.
#include <gtest/gtest.h>

#include "app/ops.hpp"

using namespace attnbench;

namespace {
Shape attn(int64_t sq, int64_t sk, bool causal, int64_t window) {
  Shape s;
  s.batch = 1;
  s.heads = 1;
  s.kv_heads = 1;
  s.head_dim = 8;
  s.seq_q = sq;
  s.seq_k = sk;
  s.causal = causal;
  s.window = window;
  return s;
}

// The definition, pair by pair.
int64_t brute_pairs(const Shape& s) {
  int64_t n = 0;
  for (int64_t i = 0; i < s.seq_q; ++i) {
    const int64_t p = i + s.seq_k - s.seq_q;
    for (int64_t j = 0; j < s.seq_k; ++j) {
      bool ok = true;
      if (s.causal && j > p) ok = false;
      if (s.window > 0 && (p - j >= s.window || (!s.causal && j - p >= s.window))) ok = false;
      n += ok;
    }
  }
  return n;
}
}  // namespace

TEST(AttentionPairs, CausalSquareIsATriangle) {
  EXPECT_EQ(attention_pairs(attn(4, 4, false, 0)), 16);
  EXPECT_EQ(attention_pairs(attn(4, 4, true, 0)), 10);  // 1 + 2 + 3 + 4
}

TEST(AttentionPairs, BottomRightAlignment) {
  // seq_q 2 over seq_k 5: query 0 sits at position 3 and sees 4 keys, query 1 all 5.
  EXPECT_EQ(visible_keys(attn(2, 5, true, 0), 0), 4);
  EXPECT_EQ(visible_keys(attn(2, 5, true, 0), 1), 5);
  // seq_q 5 over seq_k 2: the first three queries see nothing.
  const Shape s = attn(5, 2, true, 0);
  EXPECT_EQ(visible_keys(s, 0), 0);
  EXPECT_EQ(visible_keys(s, 2), 0);
  EXPECT_EQ(visible_keys(s, 3), 1);
  EXPECT_EQ(attention_pairs(s), 3);
}

TEST(AttentionPairs, WindowOnOneOrBothSides) {
  EXPECT_EQ(visible_keys(attn(10, 10, true, 3), 9), 3);   // keys 7, 8, 9
  EXPECT_EQ(visible_keys(attn(10, 10, false, 3), 5), 5);  // keys 3..7
  EXPECT_EQ(visible_keys(attn(10, 10, false, 3), 0), 3);  // keys 0..2
}

TEST(AttentionPairs, MatchesTheDefinitionEverywhere) {
  for (int64_t sq : {1, 3, 17})
    for (int64_t sk : {1, 4, 17, 30})
      for (bool causal : {false, true})
        for (int64_t w : {0, 1, 2, 5, 40}) {
          const Shape s = attn(sq, sk, causal, w);
          ASSERT_EQ(attention_pairs(s), brute_pairs(s)) << sq << " " << sk << " " << causal << " " << w;
        }
}

TEST(Work, AttentionFlopsAndBytes) {
  CasePoint p;
  p.op = Op::attention;
  p.dtype = DType::bf16;
  p.shape = attn(128, 256, true, 0);
  p.shape.batch = 2;
  p.shape.heads = 8;
  p.shape.kv_heads = 2;
  p.shape.head_dim = 64;
  const auto problem = make_problem(p);
  const Work w = problem->work();
  EXPECT_DOUBLE_EQ(w.flops, 4.0 * 2 * 8 * 64 * static_cast<double>(attention_pairs(p.shape)));
  // q and o: 2 x 128 x 8 x 64; k and v: 2 x 256 x 2 x 64; two bytes each.
  EXPECT_DOUBLE_EQ(w.bytes, 2.0 * (2 * 2 * 128 * 8 * 64 + 2 * 2 * 256 * 2 * 64));
  EXPECT_EQ(problem->output_rows(), 2 * 128 * 8);
  const Coord c = problem->coord((1 * 128 + 5) * 8 + 3, 7);
  EXPECT_EQ(c.b, 1);
  EXPECT_EQ(c.h, 3);
  EXPECT_EQ(c.i, 5);
  EXPECT_EQ(c.d, 7);
}

TEST(Work, MustCheckRowsAreTheBlindQueries) {
  CasePoint p;
  p.op = Op::attention;
  p.dtype = DType::fp32;
  p.shape = attn(6, 2, true, 0);  // queries 0..3 see no key
  p.shape.batch = 2;
  p.shape.heads = 3;
  const auto rows = make_problem(p)->must_check_rows();
  ASSERT_FALSE(rows.empty());
  for (int64_t r : rows) EXPECT_LT(r / 3 % 6, 4) << r;  // i = row / heads % seq_q
}

TEST(Work, GemmAndSoftmax) {
  CasePoint g;
  g.op = Op::gemm;
  g.dtype = DType::fp16;
  g.shape.batch = 3;
  g.shape.m = 10;
  g.shape.n = 20;
  g.shape.k = 30;
  const Work w = make_problem(g)->work();
  EXPECT_DOUBLE_EQ(w.flops, 2.0 * 3 * 10 * 20 * 30);
  EXPECT_DOUBLE_EQ(w.bytes, 2.0 * 3 * (10 * 30 + 30 * 20 + 10 * 20));
  CasePoint s;
  s.op = Op::softmax;
  s.dtype = DType::fp32;
  s.shape.rows = 7;
  s.shape.cols = 9;
  EXPECT_DOUBLE_EQ(make_problem(s)->work().bytes, 2.0 * 4 * 7 * 9);
}
