// The ragged op's CPU side (issue 48): the [shape]'s batch as pairs or vLLM's grammar and the
// messages of a bad one, the paged cache's flash layout written and read back through the
// block table, the rows verification always checks, and the work it counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>

#include "app/case.hpp"
#include "app/numeric.hpp"
#include "app/op.hpp"
#include "app/ops/paged.hpp"
#include "app/ops/ragged.hpp"
#include "app/problem.hpp"
#include "app/verify.hpp"
#include "kernels/ragged/ragged.hpp"
#include "kernels/ragged/rungs.hpp"
#include "tests/case_text.hpp"

using namespace attnbench;

namespace {

namespace fs = std::filesystem;

const std::string kHead = "op = \"ragged\"\ndtype = \"bf16\"\n[shape]\nheads = 8\nkv_heads = 2\nhead_dim = 64\n";

using case_text::error_of;
using case_text::expect_has;
using case_text::parse;

const IntPairs kVllm = {{1, 1328}, {5, 18}, {129, 463}};  // vLLM's test_triton_unified_attention batch

}  // namespace

// ---------------------------------------------------------------------------
// The pairs key type the batch is written in

TEST(RaggedKeys, SequencesAreAListOfPairs) {
  const Case c = parse(kHead + "sequences = [[1, 1328], [5, 18], [129, 463]]\n");
  ASSERT_EQ(c.points.size(), 1u);
  EXPECT_EQ(ragged_sequences(c.points[0].shape), kVllm);
}

TEST(RaggedKeys, APairIsTwoIntegersOfAtLeastOne) {
  expect_has(error_of(kHead + "sequences = [[1, 2], [3]]\n"),
             {"cases/t.toml:7:", "shape.sequences[1] must be a pair [a, b] of integers, got [3]"});
  expect_has(error_of(kHead + "sequences = [[1, 2], 3]\n"), {"shape.sequences[1] must be a pair [a, b]"});
  expect_has(error_of(kHead + "sequences = [[0, 2]]\n"), {"shape.sequences[0][0] must be at least 1, got 0"});
  expect_has(error_of(kHead + "sequences = [[1, \"x\"]]\n"), {"shape.sequences[0][1] must be an integer"});
  expect_has(error_of(kHead + "sequences = 5\n"), {"shape.sequences must be a list of [a, b] pairs of integers"});
}

// A list of pairs is one batch; only a list of such lists sweeps, in [sweep] and on --set alike.
TEST(RaggedKeys, OnlyAListOfBatchesSweeps) {
  EXPECT_EQ(parse(kHead + "sequences = [[1, 8]]\n", {"shape.sequences=[[1, 4], [2, 9]]"}).points.size(), 1u);
  const Case set = parse(kHead + "sequences = [[1, 8]]\n", {"shape.sequences=[[[1, 4]], [[2, 9], [1, 1]]]"});
  ASSERT_EQ(set.points.size(), 2u);
  EXPECT_EQ(ragged_sequences(set.points[1].shape), (IntPairs{{2, 9}, {1, 1}}));
  const Case swept = parse(kHead + "[sweep]\nsequences = [[[1, 4]], [[2, 9], [1, 1]], [[3, 3]]]\n");
  ASSERT_EQ(swept.points.size(), 3u);
  EXPECT_EQ(ragged_sequences(swept.points[2].shape), (IntPairs{{3, 3}}));
  EXPECT_EQ(swept.points[1].label, "sequences=[[2,9],[1,1]]");
}

// ---------------------------------------------------------------------------
// The op's keys and their messages

TEST(RaggedKeys, MixBecomesTheSequences) {
  const Case c = parse(kHead + "mix = \"2q2k_3s1k_spec4s100\"\n");
  IntPairs want = {{2048, 2048}, {2048, 2048}, {1, 1024}, {1, 1024}, {1, 1024}, {4, 100}};
  EXPECT_EQ(ragged_sequences(c.points[0].shape), want);
  // A mix sweeps as any word does.
  const Case swept = parse(kHead + "[sweep]\nmix = [\"s8\", \"q3s9_s2\"]\n");
  ASSERT_EQ(swept.points.size(), 2u);
  EXPECT_EQ(ragged_sequences(swept.points[1].shape), (IntPairs{{3, 9}, {1, 2}}));
}

TEST(RaggedKeys, ExactlyOneOfMixAndSequences) {
  expect_has(error_of(kHead + "mix = \"s8\"\nsequences = [[1, 8]]\n"),
             {"cases/t.toml:8:", "shape.mix and shape.sequences both name the batch: give one of them"});
  expect_has(error_of(kHead), {"the batch is missing: give shape.mix", "or shape.sequences"});
}

