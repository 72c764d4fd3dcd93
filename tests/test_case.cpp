// Case files: defaults, validation messages, sweeps, --set overrides, finding files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include "app/case.hpp"
#include "app/checked.hpp"
#include "app/ops/batch_mix.hpp"
#include "tests/case_text.hpp"

namespace attnbench {
namespace {

namespace fs = std::filesystem;

using case_text::error_of;
using case_text::expect_has;
using case_text::parse;

const char* kAttention = R"(op = "attention"
[shape]
batch = 2
heads = 8
seq_q = 128
head_dim = 64
)";

const char* kDecode = R"(op = "decode"
[shape]
batch = 3
heads = 8
head_dim = 64
context = 100
)";

const char* kPaged = R"(op = "paged"
[shape]
batch = 2
heads = 8
head_dim = 64
context = [17, 40]
)";

// ---------------------------------------------------------------------------
// Defaults, one test per op

TEST(CaseDefaults, Softmax) {
  const Case c = parse("op = \"softmax\"\n[shape]\nrows = 4\ncols = 1000\n");
  EXPECT_EQ(c.name, "t");
  EXPECT_EQ(c.file, "cases/t.toml");
  EXPECT_EQ(c.op, "softmax");
  ASSERT_EQ(c.points.size(), 1u);
  const CasePoint& p = c.points[0];
  EXPECT_EQ(p.label, "");
  EXPECT_EQ(p.dtype, DType::fp32);
  EXPECT_EQ(p.shape.num("rows"), 4);
  EXPECT_EQ(p.shape.num("cols"), 1000);
  EXPECT_TRUE(p.kernels.empty());
  EXPECT_EQ(p.baseline, "naive");
  EXPECT_EQ(p.verify.seed, 1u);
  EXPECT_EQ(p.verify.trials, 2);
  EXPECT_FALSE(p.verify.atol.has_value());
  EXPECT_FALSE(p.verify.rtol.has_value());
  EXPECT_EQ(p.verify.max_rows, 512);
  EXPECT_EQ(p.bench.mode, TimingMode::cold);
  EXPECT_DOUBLE_EQ(p.bench.warmup_ms, 20);
  EXPECT_DOUBLE_EQ(p.bench.min_time_ms, 100);
  EXPECT_DOUBLE_EQ(p.bench.max_noise, 0.005);
  EXPECT_DOUBLE_EQ(p.bench.max_time_ms, 2000);
}

TEST(CaseDefaults, Gemm) {
  const Case c = parse("op = \"gemm\"\n[shape]\nm = 64\nn = 32\nk = 16\n");
  const Shape& s = c.points.at(0).shape;
  EXPECT_EQ(s.word("layout"), "nt");
  EXPECT_EQ(s.num("batch"), 1);
  EXPECT_EQ(s.num("m"), 64);
  EXPECT_EQ(s.num("n"), 32);
  EXPECT_EQ(s.num("k"), 16);
  EXPECT_EQ(c.points[0].baseline, "cublas");
  EXPECT_EQ(
      parse("op = \"gemm\"\n[shape]\nlayout = \"nn\"\nbatch = 3\nm = 1\nn = 1\nk = 1\n").points[0].shape.word("layout"),
      "nn");
}

TEST(CaseDefaults, Attention) {
  const Shape s = parse(kAttention).points.at(0).shape;
  EXPECT_EQ(s.num("batch"), 2);
  EXPECT_EQ(s.num("heads"), 8);
  EXPECT_EQ(s.num("kv_heads"), 8);
  EXPECT_EQ(s.num("seq_q"), 128);
  EXPECT_EQ(s.num("seq_k"), 128);
  EXPECT_EQ(s.num("head_dim"), 64);
  EXPECT_EQ(s.word("causal"), "none");
  EXPECT_EQ(s.num("window"), 0);
  EXPECT_FALSE(s.flag("alibi"));

  const Shape g =
      parse(std::string(kAttention) + "kv_heads = 2\nseq_k = 300\ncausal = true\nwindow = 64\nalibi = true\n")
          .points.at(0)
          .shape;
  EXPECT_EQ(g.num("kv_heads"), 2);
  EXPECT_EQ(g.num("seq_k"), 300);
  EXPECT_EQ(g.word("causal"), "bottom_right");  // true keeps meaning bottom-right
  EXPECT_EQ(g.num("window"), 64);
  EXPECT_TRUE(g.flag("alibi"));
}

// The score options: softcap 0, no scale (1/sqrt(head_dim) on each side), no slopes; the
// causal words; a list on alibi_slopes is one value, a list of lists a sweep.
TEST(CaseDefaults, ScoreOptions) {
  const Shape s = parse(kAttention).points.at(0).shape;
  EXPECT_EQ(s.real("softcap"), 0.0);
  EXPECT_FALSE(s.has("scale"));
  EXPECT_TRUE(s.reals("alibi_slopes").empty());
  const Shape g = parse(std::string(kAttention) +
                        "causal = \"top_left\"\nsoftcap = 30\nscale = 0.5\n"
                        "kv_heads = 1\nalibi_slopes = [0.25, 1, 1, 1, 1, 1, 1, 1]\n")
                      .points.at(0)
                      .shape;
  EXPECT_EQ(g.word("causal"), "top_left");
  EXPECT_EQ(g.real("softcap"), 30.0);
  EXPECT_EQ(g.real("scale"), 0.5);
  EXPECT_EQ(g.reals("alibi_slopes").size(), 8u);
  EXPECT_EQ(g.reals("alibi_slopes")[0], 0.25);
  EXPECT_TRUE(g.flag("alibi"));  // slopes turn ALiBi on
  const Case one = parse(kAttention, {"shape.heads=2", "shape.kv_heads=2", "shape.alibi_slopes=[0.5, 0.125]"});
  ASSERT_EQ(one.points.size(), 1u);
  EXPECT_EQ(one.points[0].shape.reals("alibi_slopes"), (std::vector<double>{0.5, 0.125}));
  const Case two = parse(kAttention, {"shape.heads=1", "shape.kv_heads=1", "shape.alibi_slopes=[[0.5], [2]]"});
  ASSERT_EQ(two.points.size(), 2u);
  EXPECT_EQ(two.points[1].shape.reals("alibi_slopes"), (std::vector<double>{2.0}));
}

// RoPE: off by default, rotary_dim = head_dim, theta 10000; partial rotary; the errors.
TEST(CaseDefaults, Rope) {
  for (const char* op : {kAttention, kDecode, kPaged}) {
    const Shape s = parse(op).points.at(0).shape;
    EXPECT_EQ(s.word("rope"), "none");
    EXPECT_EQ(s.real("rope_theta"), 10000.0);
    EXPECT_EQ(s.num("rotary_dim"), 64);
    const Shape g =
        parse(std::string(op) + "rope = \"gptj\"\nrotary_dim = 32\nrope_theta = 500000\n").points.at(0).shape;
    EXPECT_EQ(g.word("rope"), "gptj");
    EXPECT_EQ(g.num("rotary_dim"), 32);
    EXPECT_EQ(g.real("rope_theta"), 500000.0);
    expect_has(error_of(std::string(op) + "rope = \"neox\"\nrotary_dim = 33\n"), {"rotary_dim", "even", "33"});
    expect_has(error_of(std::string(op) + "rope = \"neox\"\nrotary_dim = 80\n"), {"rotary_dim", "at most head_dim"});
    expect_has(error_of(std::string(op) + "rotary_dim = 32\n"), {"rotary_dim", "rope"});
    expect_has(error_of(std::string(op) + "rope = \"yes\"\n"), {"rope", "neox", "gptj"});
  }
}

TEST(CaseDefaults, DecodeIntContextRepeatsPerSequence) {
  const Shape s = parse(kDecode).points.at(0).shape;
  EXPECT_EQ(s.num("kv_heads"), 8);
  EXPECT_EQ(s.lengths("context"), (std::vector<int64_t>{100, 100, 100}));
  EXPECT_EQ(s.num("max_context"), 100);
  EXPECT_FALSE(s.flag("alibi"));
}

TEST(CaseDefaults, DecodeListContextSetsMaxContext) {
  const Shape s = parse("op = \"decode\"\n[shape]\nbatch = 3\nheads = 4\nhead_dim = 128\ncontext = [1, 7, 1000]\n")
                      .points.at(0)
                      .shape;
  EXPECT_EQ(s.lengths("context"), (std::vector<int64_t>{1, 7, 1000}));
  EXPECT_EQ(s.num("max_context"), 1000);
}

TEST(CaseDefaults, Paged) {
  const Case c = parse(std::string("dtype = \"bf16\"\n") + kPaged);
  const Shape& s = c.points.at(0).shape;
  EXPECT_EQ(s.num("block_size"), 16);
  EXPECT_EQ(s.num("partition_size"), 512);
  EXPECT_EQ(s.word("kv_dtype"), "bf16");
  // ceil(17/16) + ceil(40/16) = 5 blocks needed; 5 + 5/4 + 1 spare-inclusive.
  EXPECT_EQ(s.num("num_blocks"), 7);
  EXPECT_EQ(s.lengths("context"), (std::vector<int64_t>{17, 40}));
  EXPECT_EQ(c.points[0].baseline, "v1");
}

TEST(CaseDefaults, PagedExplicitKeys) {
  const Shape s =
      parse(std::string(kPaged) +
            "block_size = 8\nnum_blocks = 100\npartition_size = 256\nkv_dtype = \"fp8_e4m3\"\nalibi = true\n")
          .points.at(0)
          .shape;
  EXPECT_EQ(s.num("block_size"), 8);
  EXPECT_EQ(s.num("num_blocks"), 100);
  EXPECT_EQ(s.num("partition_size"), 256);
  EXPECT_EQ(s.word("kv_dtype"), "fp8_e4m3");
  EXPECT_TRUE(s.flag("alibi"));
}

TEST(CaseDefaults, Pipeline) {
  const char* text = R"(op = "pipeline"
[shape]
batch = 1
heads = 32
kv_heads = 8
head_dim = 128
prompt = 512
generate = 64
)";
  const Shape s = parse(text).points.at(0).shape;
  EXPECT_EQ(s.num("kv_heads"), 8);
  EXPECT_EQ(s.num("max_context"), 576);
  EXPECT_EQ(s.word("prefill"), "");
  EXPECT_EQ(s.word("decode"), "");
  const Shape named = parse(std::string(text) + "prefill = \"flash_mma\"\ndecode = \"split_kv\"\nmax_context = 1000\n")
                          .points.at(0)
                          .shape;
  EXPECT_EQ(named.word("prefill"), "flash_mma");
  EXPECT_EQ(named.word("decode"), "split_kv");
  EXPECT_EQ(named.num("max_context"), 1000);
}