TEST(RaggedKeys, BadBatchesSayWhy) {
  expect_has(error_of(kHead + "sequences = [[1, 8], [9, 8]]\n"),
             {"cases/t.toml:7:", "shape.sequences[1] = [9, 8]: query_len 9 exceeds context_len 8"});
  expect_has(error_of(kHead + "mix = \"2q2k_x\"\n"),
             {"cases/t.toml:7:", "shape.mix: batch \"2q2k_x\": expected", "at character 6"});
  expect_has(error_of(kHead + "mix = \"q9s8\"\n"), {"shape.mix: ", "at most as many new tokens as keys"});
  expect_has(error_of(kHead + "sequences = []\n"), {"shape.sequences is empty"});
}

TEST(RaggedKeys, BlockSizesAndPool) {
  for (int64_t bs : {1, 16, 24, 32, 64, 100}) {
    const Case c = parse(kHead + "sequences = [[1, 1328], [5, 18], [129, 463]]\nblock_size = " + std::to_string(bs) + "\n");
    const int64_t needed = ceil_div(1328, bs) + ceil_div(18, bs) + ceil_div(463, bs);
    EXPECT_EQ(c.points[0].shape.num("num_blocks"), needed + needed / 4 + 1) << bs;
  }
  expect_has(error_of(kHead + "sequences = [[1, 8]]\nblock_size = 0\n"), {"shape.block_size must be at least 1, got 0"});
  expect_has(error_of(kHead + "sequences = [[1, 8]]\nblock_size = -16\n"), {"shape.block_size must be at least 1"});
  expect_has(error_of(kHead + "sequences = [[1, 8], [2, 20]]\nblock_size = 4\nnum_blocks = 7\n"),
             {"shape.num_blocks (7) is too small: the sequences need 7 blocks of 4 tokens, plus one spare"});
  EXPECT_EQ(parse(kHead + "sequences = [[1, 8], [2, 20]]\nblock_size = 4\nnum_blocks = 8\n").points.size(), 1u);
}

// split_kv plans its split length from the batch's lengths: a batch whose long context
// dominates its work splits (and needs partials), one of even short contexts does not.
TEST(RaggedSplitKv, SplitsWhereOneContextDominates) {
  const auto workspace = [](const std::string& seqs) {
    const Case c = parse(kHead + "sequences = " + seqs + "\n");
    const auto problem = make_problem(c.points[0]);
    for (const VariantChoice& v : problem->variants(assumed_caps()))
      if (v.name == "split_kv") EXPECT_EQ(v.skip, "") << seqs;
    return problem->workspace("split_kv");
  };
  // 8 heads over 2, head_dim 64: a decode over 8192 keys beside two short ones is 128 key tiles
  // of 130 in all, split into 16-tile chunks (the least): 8 splits, fp32 partials for 3 rows x 8 heads.
  EXPECT_EQ(workspace("[[1, 8192], [1, 64], [2, 64]]"), static_cast<std::size_t>(4 * 8 * 8 * 64 * 4 + 4 * 8 * 8 * 8));
  EXPECT_EQ(workspace("[[1, 512], [1, 512], [2, 512]]"), 0u);  // 8 tiles each: one split
}

// ws (the Hopper rung) plans over one block an SM and splits on its 128-key tiles' edges: the
// chunk of 64-key tiles is even. A decode over 70400 keys (1100 tiles) beside two short ones,
// 8 heads over 2: 2 x 1102 tiles over 132 blocks is 17 a split, rounded up to 18: 62 splits
// (split_kv, two blocks an SM: 16 tiles, 69 splits).
TEST(RaggedSplitKv, WsSplitsOnItsOwnTileEdges) {
  const Case c = parse(kHead + "sequences = [[1, 70400], [1, 64], [2, 64]]\n");
  const auto problem = make_problem(c.points[0]);
  for (const VariantChoice& v : problem->variants(assumed_caps()))
    if (v.name == "ws" || v.name == "split_kv") EXPECT_EQ(v.skip, "") << v.name;
  EXPECT_EQ(problem->workspace("ws"), static_cast<std::size_t>(4 * 8 * 62 * 64 * 4 + 4 * 8 * 62 * 8));
  EXPECT_EQ(problem->workspace("split_kv"), static_cast<std::size_t>(4 * 8 * 69 * 64 * 4 + 4 * 8 * 69 * 8));
}