TEST(CaseDefaults, TopLevelKeys) {
  const Case c = parse(std::string(R"(name = "mine"
description = "GQA prefill"
dtype = "fp16"
kernels = ["flash_mma", "cublas", "flash_mma"]
)") + kAttention);
  EXPECT_EQ(c.name, "mine");
  EXPECT_EQ(c.description, "GQA prefill");
  EXPECT_EQ(c.points.at(0).dtype, DType::fp16);
  // Duplicates collapse; the baseline joins the list for the speedup column.
  EXPECT_EQ(c.points[0].kernels, (std::vector<std::string>{"flash_mma", "cublas", "naive"}));
  EXPECT_EQ(c.points[0].baseline, "naive");

  const Case b = parse(std::string("kernels = [\"flash_mma\"]\nbaseline = \"cublas\"\n") + kAttention);
  EXPECT_EQ(b.points.at(0).kernels, (std::vector<std::string>{"flash_mma", "cublas"}));
  EXPECT_EQ(b.points[0].baseline, "cublas");
}

TEST(CaseDefaults, VerifyAndBench) {
  const CasePoint p = parse(std::string(kAttention) + R"(
[verify]
seed = 7
trials = 5
atol = 1e-3
rtol = 0
max_rows = 0
[bench]
mode = "graph"
warmup_ms = 5
min_time_ms = 50.5
max_noise = 0.01
max_time_ms = 60
)")
                          .points.at(0);
  EXPECT_EQ(p.verify.seed, 7u);
  EXPECT_EQ(p.verify.trials, 5);
  EXPECT_DOUBLE_EQ(p.verify.atol.value(), 1e-3);
  EXPECT_DOUBLE_EQ(p.verify.rtol.value(), 0);
  EXPECT_EQ(p.verify.max_rows, 0);
  EXPECT_EQ(p.bench.mode, TimingMode::graph);
  EXPECT_DOUBLE_EQ(p.bench.warmup_ms, 5);
  EXPECT_DOUBLE_EQ(p.bench.min_time_ms, 50.5);
  EXPECT_DOUBLE_EQ(p.bench.max_noise, 0.01);
  EXPECT_DOUBLE_EQ(p.bench.max_time_ms, 60);
}

TEST(CaseDefaults, RaisingMinTimeAloneRaisesTheDefaultCap) {
  const BenchSpec b = parse(std::string(kAttention) + "[bench]\nmin_time_ms = 5000\n").points.at(0).bench;
  EXPECT_DOUBLE_EQ(b.min_time_ms, 5000);
  EXPECT_DOUBLE_EQ(b.max_time_ms, 5000);
}

TEST(CaseNames, Mode) {
  EXPECT_STREQ(mode_name(TimingMode::cold), "cold");
  EXPECT_STREQ(mode_name(TimingMode::hot), "hot");
  EXPECT_STREQ(mode_name(TimingMode::graph), "graph");
}

// ---------------------------------------------------------------------------
// Errors: file, syntax, keys, types

TEST(CaseErrors, TomlSyntaxHasFileLineColumn) {
  const std::string e = error_of("op = \"softmax\"\n[shape]\nrows = [1,\n");
  expect_has(e, {"cases/t.toml:", "error: invalid TOML"});
  EXPECT_EQ(e.rfind("cases/t.toml:", 0), 0u) << e;
  EXPECT_NE(e.find(":3:"), std::string::npos) << e;  // toml++ reports where it gave up
  expect_has(error_of("op = \"softmax\"\nop = \"gemm\"\n"), {"cases/t.toml:2:", "redefine"});
}

TEST(CaseErrors, MissingAndUnknownOp) {
  expect_has(error_of("[shape]\nrows = 1\n"), {"cases/t.toml: error: missing key op", "softmax, gemm"});
  expect_has(error_of("op = \"atention\"\n"),
             {"cases/t.toml:1:6: error: unknown op 'atention' (did you mean attention?)"});
  expect_has(error_of("op = \"banana\"\n"), {"unknown op 'banana' (expected softmax, gemm, attention, decode, paged, "
                                             "pipeline, cache_append, reshape_and_cache, mha, model, ragged, attention_backward, "
                                             "mla, gemm_q or sample)"});
  expect_has(error_of("op = 3\n"), {"1:6", "op must be a string, got integer"});
}

TEST(CaseErrors, UnknownKeysSuggestOrList) {
  expect_has(error_of(std::string(kAttention) + "seq_len = 5\n"),
             {"cases/t.toml:7:1: error: unknown key shape.seq_len (did you mean seq_q"});
  expect_has(error_of(std::string("kernal = [\"naive\"]\n") + kAttention),
             {"1:1", "unknown key kernal (did you mean kernels?)"});
  expect_has(error_of(std::string(kAttention) + "zzzzzz = 1\n"),
             {"unknown key shape.zzzzzz", "valid keys for attention: batch, heads"});
  expect_has(error_of(std::string(kAttention) + "[verify]\ntrails = 3\n"),
             {"8:1", "unknown key verify.trails (did you mean trials?)"});
  expect_has(error_of(std::string(kAttention) + "[bench]\nmod = \"hot\"\n"),
             {"unknown key bench.mod (did you mean mode?)"});
  expect_has(error_of(std::string(kAttention) + "[sweep]\nheaddim = [64]\n"),
             {"8:1", "unknown key sweep.headdim (did you mean head_dim?)"});
}

TEST(CaseErrors, KeyOfAnotherOpIsUnknown) {
  expect_has(error_of(std::string(kDecode) + "causal = true\n"),
             {"7:1", "unknown key shape.causal", "valid keys for decode"});
  expect_has(error_of(std::string(kDecode) + "kv_dtype = \"fp8_e4m3\"\n"), {"unknown key shape.kv_dtype"});
  expect_has(error_of("op = \"softmax\"\n[shape]\nrows = 1\ncols = 1\nbatch = 2\n"),
             {"5:1", "unknown key shape.batch"});
}

TEST(CaseErrors, WrongTypes) {
  expect_has(error_of("op = \"attention\"\n[shape]\nheads = \"x\"\nbatch = 1\nseq_q = 1\nhead_dim = 8\n"),
             {"cases/t.toml:3:9: error: shape.heads must be an integer, got string"});
  expect_has(error_of("op = \"softmax\"\n[shape]\nrows = 4.0\ncols = 2\n"),
             {"3:8", "shape.rows must be an integer, got float"});
  expect_has(error_of(std::string(kAttention) + "causal = 1\n"),
             {"7:10", "shape.causal must be true, false or one of none, bottom_right or top_left", "got integer"});
  expect_has(error_of(std::string("name = 5\n") + kAttention), {"name must be a string, got integer"});
  expect_has(error_of(std::string(kAttention) + "[verify]\natol = \"small\"\n"),
             {"verify.atol must be a number, got string"});
  expect_has(error_of("op = \"softmax\"\nshape = 5\n"), {"2:9", "shape must be a table, got integer"});
  expect_has(error_of(std::string("kernels = \"naive\"\n") + kAttention),
             {"kernels must be a list of kernel names, got string"});
  expect_has(error_of(std::string("kernels = [1]\n") + kAttention),
             {"1:12", "kernels[0] must be a string, got integer"});
}

TEST(CaseErrors, MissingShapeKey) {
  expect_has(error_of("op = \"attention\"\n[shape]\nbatch = 1\nheads = 2\nseq_q = 3\n"),
             {"cases/t.toml:2:1: error: missing key shape.head_dim", "batch, heads, seq_q, head_dim"});
  expect_has(error_of("op = \"gemm\"\n"), {"cases/t.toml: error: missing key shape.m"});
  expect_has(error_of("op = \"paged\"\n[shape]\nbatch = 1\nheads = 2\nhead_dim = 8\n"), {"missing key shape.context"});
  expect_has(error_of("op = \"pipeline\"\n[shape]\nbatch = 1\nheads = 2\nhead_dim = 8\nprompt = 4\n"),
             {"missing key shape.generate"});
}

// ---------------------------------------------------------------------------
// Errors: value validation

// Every size key, per op, refuses 0 at the key's position.
TEST(CaseErrors, EverySizeMustBePositive) {
  struct Row {
    const char* base;
    std::vector<const char*> keys;
  };
  const std::vector<Row> rows = {
      {"op = \"softmax\"\n[shape]\nrows = 1\ncols = 1\n", {"rows", "cols"}},
      {"op = \"gemm\"\n[shape]\nm = 1\nn = 1\nk = 1\nbatch = 1\n", {"m", "n", "k", "batch"}},
      {"op = \"attention\"\n[shape]\nbatch = 1\nheads = 8\nkv_heads = 8\nseq_q = 1\nseq_k = 1\nhead_dim = 8\n",
       {"batch", "heads", "kv_heads", "seq_q", "seq_k", "head_dim"}},
      {"op = \"decode\"\n[shape]\nbatch = 1\nheads = 8\nhead_dim = 8\ncontext = 4\nmax_context = 8\n",
       {"batch", "heads", "head_dim", "max_context"}},
      {"op = \"paged\"\n[shape]\nbatch = 1\nheads = 8\nhead_dim = 8\ncontext = 4\nblock_size = 16\n"
       "partition_size = 512\nnum_blocks = 9\n",
       {"block_size", "partition_size", "num_blocks"}},
      {"op = \"pipeline\"\n[shape]\nbatch = 1\nheads = 8\nhead_dim = 8\nprompt = 4\ngenerate = 4\n",
       {"prompt", "generate"}},
  };
  for (const Row& row : rows) {
    for (const char* key : row.keys) {
      std::string text = row.base;
      const std::string line = std::string("\n") + key + " = ";
      const size_t at = text.find(line);
      ASSERT_NE(at, std::string::npos) << key;
      const size_t value = at + line.size();
      text.replace(value, text.find('\n', value) - value, "0");
      const size_t line_no = static_cast<size_t>(std::count(text.begin(), text.begin() + value, '\n')) + 1;
      const std::string where = "cases/t.toml:" + std::to_string(line_no) + ":" + std::to_string(line.size());
      expect_has(error_of(text), {where.c_str(), ("shape." + std::string(key) + " must be at least 1, got 0").c_str()});
    }
  }
}

TEST(CaseErrors, WindowMayBeZeroButNotNegative) {
  EXPECT_EQ(parse(std::string(kAttention) + "window = 0\n").points.at(0).shape.num("window"), 0);
  expect_has(error_of(std::string(kAttention) + "window = -1\n"), {"7:10", "shape.window must be at least 0, got -1"});
}

TEST(CaseErrors, ContextEntries) {
  expect_has(error_of("op = \"decode\"\n[shape]\nbatch = 4\nheads = 8\nhead_dim = 64\ncontext = [5, 6, 7, 0]\n"),
             {"6:21", "context 0 for sequence 3: every sequence needs at least one token"});
  expect_has(error_of("op = \"decode\"\n[shape]\nbatch = 4\nheads = 8\nhead_dim = 64\ncontext = 0\n"),
             {"6:11", "context 0: every sequence needs at least one token"});
  expect_has(error_of("op = \"paged\"\n[shape]\nbatch = 4\nheads = 8\nhead_dim = 64\ncontext = [5, 6, 7]\n"),
             {"6:11", "shape.context has 3 entries but batch is 4"});
  expect_has(error_of("op = \"decode\"\n[shape]\nbatch = 2\nheads = 8\nhead_dim = 64\ncontext = [5, \"x\"]\n"),
             {"shape.context[1] must be an integer, got string"});
  expect_has(error_of("op = \"decode\"\n[shape]\nbatch = 2\nheads = 8\nhead_dim = 64\ncontext = true\n"),
             {"shape.context must be an integer or a list of integers"});
}

TEST(CaseErrors, HeadsAndHeadDim) {
  expect_has(error_of("op = \"attention\"\n[shape]\nbatch = 1\nheads = 12\nkv_heads = 5\nseq_q = 4\nhead_dim = 64\n"),
             {"5:12", "heads (12) must be a multiple of kv_heads (5)"});
  expect_has(error_of("op = \"decode\"\n[shape]\nbatch = 1\nheads = 8\nhead_dim = 36\ncontext = 4\n"),
             {"5:12", "shape.head_dim must be a multiple of 8 and at most 256, got 36"});
  expect_has(error_of("op = \"pipeline\"\n[shape]\nbatch = 1\nheads = 8\nhead_dim = 264\nprompt = 4\ngenerate = 1\n"),
             {"got 264"});
  EXPECT_EQ(parse("op = \"attention\"\n[shape]\nbatch = 1\nheads = 8\nseq_q = 1\nhead_dim = 256\n")
                .points.at(0)
                .shape.num("head_dim"),
            256);
}

TEST(CaseErrors, DecodeContextFitsMaxContext) {
  expect_has(error_of(std::string(kDecode) + "max_context = 64\n"),
             {"7:15", "context 100 for sequence 0 exceeds max_context 64"});
}

TEST(CaseErrors, PagedBlocks) {
  expect_has(error_of(std::string(kPaged) + "num_blocks = 4\n"),
             {"7:14", "shape.num_blocks (4) is too small: the sequences need 5 blocks of 16 tokens, plus one spare"});
  // Exactly the blocks needed leaves no spare: an entry past a table's end would read real data.
  expect_has(error_of(std::string(kPaged) + "num_blocks = 5\n"), {"shape.num_blocks (5) is too small"});
  expect_has(error_of(std::string(kPaged) + "partition_size = 100\n"),
             {"7:18", "shape.partition_size (100) must be a multiple of block_size (16)"});
  expect_has(error_of(std::string(kPaged) + "block_size = 48\n"),
             {"7:14", "shape.partition_size (512) must be a multiple of block_size (48)"});
  // The key cache packs 16 bytes of head_dim: one fp8 row needs head_dim % 16 == 0.
  expect_has(
      error_of("op = \"paged\"\n[shape]\nbatch = 1\nheads = 1\nhead_dim = 8\ncontext = 4\nkv_dtype = \"fp8_e4m3\"\n"),
      {"must be a multiple of 16 for kv_dtype fp8_e4m3"});
  expect_has(error_of(std::string(kPaged) + "kv_dtype = \"int8\"\n"),
             {"7:12", "unknown shape.kv_dtype 'int8' (expected fp32, fp16, bf16 or fp8_e4m3)"});
}

TEST(CaseErrors, Dtypes) {
  expect_has(error_of(std::string("dtype = \"fp8_e4m3\"\n") + kPaged),
             {"1:9", "dtype fp8_e4m3 is not an input type of op paged", "kv_dtype"});
  // attention takes fp8 inputs, and its descales only with them.
  EXPECT_EQ(parse(std::string("dtype = \"fp8_e4m3\"\n") + kAttention + "descale_v = 2.0\n").points.size(), 1u);
  expect_has(error_of(std::string("dtype = \"bf16\"\n") + kAttention + "descale_v = 2.0\n"),
             {"shape.descale_v applies to fp8_e4m3 inputs only"});
  expect_has(error_of(std::string("dtype = \"fp61\"\n") + kAttention),
             {"1:9", "unknown dtype 'fp61' (did you mean fp16?)"});
  expect_has(error_of(std::string("dtype = \"half\"\n") + kAttention),
             {"unknown dtype 'half' (expected fp32, fp16, bf16 or fp8_e4m3)"});
}

TEST(CaseErrors, GemmLayout) {
  expect_has(error_of("op = \"gemm\"\n[shape]\nlayout = \"tn\"\nm = 1\nn = 1\nk = 1\n"),
             {"3:10", "unknown shape.layout 'tn'", "nt or nn"});
}

TEST(CaseErrors, PipelineLimitsAndVariantNames) {
  const std::string base =
      "op = \"pipeline\"\n[shape]\nbatch = 1\nheads = 8\nhead_dim = 64\nprompt = 100\ngenerate = 50\n";
  expect_has(error_of(base + "max_context = 120\n"),
             {"8:15", "shape.max_context (120) must be at least prompt + generate (150)"});
  expect_has(error_of(base + "prefill = \"flash_mm\"\n"),
             {"8:11", "unknown kernel 'flash_mm' for op attention (did you mean flash_mma?)"});
  expect_has(error_of(base + "decode = \"flash_mma\"\n"),
             {"unknown kernel 'flash_mma' for op decode (known: naive, flash_decode, split_kv, split_kv_rope_first)"});
}

TEST(CaseErrors, KernelNames) {
  expect_has(error_of(std::string("kernels = [\"naive\", \"flash\"]\n") + kAttention),
             {"1:21",
              "unknown kernel 'flash' for op attention (known: naive, cublas, flash_fp32, flash_mma, "
              "flash_mma_rope_first, flash_wgmma, flash_ws, flash_ws_rope_first)"});
  expect_has(error_of(std::string("kernels = [\"cublsa\"]\n") + kAttention), {"did you mean cublas?"});
  expect_has(error_of(std::string("baseline = \"fast\"\n") + kAttention),
             {"1:12", "unknown kernel 'fast' for op attention"});
  expect_has(error_of(std::string("kernels = []\n") + kAttention), {"1:11", "kernels is empty"});
  expect_has(error_of(std::string("kernels = [\"naive\"]\n") + kPaged),
             {"unknown kernel 'naive' for op paged", "known: v1, v2, paged_flash"});
}

TEST(CaseErrors, VerifyAndBenchRanges) {
  const std::string base = std::string(kAttention);
  expect_has(error_of(base + "[verify]\nseed = -1\n"), {"8:8", "verify.seed must be at least 0, got -1"});
  expect_has(error_of(base + "[verify]\ntrials = 0\n"), {"verify.trials must be at least 1, got 0"});
  expect_has(error_of(base + "[verify]\ntrials = 2147483647\n"), {"verify.trials must be at most 1000"});
  expect_has(error_of(base + "[verify]\natol = -0.5\n"), {"8:8", "verify.atol must be a finite number >= 0, got -0.5"});
  expect_has(error_of(base + "[verify]\nrtol = nan\n"), {"verify.rtol must be a finite number"});
  expect_has(error_of(base + "[verify]\nmax_rows = -1\n"), {"verify.max_rows must be at least 0"});
  expect_has(error_of(base + "[bench]\nmode = \"warm\"\n"),
             {"8:8", "unknown bench.mode 'warm' (expected cold, hot, graph or graph_hot)"});
  expect_has(error_of(base + "[bench]\nwarmup_ms = -1\n"),
             {"bench.warmup_ms must be a finite number between 0 and 60000, got -1"});
  // Sampling that would never end is refused, not started.
  expect_has(error_of(base + "[bench]\nmin_time_ms = 1e308\n"), {"bench.min_time_ms", "between 0 and 600000"});
  expect_has(error_of(base + "[bench]\nmax_time_ms = inf\n"), {"bench.max_time_ms", "finite"});
  expect_has(error_of(base + "[bench]\nmax_noise = 2\n"), {"bench.max_noise", "between 0 and 1"});
  expect_has(error_of(base + "[bench]\nmin_time_ms = 100\nmax_time_ms = 50\n"),
             {"9:15", "bench.max_time_ms (50) must be at least bench.min_time_ms (100)"});
}

// ---------------------------------------------------------------------------
// Hostile sizes: every one refused at load, in one line, before anything is allocated

TEST(CaseErrors, DimensionsStopAt32BitIndices) {
  const char* softmax = "op = \"softmax\"\n[shape]\nrows = 4\ncols = ";
  for (const char* big : {"2147483648", "4611686018427387904", "9223372036854775807"})
    expect_has(error_of(std::string(softmax) + big + "\n"), {"4:8", "shape.cols must be at most 2147483647"});
  // Each dim fits, the product does not: the tensor is refused by name, with its dims.
  expect_has(error_of("op = \"softmax\"\n[shape]\nrows = 2147483647\ncols = 2147483647\n"),
             {"tensor x (rows 2147483647 x cols 2147483647)", "32-bit", "at most 2147483647"});
  // A product that overflows 64 bits on the way is caught too, never wrapped.
  expect_has(error_of(std::string(kPaged) + "num_blocks = 2147483647\nblock_size = 1048576\npartition_size = 1048576\n",
                      {"shape.head_dim=256"}),
             {"tensor k_cache", "4611686016279904256 elements"});
  // Past 2^63 the product is an error, never a wrapped (small, "fitting") number.
  EXPECT_THROW(checked_product({int64_t{1} << 40, int64_t{1} << 30}, "x"), InputError);
  EXPECT_EQ(checked_product({int64_t{1} << 40, int64_t{1} << 20}, "x"), int64_t{1} << 60);
  EXPECT_THROW(checked_add(INT64_MAX, int64_t{1}, "x"), InputError);
}

TEST(CaseErrors, BatchIsBoundedBeforeItsListsAreBuilt) {
  // A batch of 2^40 would build a 2^40-entry context list: refused by its range first.
  expect_has(error_of(kDecode, {"shape.batch=1099511627776"}), {"shape.batch must be at most 65535"});
  expect_has(error_of(kDecode, {"shape.context=2147483648"}), {"context 2147483648", "at most 2147483647"});
}

TEST(CaseErrors, DerivedKeysObeyTheirRange) {
  const std::string pipeline =
      "op = \"pipeline\"\n[shape]\nbatch = 1\nheads = 1\nhead_dim = 8\nprompt = 2147483647\ngenerate = 2147483647\n";
  expect_has(error_of(pipeline), {"shape.max_context (prompt + generate) is 4294967294", "outside 1..2147483647"});
}

TEST(CaseErrors, SweepsAreCappedBeforeTheyAreBuilt) {
  std::string values = "[";
  for (int i = 1; i <= 1000; ++i) values += (i > 1 ? "," : "") + std::to_string(i);
  values += "]";
  const std::string text = "op = \"attention\"\n[shape]\nbatch = 1\nhead_dim = 64\n[sweep]\nheads = " + values +
                           "\nseq_q = " + values + "\nseq_k = " + values + "\n";
  expect_has(error_of(text), {"the sweep makes more than 10000 points (1000 x 1000 x 1000)", "--max-points"});
  // The cap is the caller's to raise.
  EXPECT_EQ(
      parse_case("op = \"softmax\"\n[shape]\nrows = 2\n[sweep]\ncols = " + values + "\n", "cases/t.toml", {}, 1000)
          .points.size(),
      1000u);
  EXPECT_THROW(
      parse_case("op = \"softmax\"\n[shape]\nrows = 2\n[sweep]\ncols = " + values + "\n", "cases/t.toml", {}, 999),
      InputError);
}

TEST(CaseSweeps, RangesExpandToTheirValues) {
  const auto cols = [](const Case& c) {
    std::vector<int64_t> v;
    for (const auto& p : c.points) v.push_back(p.shape.num("cols"));
    return v;
  };
  const std::string base = "op = \"softmax\"\n[shape]\nrows = 2\n[sweep]\ncols = ";
  EXPECT_EQ(cols(parse(base + "\"1024:16384:*2\"\n")), (std::vector<int64_t>{1024, 2048, 4096, 8192, 16384}));
  EXPECT_EQ(cols(parse(base + "\"64:256:+64\"\n")), (std::vector<int64_t>{64, 128, 192, 256}));
  EXPECT_EQ(cols(parse(base + "\"3:20:*3\"\n")), (std::vector<int64_t>{3, 9}));  // STOP only when reached
  EXPECT_EQ(cols(parse(base + "\"7:7:+1\"\n")), (std::vector<int64_t>{7}));
  // The same from --set, on a fixed key: a range there means a sweep.
  const char* fixed = "op = \"softmax\"\n[shape]\nrows = 2\ncols = 8\n";
  EXPECT_EQ(cols(parse(fixed, {"shape.cols=16:64:*2"})), (std::vector<int64_t>{16, 32, 64}));
}

TEST(CaseErrors, BadRanges) {
  const std::string base = "op = \"softmax\"\n[shape]\nrows = 2\n[sweep]\ncols = ";
  expect_has(error_of(base + "\"5:1:*2\"\n"), {"5:8", "needs 1 <= START <= STOP and a FACTOR of at least 2"});
  expect_has(error_of(base + "\"1:8:*1\"\n"), {"FACTOR of at least 2"});
  expect_has(error_of(base + "\"1:8:+0\"\n"), {"STEP of at least 1"});
  expect_has(error_of(base + "\"a:8:+1\"\n"), {"START:STOP:*FACTOR (or xFACTOR) or START:STOP:+STEP"});
  // Bounded before the list is built: 2^31 values would be 2^31 nodes.
  expect_has(error_of(base + "\"1:2147483647:+1\"\n"), {"makes more than 10000 values", "--max-points"});
  expect_has(error_of(base + "\"x\"\n"), {"sweep.cols must be a non-empty list of values or a range"});
}

TEST(CaseErrors, LongAndControlTextStaysOneShortLine) {
  const std::string key(1 << 20, 'x');
  const std::string msg = error_of("op = \"softmax\"\n[shape]\nrows = 2\ncols = 3\n" + key + " = 1\n");
  expect_has(msg, {"unknown key shape.xxx", "..."});
  EXPECT_LT(msg.size(), 400u);
  expect_has(error_of("op = \"softmax\"\nname = \"a\\u001b[31m\"\n[shape]\nrows = 2\ncols = 3\n"),
             {"name 'a\\x1b[31m' has a control character"});
  const std::string set_msg = error_of(kDecode, {"shape.heads=" + std::string(100000, '9')});
  EXPECT_LT(set_msg.size(), 400u) << set_msg;
}

// ---------------------------------------------------------------------------
// Files

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("attnbench_test_case_" + std::to_string(getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string write(const std::string& rel, const std::string& text) {
    const fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }

  fs::path root_;
};

using CaseFiles = TempDir;

TEST_F(CaseFiles, LoadTakesTheNameFromTheStem) {
  const std::string path = write("prefill-gqa.toml", kAttention);
  const Case c = load_case(path, {});
  EXPECT_EQ(c.name, "prefill-gqa");
  EXPECT_EQ(c.file, path);
}

TEST_F(CaseFiles, LoadErrorsNameTheFile) {
  const std::string path = write("bad.toml", "op = \"softmax\"\n[shape]\nrows = 0\ncols = 1\n");
  try {
    load_case(path, {});
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), path + ":3:8: error: shape.rows must be at least 1, got 0");
  }
}