// ws plans a mix of full and small row tiles (at most 64 rows: decodes, short verifications)
// with a chunk each: the tiles weighed by their cost (a small row tile's key tile 7/5 of a full
// one's) and divided over 132 blocks, the small ones split in chunks of that share over 7/5. The
// serving mix (perf/ragged-bf16-serving-mix: 8 heads over 1, d128, 16 tokens a row tile):
// 28800 full key tiles (2 chunked prefills, none over 128) and 8192 small ones (the decodes and
// verifications, up to 512), a share of 1526 fifths: full tiles in chunks of 306 (none splits),
// small ones in chunks of 218, so a 32k decode takes 3 splits (218, 218, 76). One chunk for all
// (before) was 282, two splits of the 32k decodes, each longer than a block's share of the
// time. A batch of one kind plans as before (RaggedSplitKv.WsSplitsOnItsOwnTileEdges).
TEST(RaggedSplitKv, WsGivesTheSmallRowTilesOfAMixTheirOwnChunk) {
  const std::string head = "op = \"ragged\"\ndtype = \"bf16\"\n[shape]\nheads = 8\nkv_heads = 1\nhead_dim = 128\n";
  const auto problem = make_problem(parse(head + "mix = \"2q2ks8k_32s1k_16s4k_8s16k_8s32k_8spec4s4k\"\n").points[0]);
  const std::size_t rows = (2 * 2048 + 64 + 8 * 4) * 8;  // (query, head) rows
  EXPECT_EQ(problem->workspace("ws"), rows * 3 * 128 * 4 + rows * 3 * 8);
  // Its prefill part alone (full row tiles only): one split each, no partials.
  const auto prefill = make_problem(parse(head + "mix = \"2q2ks8k\"\n").points[0]);
  EXPECT_EQ(prefill->workspace("ws"), 0u);
}

// ws_tma (rung 6) copies whole pages of a 16-bit cache by TMA: blocks of 8 to 64 keys (a page a
// box of whole swizzle atoms inside a 64-key tile); what ws refuses it refuses with ws' reason.
// The skip reason of variant `name` at the case's first point ("" = it runs; "no row" = no such variant).
std::string skip_reason(const Case& k, const std::string& name) {
  for (const VariantChoice& v : make_problem(k.points[0])->variants(assumed_caps()))
    if (v.name == name) return v.skip;
  return "no row";
}

TEST(RaggedWsTma, TakesPagesOf8To64KeysOfA16BitCache) {
  const auto skip_of = [](const std::string& extra, std::vector<std::string> sets = {}) {
    return skip_reason(parse(kHead + "sequences = [[1, 300], [5, 18], [129, 463]]\n" + extra, sets), "ws_tma");
  };
  for (int bs : {8, 16, 32, 64}) EXPECT_EQ(skip_of("block_size = " + std::to_string(bs) + "\n"), "") << bs;
  const std::string pages = "block_size 8, 16, 32 or 64 (a page is a TMA box of whole swizzle atoms inside a 64-key tile)";
  for (int bs : {1, 4, 24, 128}) EXPECT_EQ(skip_of("block_size = " + std::to_string(bs) + "\n"), pages) << bs;
  EXPECT_EQ(skip_of("block_size = 16\nkv_dtype = \"fp8_e4m3\"\n"),
            "a cache in q's dtype only (an fp8 cache: ws widens it in its producer)");
  EXPECT_EQ(skip_of("block_size = 16\n", {"dtype=fp32"}), "fp16/bf16 only (wgmma on 16-bit inputs)");
  EXPECT_EQ(skip_of("block_size = 16\nsinks = true\nsoftcap = 50\nalibi = true\nwindow = 3\nrope = \"neox\"\n"), "");
}

TEST(RaggedKeys, HeadsAndOptions) {
  for (int64_t d : {64, 80, 96, 128, 256})
    EXPECT_EQ(parse(kHead + "sequences = [[1, 8]]\n", {"shape.head_dim=" + std::to_string(d)}).points.size(), 1u) << d;
  expect_has(error_of(kHead + "sequences = [[1, 8]]\n", {"shape.head_dim=100"}), {"multiple of 8 and at most 256"});
  expect_has(error_of(kHead + "sequences = [[1, 8]]\n", {"shape.kv_heads=3"}), {"must be a multiple of kv_heads (3)"});
  const Case c = parse(kHead + "sequences = [[1, 8]]\nkv_dtype = \"fp8_e4m3\"\nsinks = true\nsoftcap = 50\nalibi = true\n"
                               "window = 3\nrope = \"neox\"\n");
  EXPECT_EQ(c.points[0].shape.word("kv_dtype"), "fp8_e4m3");
  EXPECT_EQ(parse(kHead + "sequences = [[1, 8]]\n").points[0].shape.word("kv_dtype"), "bf16");  // the dtype's
  // Every rung but ws_tma (a 16-bit cache's pages as they are) takes every option over an fp8
  // cache (skip reasons are ""); varlen, the tensor-core rung, says why it refuses what it does
  // not take.
  for (const VariantChoice& v : make_problem(c.points[0])->variants(assumed_caps()))
    EXPECT_EQ(v.skip, v.name == "ws_tma" ? "a cache in q's dtype only (an fp8 cache: ws widens it in its producer)" : "")
        << v.name;
  const auto skip_of = skip_reason;
  EXPECT_EQ(skip_of(parse(kHead + "sequences = [[1, 8]]\nkv_dtype = \"fp8_e4m3\"\n", {"dtype=fp32"}), "varlen"),
            "fp16/bf16 only (mma.sync on 16-bit inputs)");
  const std::string options = "sinks = true\nsoftcap = 50\nalibi = true\nwindow = 3\n";
  EXPECT_EQ(skip_of(parse(kHead + "sequences = [[1, 8]]\n" + options), "varlen"), "");
  EXPECT_EQ(skip_of(parse(kHead + "sequences = [[1, 8]]\nrope = \"neox\"\n"), "varlen"), "");
  EXPECT_EQ(skip_of(parse(kHead + "sequences = [[1, 8]]\nrope = \"neox\"\nrotary_dim = 24\n"), "varlen"),
            "neox RoPE needs rotary_dim % 16 == 0 (a chunk and its partner turn together)");
  EXPECT_EQ(skip_of(parse(kHead + "sequences = [[1, 8]]\n", {"dtype=fp32"}), "varlen"),
            "fp16/bf16 only (mma.sync on 16-bit inputs)");
}

// ---------------------------------------------------------------------------
// The flash layout, written and read back

namespace {

std::vector<float> draw(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = normal(gen);
  return v;
}

}  // namespace

// Every token comes back from its slot through the block table as the cache holds it; every
// slot no token owns is NaN; and the gather follows the table, not the order tokens were written.
TEST(RaggedLayout, GatherThroughTheTableGivesBackTheTokens) {
  const std::vector<int64_t> context = {1, 17, 5, 40, 24};
  const int64_t kv_heads = 2, head_dim = 8, width = kv_heads * head_dim;
  int64_t tokens = 0;
  for (int64_t c : context) tokens += c;
  for (int64_t bs : {1, 3, 16, 24}) {
    for (DType kv : {DType::fp32, DType::bf16, DType::fp8_e4m3}) {
      int64_t needed = 0;
      for (int64_t c : context) needed += ceil_div(c, bs);
      const int64_t num_blocks = needed + needed / 4 + 1;
      const PoolLayout layout = lay_out_pool(7, context, bs, num_blocks);
      std::vector<float> values = draw(tokens * width, 3);
      for (float& x : values) x = round_to(DType::bf16, x);  // the dtype's values, as inputs are
      const float scale = kv == DType::fp8_e4m3 ? fp8_scale(values.data(), tokens * width) : 1.f;
      const std::vector<uint8_t> pool = flash_pool(values.data(), layout.slots, kv_heads, head_dim, num_blocks * bs, kv, scale);
      ASSERT_EQ(pool.size(), static_cast<size_t>(num_blocks * bs * width) * dtype_bytes(kv));
      const std::vector<float> got = gather_flash_pool(pool.data(), layout, context, bs, kv_heads, head_dim, kv, scale);
      ASSERT_EQ(got.size(), values.size());
      for (size_t i = 0; i < values.size(); ++i) {
        const float want = kv == DType::fp8_e4m3 ? round_to(kv, values[i] / scale) * scale : values[i];
        ASSERT_EQ(got[i], want) << "block_size " << bs << " " << dtype_name(kv) << " element " << i;
      }
      // The slots no token owns: NaN, the spare block and each sequence's last block's tail alike.
      std::set<int64_t> owned(layout.slots.begin(), layout.slots.end());
      ASSERT_EQ(owned.size(), static_cast<size_t>(tokens));  // no two tokens share a slot
      std::vector<float> slot(static_cast<size_t>(width));
      int64_t nan_slots = 0;
      for (int64_t s = 0; s < num_blocks * bs; ++s) {
        decode_range(kv, pool.data() + s * width * dtype_bytes(kv), width, slot.data());
        const bool all_nan = std::all_of(slot.begin(), slot.end(), [](float x) { return std::isnan(x); });
        const bool none_nan = std::none_of(slot.begin(), slot.end(), [](float x) { return std::isnan(x); });
        ASSERT_TRUE(owned.count(s) ? none_nan : all_nan) << "slot " << s << " block_size " << bs;
        nan_slots += all_nan;
      }
      EXPECT_EQ(nan_slots, num_blocks * bs - tokens);
    }
  }
}

TEST(RaggedLayout, AWrongTableGathersOtherKeys) {
  const std::vector<int64_t> context = {5, 9};
  const int64_t bs = 4, num_blocks = 8;
  PoolLayout layout = lay_out_pool(1, context, bs, num_blocks);
  const std::vector<float> values = draw(14 * 8, 5);
  const std::vector<uint8_t> pool = flash_pool(values.data(), layout.slots, 1, 8, num_blocks * bs, DType::fp32, 1.f);
  EXPECT_EQ(gather_flash_pool(pool.data(), layout, context, bs, 1, 8, DType::fp32, 1.f), values);
  std::swap(layout.table[0], layout.table[static_cast<size_t>(layout.max_blocks)]);  // first blocks of sequences 0 and 1
  EXPECT_NE(gather_flash_pool(pool.data(), layout, context, bs, 1, 8, DType::fp32, 1.f), values);
}