TEST_F(CaseFiles, MissingFile) {
  const std::string path = (root_ / "nope.toml").string();
  try {
    load_case(path, {});
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    expect_has(e.what(), {path.c_str(), "no such case file"});
  }
}

TEST_F(CaseFiles, EmptyFile) {
  for (const char* text : {"", "  \n\t\n"}) {
    const std::string path = write("empty.toml", text);
    try {
      load_case(path, {});
      ADD_FAILURE() << "no error for '" << text << "'";
    } catch (const InputError& e) {
      expect_has(e.what(), {path.c_str(), "empty case file"});
    }
  }
}

// ---------------------------------------------------------------------------
// Sweeps

TEST(CaseSweep, CartesianProductInFileOrder) {
  // seq_q comes first in the file, so it is the outer loop, though "batch" sorts first.
  const Case c = parse(R"(op = "attention"
[shape]
heads = 8
head_dim = 64
[sweep]
seq_q = [128, 256]
batch = [1, 2, 4]
)");
  ASSERT_EQ(c.points.size(), 6u);
  const std::vector<std::string> labels = {"seq_q=128 batch=1", "seq_q=128 batch=2", "seq_q=128 batch=4",
                                           "seq_q=256 batch=1", "seq_q=256 batch=2", "seq_q=256 batch=4"};
  const int64_t batches[] = {1, 2, 4};
  for (size_t i = 0; i < labels.size(); ++i) {
    EXPECT_EQ(c.points[i].label, labels[i]);
    EXPECT_EQ(c.points[i].shape.num("seq_q"), i < 3 ? 128 : 256);
    EXPECT_EQ(c.points[i].shape.num("seq_k"), c.points[i].shape.num("seq_q"));  // defaults follow each point
    EXPECT_EQ(c.points[i].shape.num("batch"), batches[i % 3]);
  }
}