// The reference over the contexts gathered from the pool is the reference over the logical K/V.
TEST(RaggedLayout, ReferenceReadsTheLogicalKv) {
  const std::vector<int64_t> context = {7, 30, 3};
  ref::RaggedShape s;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 16;
  s.query_len = {1, 6, 3};
  s.context_len = context;
  const int64_t width = s.kv_heads * s.head_dim, bs = 5, num_blocks = 12;
  const std::vector<float> q = draw(s.queries() * s.heads * s.head_dim, 1), k = draw(s.keys() * width, 2),
                           v = draw(s.keys() * width, 3);
  const PoolLayout layout = lay_out_pool(11, context, bs, num_blocks);
  const auto kp = flash_pool(k.data(), layout.slots, s.kv_heads, s.head_dim, num_blocks * bs, DType::fp32, 1.f);
  const auto vp = flash_pool(v.data(), layout.slots, s.kv_heads, s.head_dim, num_blocks * bs, DType::fp32, 1.f);
  const auto kg = gather_flash_pool(kp.data(), layout, context, bs, s.kv_heads, s.head_dim, DType::fp32, 1.f);
  const auto vg = gather_flash_pool(vp.data(), layout, context, bs, s.kv_heads, s.head_dim, DType::fp32, 1.f);
  ref::Rows rows(static_cast<size_t>(s.queries() * s.heads));
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(i);
  const ref::Matrix want = ref::ragged(s, q.data(), k.data(), v.data(), rows);
  const ref::Matrix got = ref::ragged(s, q.data(), kg.data(), vg.data(), rows);
  EXPECT_EQ((want - got).cwiseAbs().maxCoeff(), 0.0);
  EXPECT_TRUE(want.allFinite());
}

// ---------------------------------------------------------------------------
// Verification's forced rows and the work counted

TEST(RaggedVerify, ForcedRowsAreEverySequencesFirstAndLastToken) {
  const Case c = parse(kHead + "sequences = [[1, 1328], [5, 18], [129, 463]]\n");
  const auto rows = make_problem(c.points[0])->must_check_rows();
  // Tokens: 0 (decode), 1..5, 6..134; rows t·8 + h for heads 0 and 7.
  const ref::Rows want = {0, 7, 8, 15, 40, 47, 48, 55, 1072, 1079};
  EXPECT_EQ(rows, want);
}

// Every case of the op keeps all its forced rows within its [verify] max_rows: a case too
// large for it would check only the first sequences.
TEST(RaggedVerify, EveryCaseChecksEverySequence) {
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(std::string(ATTNBENCH_SOURCE_DIR) + "/cases"))
    if (e.path().extension() == ".toml") files.push_back(e.path().string());
  int64_t points = 0;
  for (const std::string& f : files) {
    const Case c = load_case(f, {});
    if (c.op != "ragged") continue;
    for (const CasePoint& p : c.points) {
      const auto problem = make_problem(p);
      const ref::Rows must = problem->must_check_rows();
      const IntPairs& seqs = ragged_sequences(p.shape);
      EXPECT_GE(must.size(), seqs.size()) << f << " " << p.label;
      const ref::Rows sampled = sample_rows(problem->output_rows(), p.verify.max_rows, p.verify.seed, must);
      EXPECT_TRUE(std::includes(sampled.begin(), sampled.end(), must.begin(), must.end()))
          << f << " [" << p.label << "]: max_rows " << p.verify.max_rows << " drops forced rows (" << must.size() << ")";
      ++points;
    }
  }
  EXPECT_GT(points, 20);
}

TEST(RaggedWork, CountsTheCausalPairsAndTheKvRead) {
  const std::string head = "op = \"ragged\"\ndtype = \"fp16\"\n[shape]\nheads = 2\nkv_heads = 1\nhead_dim = 8\n"
                           "sequences = [[1, 4], [3, 3]]\nblock_size = 2\n";
  const Work w = make_problem(parse(head).points[0])->work();
  // Sequence 0: one query at position 3, 4 keys; sequence 1: positions 0, 1, 2, 1 + 2 + 3 keys.
  EXPECT_DOUBLE_EQ(w.flops, 4.0 * 2 * 8 * 10);
  // q and o (4 tokens x 2 heads x 8, fp16), K and V of 7 keys (1 kv head x 8), 2 + 2 table entries.
  EXPECT_DOUBLE_EQ(w.bytes, 2.0 * 2 * 4 * 2 * 8 + 2.0 * 2 * 7 * 8 + 4.0 * 4);
  const Work win = make_problem(parse(head + "window = 2\n").points[0])->work();
  // Sequence 0 sees keys 2, 3 (block 1 only); sequence 1 sees 1 + 2 + 2 keys, all 3 read.
  EXPECT_DOUBLE_EQ(win.flops, 4.0 * 2 * 8 * 7);
  EXPECT_DOUBLE_EQ(win.bytes, 2.0 * 2 * 4 * 2 * 8 + 2.0 * 2 * 5 * 8 + 4.0 * 3);
}