TEST(CaseSweep, PinsReproduceEachPoint) {
  // Each point's pins, given as --set on top of the file, select that point alone.
  const Case c = parse(std::string(kPaged) + "[sweep]\ndtype = [\"fp16\", \"bf16\"]\nblock_size = [16, 32]\n");
  ASSERT_EQ(c.points.size(), 4u);
  EXPECT_EQ(c.points[3].pins, (std::vector<std::string>{"dtype=bf16", "shape.block_size=32"}));
  const Case one =
      parse(std::string(kPaged) + "[sweep]\ndtype = [\"fp16\", \"bf16\"]\nblock_size = [16, 32]\n", c.points[3].pins);
  ASSERT_EQ(one.points.size(), 1u);
  EXPECT_EQ(one.points[0].dtype, DType::bf16);
  EXPECT_EQ(one.points[0].shape.num("block_size"), 32);
  EXPECT_TRUE(one.points[0].pins.empty());
}

TEST(CaseSweep, Dtype) {
  const Case c = parse(std::string(kPaged) + "[sweep]\ndtype = [\"fp16\", \"bf16\"]\n");
  ASSERT_EQ(c.points.size(), 2u);
  EXPECT_EQ(c.points[0].label, "dtype=fp16");
  EXPECT_EQ(c.points[0].dtype, DType::fp16);
  EXPECT_EQ(c.points[0].shape.word("kv_dtype"), "fp16");
  EXPECT_EQ(c.points[1].label, "dtype=bf16");
  EXPECT_EQ(c.points[1].dtype, DType::bf16);
  EXPECT_EQ(c.points[1].shape.word("kv_dtype"), "bf16");
}

TEST(CaseSweep, ContextListOfLists) {
  const Case c = parse(R"(op = "decode"
[shape]
batch = 3
heads = 8
head_dim = 64
[sweep]
context = [[1, 7, 1000], [5, 5, 5]]
)");
  ASSERT_EQ(c.points.size(), 2u);
  EXPECT_EQ(c.points[0].label, "context=[1,7,1000]");
  EXPECT_EQ(c.points[0].shape.lengths("context"), (std::vector<int64_t>{1, 7, 1000}));
  EXPECT_EQ(c.points[0].shape.num("max_context"), 1000);
  EXPECT_EQ(c.points[1].label, "context=[5,5,5]");
  EXPECT_EQ(c.points[1].shape.num("max_context"), 5);
}

TEST(CaseSweep, ContextListOfIntsIsOnePerPoint) {
  const Case c =
      parse("op = \"decode\"\n[shape]\nbatch = 2\nheads = 8\nhead_dim = 64\n[sweep]\ncontext = [128, 4096]\n");
  ASSERT_EQ(c.points.size(), 2u);
  EXPECT_EQ(c.points[0].label, "context=128");
  EXPECT_EQ(c.points[0].shape.lengths("context"), (std::vector<int64_t>{128, 128}));
  EXPECT_EQ(c.points[1].shape.lengths("context"), (std::vector<int64_t>{4096, 4096}));
}

TEST(CaseSweep, StringAndBoolValuesInLabels) {
  const Case c = parse(std::string(kAttention) + "[sweep]\ncausal = [false, true]\n");
  ASSERT_EQ(c.points.size(), 2u);
  EXPECT_EQ(c.points[1].label, "causal=true");
  EXPECT_EQ(c.points[1].shape.word("causal"), "bottom_right");
  EXPECT_EQ(parse("op = \"gemm\"\n[shape]\nm = 1\nn = 1\nk = 1\n[sweep]\nlayout = [\"nn\"]\n").points.at(0).label,
            "layout=nn");
}

TEST(CaseSweep, ErrorsNameThePointAndTheValue) {
  expect_has(error_of("op = \"attention\"\n[shape]\nbatch = 1\nheads = 8\nhead_dim = 64\n[sweep]\nseq_q = [128, 0]\n"),
             {"cases/t.toml:7:15: error: sweep point seq_q=0: sweep.seq_q[1] must be at least 1, got 0"});
  expect_has(error_of("op = \"attention\"\n[shape]\nbatch = 1\nheads = 12\nseq_q = 4\nhead_dim = 64\n"
                      "[sweep]\nkv_heads = [4, 5]\n"),
             {"8:16", "sweep point kv_heads=5: heads (12) must be a multiple of kv_heads (5)"});
  expect_has(error_of(std::string(kAttention) + "[sweep]\ndtype = [\"fp16\", \"fp9\"]\n"),
             {"sweep point dtype=fp9: unknown sweep.dtype[1] 'fp9'"});
}

TEST(CaseSweep, KeyInShapeAndSweepIsAnError) {
  expect_has(error_of(std::string(kAttention) + "[sweep]\nseq_q = [1, 2]\n"),
             {"5:9", "shape.seq_q is also swept; remove one"});
  expect_has(error_of(std::string("dtype = \"fp16\"\n") + kAttention + "[sweep]\ndtype = [\"bf16\"]\n"),
             {"1:9", "dtype is also swept; remove one"});
}

TEST(CaseSweep, ValuesMustBeNonEmptyLists) {
  expect_has(error_of(std::string(kAttention) + "[sweep]\nwindow = 4\n"),
             {"8:10", "sweep.window must be a non-empty list", "got integer"});
  expect_has(error_of(std::string(kAttention) + "[sweep]\nwindow = []\n"), {"sweep.window must be a non-empty list"});
  expect_has(error_of(std::string(kAttention) + "[sweep]\nwindow = [[1]]\n"),
             {"sweep.window[0] must be an integer, got list"});
}

// ---------------------------------------------------------------------------
// --set overrides

TEST(CaseSet, ScalarReplacesTheFileValue) {
  const Case c = parse(kAttention, {"shape.seq_q=8192", "verify.trials=5", "name=big"});
  EXPECT_EQ(c.name, "big");
  EXPECT_EQ(c.points.at(0).shape.num("seq_q"), 8192);
  EXPECT_EQ(c.points[0].shape.num("seq_k"), 8192);
  EXPECT_EQ(c.points[0].verify.trials, 5);  // [verify] did not exist in the file
}

TEST(CaseSet, BareWordIsAString) {
  const Case c = parse(kAttention, {"dtype=bf16", "bench.mode = hot", "kernels=[\"cublas\"]"});
  EXPECT_EQ(c.points.at(0).dtype, DType::bf16);
  EXPECT_EQ(c.points[0].bench.mode, TimingMode::hot);
  EXPECT_EQ(c.points[0].kernels, (std::vector<std::string>{"cublas", "naive"}));
  EXPECT_EQ(parse(kAttention, {"dtype=\"fp16\""}).points.at(0).dtype, DType::fp16);
}

TEST(CaseSet, ArrayOnAShapeKeyIsASweep) {
  // The override replaces the file's fixed value and its [sweep] entry; file sweeps stay outer.
  const char* text = R"(op = "attention"
[shape]
seq_q = 128
head_dim = 64
[sweep]
batch = [1, 2]
heads = [16]
)";
  const Case c = parse(text, {"shape.seq_q=[1024,2048]", "shape.heads=[4, 8]"});
  ASSERT_EQ(c.points.size(), 8u);
  EXPECT_EQ(c.points[0].label, "batch=1 seq_q=1024 heads=4");
  EXPECT_EQ(c.points[1].label, "batch=1 seq_q=1024 heads=8");
  EXPECT_EQ(c.points[2].label, "batch=1 seq_q=2048 heads=4");
  EXPECT_EQ(c.points[7].label, "batch=2 seq_q=2048 heads=8");
  EXPECT_EQ(c.points[7].shape.num("seq_q"), 2048);
  EXPECT_EQ(c.points[7].shape.num("heads"), 8);
  // A sweep override also replaces a fixed value: no "also swept" conflict.
  EXPECT_EQ(parse(kAttention, {"sweep.seq_q=[1,2]"}).points.size(), 2u);
}