// ---------------------------------------------------------------------------
// Rung 2, separate: the batch split by kind onto the dense tables

namespace {

const DeviceCaps kHopper = [] {
  DeviceCaps c;
  c.sm_count = 132;
  c.cc_major = 9;
  c.smem_per_block_optin = 227 * 1024;
  return c;
}();

// A batch's RaggedParams as the op fills them before its tensors exist (no device pointers),
// with the lengths on the host.
struct Batch {
  std::vector<int32_t> cu = {0}, context;
  RaggedParams p;
  Batch(const IntPairs& seqs, DType dtype, DType kv_dtype, int64_t head_dim = 128) {
    int64_t blocks = 0;
    for (const auto& [q, c] : seqs) {
      cu.push_back(static_cast<int32_t>(cu.back() + q));
      context.push_back(static_cast<int32_t>(c));
      p.longest_context = std::max(p.longest_context, c);
      p.longest_query = std::max(p.longest_query, q);
      blocks += ceil_div(c, 16);
    }
    p.batch = static_cast<int64_t>(seqs.size());
    p.total_queries = cu.back();
    p.heads = 8;
    p.kv_heads = 2;
    p.head_dim = head_dim;
    p.block_size = 16;
    p.max_blocks_per_seq = ceil_div(p.longest_context, 16);
    p.num_blocks = blocks + 1;
    p.dtype = dtype;
    p.kv_dtype = kv_dtype;
    if (kv_dtype == DType::fp8_e4m3) p.k_scale = 0.25f, p.v_scale = 3.f;
    finish_ragged_params(p);
  }
  Batch(const Batch&) = delete;
  RaggedParams params() const {
    RaggedParams r = p;
    r.host_cu_seqlens_q = cu.data();
    r.host_context_lens = context.data();
    return r;
  }
};

const Variant<RaggedParams>& separate_variant() {
  const Variant<RaggedParams>* v = find_variant(ragged_variants(), "separate");
  EXPECT_NE(v, nullptr);
  return *v;
}

const IntPairs kScattered = {{1, 1328}, {5, 18}, {129, 463}, {4, 4}, {1, 1}};  // cases/ragged/options.toml's

}  // namespace

// Every option the op takes reaches a dense kernel that takes it: the plain batch, each dtype
// and cache type, a window, ALiBi, softcap, sinks and RoPE all run.
TEST(RaggedSeparate, AcceptsThePlainOptions) {
  const float2 table[1] = {};
  for (const IntPairs& seqs : {kVllm, kScattered, IntPairs{{1, 9}, {1, 4096}}, IntPairs{{7, 7}}}) {
    for (DType dtype : {DType::fp32, DType::fp16, DType::bf16}) {
      for (DType kv : {dtype, DType::fp8_e4m3}) {
        const Batch b(seqs, dtype, kv);
        for (int option = 0; option < 6; ++option) {
          RaggedParams p = b.params();
          if (option == 1) p.window = 64;
          if (option == 2) p.score.alibi = true;
          if (option == 3) p.score.softcap = 50;
          if (option == 4) p.score.sinks = true;
          if (option == 5) p.rope = {RopeTable::neox, 128, 0, static_cast<int>(p.longest_context), table};
          EXPECT_EQ(separate_variant().supports(p, kHopper), "")
              << dtype_name(dtype) << " cache " << dtype_name(kv) << " option " << option << " batch of "
              << seqs.size();
          EXPECT_GT(separate_variant().workspace(p), 0u);
        }
      }
    }
  }
}

// One gather, ONE decode launch for all decodes (and a scatter of their outputs when they are not
// consecutive in the batch), one dense attention launch per other sequence: the tables' fastest.
TEST(RaggedSeparate, LaunchesTheFastestDenseVariants) {
  const Batch vllm(kVllm, DType::bf16, DType::bf16);
  EXPECT_EQ(ragged_impl::separate_launches(vllm.params(), kHopper),
            (std::vector<std::string>{"gather", "decode/split_kv", "attention/flash_ws", "attention/flash_ws"}));
  const Batch scattered(kScattered, DType::bf16, DType::fp8_e4m3);
  EXPECT_EQ(ragged_impl::separate_launches(scattered.params(), kHopper),
            (std::vector<std::string>{"gather", "decode/split_kv", "scatter", "attention/flash_ws", "attention/flash_ws",
                                      "attention/flash_ws"}));
  const Batch d80(kVllm, DType::fp16, DType::fp16, 80);  // flash_ws takes head_dim 64, 128 and 256
  EXPECT_EQ(ragged_impl::separate_launches(d80.params(), kHopper),
            (std::vector<std::string>{"gather", "decode/split_kv", "attention/flash_mma", "attention/flash_mma"}));
  const Batch fp32(IntPairs{{3, 40}}, DType::fp32, DType::fp32);
  EXPECT_EQ(ragged_impl::separate_launches(fp32.params(), kHopper), (std::vector<std::string>{"gather", "attention/flash_fp32"}));
}