TEST(CaseSet, ScalarReplacesASweep) {
  const Case c = parse(std::string(kDecode) + "[sweep]\nheads = [4, 8]\n", {"shape.heads=16", "shape.context=[1,2,3]"});
  ASSERT_EQ(c.points.size(), 1u);
  EXPECT_EQ(c.points[0].label, "");
  EXPECT_EQ(c.points[0].shape.num("heads"), 16);
  EXPECT_EQ(c.points[0].shape.lengths("context"), (std::vector<int64_t>{1, 2, 3}));  // a list of ints is per sequence
}

TEST(CaseSet, ContextListOfListsIsASweep) {
  const Case c = parse(kDecode, {"shape.context=[[1,2,3],[4,5,6]]"});
  ASSERT_EQ(c.points.size(), 2u);
  EXPECT_EQ(c.points[1].label, "context=[4,5,6]");
  EXPECT_EQ(c.points[1].shape.lengths("context"), (std::vector<int64_t>{4, 5, 6}));
}

TEST(CaseSet, DtypeListIsASweep) {
  const Case c = parse(std::string("dtype = \"fp32\"\n") + kAttention, {"dtype=[\"fp16\",\"bf16\"]"});
  ASSERT_EQ(c.points.size(), 2u);
  EXPECT_EQ(c.points[1].label, "dtype=bf16");
  EXPECT_EQ(c.points[1].dtype, DType::bf16);
}

TEST(CaseSet, ErrorsPointAtTheOverride) {
  expect_has(error_of(kAttention, {"shape.seq_len=5"}),
             {"--set shape.seq_len=5: error: unknown key shape.seq_len (did you mean seq_q"});
  expect_has(error_of(kAttention, {"shap.seq_q=5"}),
             {"--set shap.seq_q=5: error: unknown key shap (did you mean shape?)"});
  expect_has(error_of(kAttention, {"shape.heads=0"}),
             {"--set shape.heads=0: error: shape.heads must be at least 1, got 0"});
  expect_has(error_of(kAttention, {"shape.seq_q=[8, 0]"}),
             {"--set shape.seq_q=[8, 0]: error: sweep point seq_q=0: sweep.seq_q[1] must be at least 1"});
  expect_has(error_of(kAttention, {"dtype=fp61"}),
             {"--set dtype=fp61: error: unknown dtype 'fp61' (did you mean fp16?)"});
}

TEST(CaseSet, Malformed) {
  expect_has(error_of(kAttention, {"shape.seq_q"}), {"--set shape.seq_q: error: expected KEY=VALUE"});
  expect_has(error_of(kAttention, {"=5"}), {"--set =5: error: expected KEY=VALUE"});
  expect_has(error_of(kAttention, {"shape..seq_q=5"}), {"--set shape..seq_q=5: error: bad key 'shape..seq_q'"});
  expect_has(error_of(kAttention, {"shape.seq_q=[1,"}), {"--set shape.seq_q=[1,: error: bad value '[1,'"});
  expect_has(error_of(kAttention, {"shape.seq_q="}), {"bad value ''"});
  expect_has(error_of(kAttention, {"shape.seq_q=1\nop=\"gemm\""}),
             {"--set shape.seq_q=1\\nop=", "must be on one line"});
  expect_has(error_of(std::string("dtype = \"fp16\"\n") + kAttention, {"dtype.x=1"}),
             {"--set dtype.x=1: error: dtype is a string, not a table"});
  expect_has(error_of(kAttention, {"dtype.x=1"}), {"--set dtype.x=1: error: dtype must be a string, got table"});
}

// Keys TOML reads as nothing ('#' starts a comment) or as an empty name (issue 45: `#=1`
// parsed to an empty table that the path walk dereferenced).
TEST(CaseSet, KeysThatNameNothing) {
  for (const char* set : {"#=1", " #x=1", "#shape.seq_q=1", "# =1"})
    expect_has(error_of(kAttention, {set}), {"--set ", ": error: bad key '", "'#' starts a TOML comment"});
  for (const char* set : {"\"\"=1", "''=1", "\"\".x=1", "shape.\"\"=1", "shape.''=1", "\" \"=1", "''.''=1",
                          "\"\".seq_q=1", "shape.\"\t\"=1"})
    expect_has(error_of(kAttention, {set}), {"--set ", ": error: bad key '", "an empty or blank part"});
  for (const char* set : {".=1", "..=1", "...=1", "a.#=1", "shape.#=1", "shape.seq_q #=1", "\"#\".=1"})
    expect_has(error_of(kAttention, {set}), {"--set ", ": error: bad key '"});
  for (const char* set : {"=1", " =1", "\t=1", " \t =1"})
    expect_has(error_of(kAttention, {set}), {"--set ", ": error: expected KEY=VALUE"});
  // A quoted key with a '#' in it is a name like any other: an unknown key.
  expect_has(error_of(kAttention, {"shape.\"#\"=1"}), {"unknown key shape.#"});
}

// ---------------------------------------------------------------------------
// [inputs]: input distributions

TEST(CaseInputs, AbsentIsTheOpsOwnDraw) {
  const Case c = parse(kAttention);
  EXPECT_TRUE(c.points[0].inputs.is_default());
  EXPECT_EQ(c.points[0].inputs.summary(), "");
  EXPECT_TRUE(c.points[0].inputs.of("q").is_default());
}

TEST(CaseInputs, SectionAndPerTensorTablesMergeKeyByKey) {
  const Case c = parse(std::string(kAttention) + R"(
[inputs]
distribution = "large"
scale = 2.0
offset = 1
[inputs.k]
distribution = "constant"
scale = 0
offset = 0.5
[inputs.v]
distribution = "pareto"
)");
  const InputsSpec& in = c.points[0].inputs;
  EXPECT_FALSE(in.is_default());
  EXPECT_EQ(in.all.distribution, Distribution::large);
  EXPECT_EQ(in.all.scale, 2.0);
  EXPECT_EQ(in.all.offset, 1.0);
  EXPECT_EQ(in.of("q").distribution, Distribution::large);
  EXPECT_EQ(in.of("k").distribution, Distribution::constant);
  EXPECT_EQ(in.of("k").scale, 0.0);
  EXPECT_EQ(in.of("k").offset, 0.5);
  EXPECT_EQ(in.of("v").distribution, Distribution::pareto);  // the section's scale and offset stay
  EXPECT_EQ(in.of("v").scale, 2.0);
  EXPECT_EQ(in.of("v").offset, 1.0);
  EXPECT_EQ(in.summary(), "inputs: large scale 2 offset 1, k constant scale 0 offset 0.5, v pareto scale 2 offset 1");
  EXPECT_EQ(c.points[0].label, "");  // not swept: no label, no pins
  EXPECT_TRUE(c.points[0].pins.empty());
}

TEST(CaseInputs, EveryWordAndTheOpsTensorNames) {
  for (const char* word : {"default", "normal", "uniform", "large", "outliers", "pareto", "constant"}) {
    const Case c = parse(std::string(kAttention) + "[inputs]\ndistribution = \"" + word + "\"\n");
    EXPECT_EQ(distribution_name(c.points[0].inputs.all.distribution), std::string(word));
  }
  parse("op = \"softmax\"\n[shape]\nrows = 4\ncols = 8\n[inputs.x]\ndistribution = \"large\"\n");
  parse("op = \"gemm\"\n[shape]\nm = 4\nn = 8\nk = 16\n[inputs.a]\nscale = 3\n[inputs.b]\noffset = -1\n");
  parse(std::string(kDecode) + "[inputs.q]\ndistribution = \"outliers\"\n");
  parse(std::string(kPaged) + "[inputs.v]\ndistribution = \"constant\"\nscale = 0\n");
  // An inline table is a table too.
  parse(std::string(kAttention) + "[inputs]\nk = { distribution = \"constant\", scale = 0 }\n");
}

TEST(CaseInputs, Errors) {
  const std::string a = kAttention;
  expect_has(error_of(a + "[inputs]\ndistribution = \"larg\"\n"),
             {"cases/t.toml:8:16: error: unknown inputs.distribution 'larg' (did you mean large?)"});
  expect_has(error_of(a + "[inputs.kk]\nscale = 1\n"),
             {"cases/t.toml:7:9: error: unknown input tensor inputs.kk for op attention (did you mean k?)"});
  expect_has(error_of(a + "[inputs.x]\nscale = 1\n"), {"unknown input tensor inputs.x for op attention", "q, k, v"});
  expect_has(error_of(a + "[inputs]\nscale = -1\n"),
             {"cases/t.toml:8:9: error: inputs.scale must be a finite number between 0 and"});
  expect_has(error_of(a + "[inputs.k]\noffset = nan\n"), {"inputs.k.offset must be a finite number", "got nan"});
  expect_has(error_of(a + "[inputs]\nscale = inf\n"), {"inputs.scale must be a finite number", "got inf"});
  expect_has(error_of(a + "[inputs]\nscale = \"big\"\n"), {"inputs.scale must be a number, got string"});
  expect_has(error_of(a + "[inputs]\ndistributon = \"large\"\n"),
             {"cases/t.toml:8:1: error: unknown key inputs.distributon (did you mean distribution?)"});
  expect_has(error_of(a + "[inputs]\nq = 3\n"), {"unknown key inputs.q", "[inputs.NAME] per input tensor"});
  expect_has(error_of(a + "[inputs.k]\nscael = 1\n"), {"unknown key inputs.k.scael (did you mean scale?)"});
  expect_has(error_of("inputs = 3\n" + a), {"cases/t.toml:1:10: error: inputs must be a table, got integer"});
}

TEST(CaseInputs, SetOverrides) {
  {
    const Case c = parse(kAttention, {"inputs.distribution=large"});
    EXPECT_EQ(c.points[0].inputs.all.distribution, Distribution::large);
    EXPECT_TRUE(c.points[0].pins.empty());
  }
  {
    const Case c = parse(std::string(kAttention) + "[inputs]\ndistribution = \"pareto\"\n", {"inputs.q.scale=3"});
    EXPECT_EQ(c.points[0].inputs.of("q").scale, 3.0);
    EXPECT_EQ(c.points[0].inputs.of("q").distribution, Distribution::pareto);
    EXPECT_EQ(c.points[0].inputs.of("k").scale, std::nullopt);
  }
  expect_has(error_of(kAttention, {"inputs.distribution=larg"}),
             {"--set inputs.distribution=larg: error: unknown inputs.distribution 'larg' (did you mean large?)"});
  expect_has(error_of(kAttention, {"inputs.qq.scale=1"}),
             {"--set inputs.qq.scale=1: error: unknown input tensor inputs.qq for op attention (did you mean q?)"});
  expect_has(error_of(kAttention, {"inputs.q.scale=-2"}),
             {"--set inputs.q.scale=-2: error: inputs.q.scale must be a finite number between 0 and"});
}

// ---------------------------------------------------------------------------
// Finding case files

class CasePaths : public TempDir {
 protected:
  void SetUp() override {
    TempDir::SetUp();
    cases_ = (root_ / "cases").string();
    for (const char* f : {"a.toml", "smoke/c.toml", "smoke/b.toml", "deep/x/d.toml", "one/e.toml", "two/e.toml"})
      write(std::string("cases/") + f, kAttention);
    write("cases/notes.txt", "not a case");
    fs::create_directories(root_ / "empty" / "sub");
  }
  std::string at(const std::string& rel) const { return (root_ / "cases" / rel).string(); }
  std::string error_of_paths(const std::string& arg) const {
    try {
      resolve_case_paths(arg, cases_);
    } catch (const InputError& e) {
      return e.what();
    }
    ADD_FAILURE() << "expected an InputError for " << arg;
    return "";
  }
  std::string cases_;
};

TEST_F(CasePaths, FileAndDirectory) {
  EXPECT_EQ(resolve_case_paths(at("a.toml"), cases_), (std::vector<std::string>{at("a.toml")}));
  EXPECT_EQ(resolve_case_paths(at("smoke"), cases_),
            (std::vector<std::string>{at("smoke/b.toml"), at("smoke/c.toml")}));
}

TEST_F(CasePaths, AllIsEveryCaseSortedAndRecursive) {
  EXPECT_EQ(resolve_case_paths("all", cases_),
            (std::vector<std::string>{at("a.toml"), at("deep/x/d.toml"), at("one/e.toml"), at("smoke/b.toml"),
                                      at("smoke/c.toml"), at("two/e.toml")}));
}

TEST_F(CasePaths, BareNames) {
  EXPECT_EQ(resolve_case_paths("a", cases_), (std::vector<std::string>{at("a.toml")}));
  EXPECT_EQ(resolve_case_paths("smoke", cases_), (std::vector<std::string>{at("smoke/b.toml"), at("smoke/c.toml")}));
  EXPECT_EQ(resolve_case_paths("d", cases_), (std::vector<std::string>{at("deep/x/d.toml")}));
  EXPECT_EQ(resolve_case_paths("smoke/b.toml", cases_), (std::vector<std::string>{at("smoke/b.toml")}));
}

TEST_F(CasePaths, Errors) {
  expect_has(error_of_paths("zzz"), {"no case named 'zzz' under", cases_.c_str()});
  // A near name is suggested, as its relative name.
  expect_has(error_of_paths("smoke/cc"), {"no case named 'smoke/cc'", "(did you mean smoke/c?)"});
  expect_has(error_of_paths((root_ / "nope.toml").string()),
             {(root_ / "nope.toml").string().c_str(), "no such case file"});
  // Never guessed between: the names to type instead.
  expect_has(error_of_paths("e"), {"ambiguous", "2 case files have it; type one/e or two/e"});
  expect_has(error_of_paths((root_ / "empty").string()), {(root_ / "empty").string().c_str(), "no .toml case files"});
}

// vLLM's batch grammar, as its attention benchmarks write batches (the ragged op's case format).
TEST(BatchMix, ReadsVllmsSegments) {
  using S = BatchSequence;
  EXPECT_EQ(parse_batch_mix("q2k"), (std::vector<S>{{2048, 2048}}));
  EXPECT_EQ(parse_batch_mix("8s1k"), std::vector<S>(8, S{1, 1024}));
  const std::vector<S> mix = parse_batch_mix("2q2k_32q1s1k");
  ASSERT_EQ(mix.size(), 34u);
  EXPECT_EQ(mix.front(), (S{2048, 2048}));
  EXPECT_EQ(mix.back(), (S{1, 1024}));
  EXPECT_EQ(parse_batch_mix("spec4s1k_q64s8k_s77"), (std::vector<S>{{4, 1024}, {64, 8192}, {1, 77}}));
  EXPECT_EQ(parse_batch_mix("3q5s18"), std::vector<S>(3, S{5, 18}));
}

TEST(BatchMix, SaysWhereItStops) {
  auto error_of = [](const std::string& text) {
    try {
      parse_batch_mix(text);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("").find("an empty batch"), std::string::npos);
  EXPECT_NE(error_of("2x1k").find("expected q, s or spec at character 2"), std::string::npos);
  EXPECT_NE(error_of("q5s3").find("not 5 over 3"), std::string::npos);
  EXPECT_NE(error_of("q2k__s1k").find("at character 5"), std::string::npos);
  EXPECT_NE(error_of("0q1").find("a count of at least 1"), std::string::npos);
  EXPECT_NE(error_of("spec4").find("s<keys> after spec<tokens>"), std::string::npos);
  EXPECT_NE(error_of("q0").find("a length from 1 to 2^30"), std::string::npos);
  EXPECT_NE(error_of("q2k s1k").find("'_' between segments"), std::string::npos);
  EXPECT_NE(error_of("99999999999q1").find("below 2^30"), std::string::npos);
}

}  // namespace
}  // namespace attnbench