// The workspace holds the gathered contexts (the decodes' at the longest decode's stride) and,
// with RoPE, the turned queries.
TEST(RaggedSeparate, WorkspaceHoldsTheGatheredContexts) {
  const Batch b({{1, 100}, {1, 1328}, {5, 18}, {129, 463}}, DType::bf16, DType::bf16);
  const std::size_t row = 2 * 128 * 2;  // a key's kv heads, bf16
  const std::size_t gathered = 2 * (18 + 463) * row + 2 * 2 * 1328 * row;
  RaggedParams p = b.params();
  const std::size_t plain = separate_variant().workspace(p);
  EXPECT_GE(plain, gathered);
  const float2 table[1] = {};
  p.rope = {RopeTable::gptj, 64, 0, static_cast<int>(p.longest_context), table};
  EXPECT_EQ(separate_variant().workspace(p) - plain, round_up_256(static_cast<std::size_t>(136 * 8 * 128 * 2)));
}

// What it refuses, and why: the op's own checks, lengths it cannot plan without, and a part no
// dense kernel runs, in the dense table's words.
TEST(RaggedSeparate, SaysWhyItRefuses) {
  const Batch b(kVllm, DType::bf16, DType::bf16);
  RaggedParams p = b.params();
  p.host_context_lens = nullptr;
  expect_has(separate_variant().supports(p, kHopper), {"on the host"});
  EXPECT_EQ(separate_variant().workspace(p), 0u);
  EXPECT_TRUE(ragged_impl::separate_launches(p, kHopper).empty());

  const Batch d60(kVllm, DType::bf16, DType::bf16, 60);
  expect_has(separate_variant().supports(d60.params(), kHopper), {"head_dim must be a multiple of 8"});

  p = b.params();
  p.kv_dtype = DType::fp16;  // the op's own check, rung 1's words
  expect_has(separate_variant().supports(p, kHopper), {"kv_dtype fp16 must be the query's dtype or fp8_e4m3"});

  // A decode over 2^30 keys: every decode variant refuses it; the reason is the baseline's.
  const Batch huge(IntPairs{{1, int64_t{1} << 30}}, DType::bf16, DType::bf16);
  RaggedParams h = huge.params();
  h.block_size = int64_t{1} << 20;
  h.max_blocks_per_seq = 1024;
  h.num_blocks = 1025;
  expect_has(separate_variant().supports(h, kHopper),
             {"the decodes (1 of them): no dense decode variant runs them", "naive: max_context must be < 2^30"});
}

// ---------------------------------------------------------------------------
// Rungs 3 and 4, varlen and split_kv: the caches they take

namespace {

const Variant<RaggedParams>& ragged_variant(const std::string& name) {
  const Variant<RaggedParams>* v = find_variant(ragged_variants(), name);
  EXPECT_NE(v, nullptr) << name;
  return *v;
}

}  // namespace

// fp16 and bf16 queries over a cache of their type or an fp8 one, every head-dim class and the
// padded sizes between them, with every option: both rungs take them, and split_kv's partials
// (fp32) are the same size whatever the cache.
TEST(RaggedVarlen, TakesAnFp8Cache) {
  const float2 table[1] = {};
  for (DType dtype : {DType::fp16, DType::bf16}) {
    for (DType kv : {dtype, DType::fp8_e4m3}) {
      for (int64_t d : {64, 80, 96, 128, 256}) {
        const Batch b(kScattered, dtype, kv, d);
        for (int option = 0; option < 6; ++option) {
          RaggedParams p = b.params();
          if (option == 1) p.window = 64;
          if (option == 2) p.score.alibi = true;
          if (option == 3) p.score.softcap = 50;
          if (option == 4) p.score.sinks = true;
          if (option == 5) p.rope = {RopeTable::neox, static_cast<int>(d), 0, static_cast<int>(p.longest_context), table};
          for (const char* rung : {"varlen", "split_kv"})
            EXPECT_EQ(ragged_variant(rung).supports(p, kHopper), "")
                << rung << " " << dtype_name(dtype) << " cache " << dtype_name(kv) << " head_dim " << d << " option "
                << option;
        }
      }
    }
  }
  const Batch bf16(IntPairs{{1, 8192}, {1, 64}, {2, 64}}, DType::bf16, DType::bf16, 64);
  const Batch fp8(IntPairs{{1, 8192}, {1, 64}, {2, 64}}, DType::bf16, DType::fp8_e4m3, 64);
  EXPECT_GT(ragged_variant("split_kv").workspace(bf16.params()), 0u);
  EXPECT_EQ(ragged_variant("split_kv").workspace(fp8.params()), ragged_variant("split_kv").workspace(bf16.params()));
}

// What they still refuse with an fp8 cache, and why: fp32 queries (no tensor-core path), a
// head_dim whose rows of codes are not whole 16-byte copies, a card without the e4m3 cvt,
// scales that are not positive and finite; and a 16-bit cache of the other 16-bit type.
TEST(RaggedVarlen, SaysWhyItRefusesAnFp8Cache) {
  for (const char* rung : {"varlen", "split_kv"}) {
    const auto& v = ragged_variant(rung);
    const Batch fp32(kVllm, DType::fp32, DType::fp8_e4m3);
    EXPECT_EQ(v.supports(fp32.params(), kHopper), "fp16/bf16 only (mma.sync on 16-bit inputs)") << rung;

    const Batch d72(kVllm, DType::bf16, DType::fp8_e4m3, 72);
    EXPECT_EQ(v.supports(d72.params(), kHopper), "an fp8 cache needs head_dim % 16 == 0 (16-byte copies of 16 codes)")
        << rung;
    const Batch d72_bf16(kVllm, DType::bf16, DType::bf16, 72);  // a 16-bit cache's rows are 16-byte copies of 8
    EXPECT_EQ(v.supports(d72_bf16.params(), kHopper), "") << rung;

    const Batch fp8(kVllm, DType::fp16, DType::fp8_e4m3);
    const Batch fp16(kVllm, DType::fp16, DType::fp16);
    DeviceCaps ampere = kHopper;
    ampere.cc_major = 8;
    ampere.cc_minor = 0;
    EXPECT_EQ(v.supports(fp8.params(), ampere), "an fp8 cache needs sm_89+ (cvt e4m3x2 -> f16x2)") << rung;
    EXPECT_EQ(v.supports(fp16.params(), ampere), "") << rung;
    DeviceCaps ada = ampere;
    ada.cc_minor = 9;
    EXPECT_EQ(v.supports(fp8.params(), ada), "") << rung;

    RaggedParams p = fp8.params();
    p.k_scale = 0;
    EXPECT_EQ(v.supports(p, kHopper), "k_scale and v_scale must be positive and finite") << rung;
    p = fp8.params();
    p.v_scale = INFINITY;
    EXPECT_EQ(v.supports(p, kHopper), "k_scale and v_scale must be positive and finite") << rung;

    p = fp16.params();
    p.kv_dtype = DType::bf16;  // the op's own check, rung 1's words
    EXPECT_EQ(v.supports(p, kHopper), "kv_dtype bf16 must be the query's dtype or fp8_e4m3") << rung;
  }
}

// An fp8 cache's tiles need less shared memory than a 16-bit cache's (one stage of widened
// tiles and two of codes against two of 16-bit tiles): at head_dim 256, 163 KB against 165.
TEST(RaggedVarlen, AnFp8CacheNeedsLessSharedMemory) {
  DeviceCaps caps = kHopper;
  caps.smem_per_block_optin = 164 * 1024;
  const Batch fp8(kVllm, DType::bf16, DType::fp8_e4m3, 256);
  const Batch bf16(kVllm, DType::bf16, DType::bf16, 256);
  EXPECT_EQ(ragged_variant("varlen").supports(fp8.params(), caps), "");
  EXPECT_EQ(ragged_variant("varlen").supports(bf16.params(), caps), "needs 165 KB of shared memory per block");
  caps.smem_per_block_optin = 162 * 1024;
  EXPECT_EQ(ragged_variant("varlen").supports(fp8.params(), caps), "needs 163 KB of shared memory per block");
}

// Every fp8-cache point of the op's cases with fp16 or bf16 queries reaches both tensor-core
// rungs (none skips them), both query types among them; cases/ragged/fp8-heads.toml's points
// without a window split (the partials' v_scale).
TEST(RaggedVarlen, TheCasesRunAnFp8CacheOnTheTensorCoreRungs) {
  std::set<std::string> dtypes;
  int64_t points = 0, split = 0;
  for (const auto& e : fs::directory_iterator(std::string(ATTNBENCH_SOURCE_DIR) + "/cases/ragged")) {
    if (e.path().extension() != ".toml") continue;
    const Case c = load_case(e.path().string(), {});
    for (const CasePoint& p : c.points) {
      if (p.shape.word("kv_dtype") != "fp8_e4m3" || p.dtype == DType::fp32) continue;
      const auto problem = make_problem(p);
      for (const VariantChoice& v : problem->variants(assumed_caps()))
        if (v.name == "varlen" || v.name == "split_kv")
          EXPECT_EQ(v.skip, "") << e.path().filename() << " [" << p.label << "] " << v.name;
      dtypes.insert(dtype_name(p.dtype));
      ++points;
      if (e.path().filename() == "fp8-heads.toml" && p.shape.num("window") == 0) {
        EXPECT_GT(problem->workspace("split_kv"), 0u) << p.label;
        ++split;
      }
    }
  }
  EXPECT_GT(points, 40);
  EXPECT_EQ(dtypes, (std::set<std::string>{"fp16", "bf16"}));
  EXPECT_EQ(split, 10);
}
