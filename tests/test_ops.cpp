// The work the ops count (attention's unmasked (query, key) pairs, each op's tensors,
// so TFLOP/s and GB/s mean what docs/measuring.md says), and what the op registry
// promises every op: keys the loader can read, variants, a problem for every case.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "app/case.hpp"
#include "app/op.hpp"
#include "app/ops/heads.hpp"
#include "app/problem.hpp"

using namespace attnbench;

namespace {

AttentionMask mask(int64_t sq, int64_t sk, bool causal, int64_t window) { return {sq, sk, causal, window}; }

// The definition, pair by pair.
int64_t brute_pairs(const AttentionMask& s) {
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

CasePoint point(const std::string& toml) { return parse_case(toml, "t.toml", {}).points.at(0); }

}  // namespace

TEST(AttentionPairs, CausalSquareIsATriangle) {
  EXPECT_EQ(mask(4, 4, false, 0).pairs(), 16);
  EXPECT_EQ(mask(4, 4, true, 0).pairs(), 10);  // 1 + 2 + 3 + 4
}

TEST(AttentionPairs, BottomRightAlignment) {
  // seq_q 2 over seq_k 5: query 0 sits at position 3 and sees 4 keys, query 1 all 5.
  EXPECT_EQ(mask(2, 5, true, 0).visible_keys(0), 4);
  EXPECT_EQ(mask(2, 5, true, 0).visible_keys(1), 5);
  // seq_q 5 over seq_k 2: the first three queries see nothing.
  const AttentionMask s = mask(5, 2, true, 0);
  EXPECT_EQ(s.visible_keys(0), 0);
  EXPECT_EQ(s.visible_keys(2), 0);
  EXPECT_EQ(s.visible_keys(3), 1);
  EXPECT_EQ(s.pairs(), 3);
}

TEST(AttentionPairs, WindowOnOneOrBothSides) {
  EXPECT_EQ(mask(10, 10, true, 3).visible_keys(9), 3);   // keys 7, 8, 9
  EXPECT_EQ(mask(10, 10, false, 3).visible_keys(5), 5);  // keys 3..7
  EXPECT_EQ(mask(10, 10, false, 3).visible_keys(0), 3);  // keys 0..2
}

TEST(AttentionPairs, MatchesTheDefinitionEverywhere) {
  for (int64_t sq : {1, 3, 17})
    for (int64_t sk : {1, 4, 17, 30})
      for (bool causal : {false, true})
        for (int64_t w : {0, 1, 2, 5, 40}) {
          const AttentionMask s = mask(sq, sk, causal, w);
          ASSERT_EQ(s.pairs(), brute_pairs(s)) << sq << " " << sk << " " << causal << " " << w;
        }
}

TEST(Work, AttentionFlopsAndBytes) {
  const CasePoint p = point(
      "op = \"attention\"\ndtype = \"bf16\"\n[shape]\nbatch = 2\nheads = 8\nkv_heads = 2\nseq_q = 128\nseq_k = 256\n"
      "head_dim = 64\ncausal = true\n");
  const auto problem = make_problem(p);
  const Work w = problem->work();
  EXPECT_DOUBLE_EQ(w.flops, 4.0 * 2 * 8 * 64 * static_cast<double>(mask(128, 256, true, 0).pairs()));
  // q and o: 2 x 128 x 8 x 64; k and v: 2 x 256 x 2 x 64; two bytes each.
  EXPECT_DOUBLE_EQ(w.bytes, 2.0 * (2 * 2 * 128 * 8 * 64 + 2 * 2 * 256 * 2 * 64));
  EXPECT_EQ(problem->output_rows(), 2 * 128 * 8);
  EXPECT_EQ(problem->output_cols(), 64);
  const Coord c = problem->coord((1 * 128 + 5) * 8 + 3, 7);
  EXPECT_EQ(c.b, 1);
  EXPECT_EQ(c.h, 3);
  EXPECT_EQ(c.i, 5);
  EXPECT_EQ(c.d, 7);
  EXPECT_EQ(problem->output_tensor().layout(), "[batch, seq_q, heads, head_dim]");
  EXPECT_EQ(problem->output_tensor().shape(), (std::vector<int64_t>{2, 128, 8, 64}));
}

TEST(Work, MustCheckRowsAreTheBlindQueries) {
  const CasePoint p =
      point("op = \"attention\"\n[shape]\nbatch = 2\nheads = 3\nseq_q = 6\nseq_k = 2\nhead_dim = 8\ncausal = true\n");
  const auto rows = make_problem(p)->must_check_rows();  // queries 0..3 see no key
  ASSERT_FALSE(rows.empty());
  for (int64_t r : rows) EXPECT_LT(r / 3 % 6, 4) << r;  // i = row / heads % seq_q
}

// The kernels' RoPE table: (cos, sin) of position·theta^(-2i/rotary_dim) in fp32, row 0 at
// position `first` (negative for bottom-right queries before the first key).
TEST(Rope, TableHoldsTheAnglesOfItsPositions) {
  const CasePoint p = point(
      "op = \"attention\"\n[shape]\nbatch = 1\nheads = 1\nseq_q = 4\nhead_dim = 8\nrope = \"neox\"\n"
      "rotary_dim = 4\nrope_theta = 100\n");
  const RopeOptions rope(p.shape, -2, 3);
  ASSERT_TRUE(rope.on());
  EXPECT_EQ(rope.reference().rotary_dim, 4);
  const std::vector<float> t = rope.table();  // positions -2, -1, 0; pairs 0 (freq 1) and 1 (freq 1/10)
  ASSERT_EQ(t.size(), 3u * 2 * 2);
  const double freq[2] = {1.0, 0.1};
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(t[(r * 2 + i) * 2], static_cast<float>(std::cos((r - 2) * freq[i]))) << r << " " << i;
      EXPECT_EQ(t[(r * 2 + i) * 2 + 1], static_cast<float>(std::sin((r - 2) * freq[i]))) << r << " " << i;
    }
  const RopeTable d = rope.device(t.data());
  EXPECT_EQ(d.style, RopeTable::neox);
  EXPECT_EQ(d.first, -2);
  EXPECT_EQ(d.rows, 3);
  EXPECT_FALSE(
      RopeOptions(point("op = \"attention\"\n[shape]\nbatch = 1\nheads = 1\nseq_q = 4\nhead_dim = 8\n").shape, 0, 3)
          .device(t.data())
          .on());
}

// The block masks the sparse keys build: the diagonal and its neighbours, the global rows and
// columns, distinct random blocks per head and query block, ascending lists; work() counts
// live pairs only, and all blocks live is the dense count.
TEST(BlockSparse, LocalGlobalAndRandomBlocks) {
  const CasePoint p = point(
      "op = \"attention\"\n[shape]\nbatch = 1\nheads = 2\nseq_q = 1024\nhead_dim = 64\nsparse_block = 128\n"
      "sparse_local = 1\nsparse_global = 1\n");
  const SparseLayout l = block_sparse(p.shape, 2, 1024, 1024, 0, 7);
  ASSERT_EQ(l.q_blocks, 8);
  ASSERT_EQ(l.k_blocks, 8);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t b = 0; b < 8; ++b)
      for (int64_t c = 0; c < 8; ++c)
        EXPECT_EQ(l.live[(h * 8 + b) * 8 + c], b == 0 || c == 0 || std::abs(b - c) <= 1) << h << b << c;
  EXPECT_EQ(l.num[0], 8);  // the global query block sees all
  EXPECT_EQ(l.num[5], 4);  // 0, 4, 5, 6
  EXPECT_EQ(std::vector<int32_t>(&l.idx[5 * 8], &l.idx[5 * 8 + 4]), (std::vector<int32_t>{0, 4, 5, 6}));

  const std::string random =
      "op = \"attention\"\n[shape]\nbatch = 1\nheads = 2\nseq_q = 1024\nhead_dim = 64\nsparse_block = 64\n"
      "sparse_random = 3\n";
  const SparseLayout r = block_sparse(point(random).shape, 2, 1024, 1024, 0, 7);
  for (int64_t hb = 0; hb < 2 * 16; ++hb) {
    const int32_t n = r.num[hb];
    EXPECT_TRUE(n == 3 || n == 4) << hb;  // the diagonal, and three distinct draws that may include it
    for (int32_t i = 1; i < n; ++i) EXPECT_LT(r.idx[hb * 16 + i - 1], r.idx[hb * 16 + i]);
  }
  EXPECT_EQ(r.live, block_sparse(point(random).shape, 2, 1024, 1024, 0, 7).live);  // reproducible
  EXPECT_NE(r.live, block_sparse(point(random).shape, 2, 1024, 1024, 0, 8).live);  // from the seed
  EXPECT_NE(std::vector<uint8_t>(r.live.begin(), r.live.begin() + 256),
            std::vector<uint8_t>(r.live.begin() + 256, r.live.end()));  // per head

  const std::string all =
      "op = \"attention\"\n[shape]\nbatch = 2\nheads = 2\nseq_q = 300\nhead_dim = 64\n"
      "causal = true\nsparse_block = 64\nsparse_local = 8\n";
  const std::string dense =
      "op = \"attention\"\n[shape]\nbatch = 2\nheads = 2\nseq_q = 300\nhead_dim = 64\n"
      "causal = true\n";
  EXPECT_EQ(make_problem(point(all))->work().flops, make_problem(point(dense))->work().flops);
  const std::string diag =
      "op = \"attention\"\n[shape]\nbatch = 1\nheads = 1\nseq_q = 256\nhead_dim = 64\n"
      "sparse_block = 128\n";
  EXPECT_DOUBLE_EQ(make_problem(point(diag))->work().flops, 4.0 * 64 * 2 * 128 * 128);  // two diagonal blocks
}

TEST(Work, GemmAndSoftmax) {
  const Work w =
      make_problem(point("op = \"gemm\"\ndtype = \"fp16\"\n[shape]\nbatch = 3\nm = 10\nn = 20\nk = 30\n"))->work();
  EXPECT_DOUBLE_EQ(w.flops, 2.0 * 3 * 10 * 20 * 30);
  EXPECT_DOUBLE_EQ(w.bytes, 2.0 * 3 * (10 * 30 + 30 * 20 + 10 * 20));
  EXPECT_DOUBLE_EQ(make_problem(point("op = \"softmax\"\n[shape]\nrows = 7\ncols = 9\n"))->work().bytes,
                   2.0 * 4 * 7 * 9);
}

TEST(Work, GemmLayoutShapesB) {
  const auto nt = make_problem(point("op = \"gemm\"\n[shape]\nm = 3\nn = 4\nk = 5\n"));
  EXPECT_EQ(nt->input_tensors().at(1)->shape(), (std::vector<int64_t>{1, 4, 5}));
  EXPECT_EQ(nt->input_tensors().at(1)->layout(), "[batch, n, k] (C = A B^T)");
  const auto nn = make_problem(point("op = \"gemm\"\n[shape]\nlayout = \"nn\"\nm = 3\nn = 4\nk = 5\n"));
  EXPECT_EQ(nn->input_tensors().at(1)->shape(), (std::vector<int64_t>{1, 5, 4}));
}

// The bank-conflict lesson (issue 52): gemm's smem_tiled pair carries the profiler counters to
// read (`run --profile` prints them under the row), the unpadded half runs only where named,
// and the two claim the same points (the pad is their only difference).
TEST(GemmLesson, TheBankConflictPairNamesTheCounterAndRunsTheUnpaddedHalfOnlyWhenNamed) {
  const auto g = make_problem(point("op = \"gemm\"\ndtype = \"fp32\"\n[shape]\nm = 64\nn = 64\nk = 64\n"));
  for (const char* v : {"smem_tiled_unpadded", "smem_tiled"})
    EXPECT_NE(g->profile_note(v).find("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"), std::string::npos)
        << v;
  EXPECT_EQ(g->profile_note("cublas"), "");
  EXPECT_EQ(g->profile_note("no_such_variant"), "");
  DeviceCaps caps;
  caps.sm_count = 132, caps.cc_major = 9, caps.smem_per_block_optin = 227 * 1024;
  const std::vector<VariantChoice> choices = g->variants(caps);
  auto find = [&](const std::string& name) {
    const auto it = std::find_if(choices.begin(), choices.end(), [&](const VariantChoice& c) { return c.name == name; });
    EXPECT_NE(it, choices.end()) << name;
    return it;
  };
  const auto unpadded = find("smem_tiled_unpadded"), padded = find("smem_tiled");
  EXPECT_FALSE(unpadded->applies);
  EXPECT_TRUE(padded->applies);
  EXPECT_EQ(unpadded->skip, padded->skip);
  EXPECT_EQ(unpadded + 1, padded) << "the pair sits together in the ladder, the conflicted half first";
  const std::vector<std::string> defaults = g->default_variants(caps);
  EXPECT_EQ(std::count(defaults.begin(), defaults.end(), "smem_tiled_unpadded"), 0);
}

TEST(Work, PipelineStepIsThePosition) {
  const auto p = make_problem(point(
      "op = \"pipeline\"\n[shape]\nbatch = 2\nheads = 4\nkv_heads = 2\nhead_dim = 8\nprompt = 10\ngenerate = 3\n"));
  // o [generate, batch, heads, head_dim]: row (step * batch + b) * heads + h, i = prompt + step.
  const Coord c = p->coord((2 * 2 + 1) * 4 + 3, 5);
  EXPECT_EQ(c.i, 12);
  EXPECT_EQ(c.b, 1);
  EXPECT_EQ(c.h, 3);
  EXPECT_EQ(c.d, 5);
}

// Every op in the registry: unique names, keys a docs table can list, a baseline, and
// a problem built from the smallest case its required keys allow.
// The model's decode runs over the dense cache or, with a paged variant as the row's decode
// attention, over vLLM's paged cache; that cache is allocated only for a case that can run such a
// row, and a row that has none says so instead of launching.
TEST(ModelPairs, PagedDecodeVariantsPairWithEveryPrefill) {
  const std::string model =
      "op = \"model\"\ndtype = \"bf16\"\n[shape]\nlayers = 1\nd_model = 128\nheads = 2\nvocab = 50\n"
      "max_positions = 40\nprompt_len = 17\ngenerate = 5\nbatch = 2\n";
  const auto choice = [](const std::vector<VariantChoice>& all, const std::string& name) {
    for (const VariantChoice& v : all)
      if (v.name == name) return v;
    ADD_FAILURE() << "no variant " << name;
    return VariantChoice{};
  };
  const auto paged = make_problem(point("kernels = [\"flash_mma+paged_flash+small_linear\"]\n" + model));
  const std::vector<VariantChoice> with = paged->variants(assumed_caps());
  EXPECT_EQ(choice(with, "flash_mma+paged_flash+small_linear").skip, "");
  EXPECT_EQ(choice(with, "flash_mma+paged_flash+launches").skip, "");
  EXPECT_EQ(choice(with, "naive+v1+launches").skip, "");
  EXPECT_EQ(choice(with, "flash_mma+split_kv+small_linear").skip, "");  // the dense cache is always there
  EXPECT_NE(choice(with, "flash_mma+v2+launches").note.find("paged decode v2, decode step launches"),
            std::string::npos);

  const auto dense = make_problem(point("kernels = [\"flash_mma+split_kv+launches\"]\n" + model));
  EXPECT_EQ(choice(dense->variants(assumed_caps()), "flash_mma+paged_flash+launches").skip,
            "paged decode: the case names no paged pair");
  // Its default is still the dense cache's fastest pair, on the fused step at batch 2.
  const std::string fastest = make_problem(point(model))->default_variants(assumed_caps()).at(0);
  EXPECT_NE(fastest.find("+split_kv+small_linear"), std::string::npos) << fastest;
  EXPECT_THROW(point("kernels = [\"flash_mma+paged\"]\n" + model), InputError);
  // The pair names of before the step ladder (issue 51) name no row now.
  EXPECT_THROW(point("kernels = [\"flash_mma+split_kv\"]\n" + model), InputError);
}

// The decode step is a ladder, each rung a row: launches at every batch, small_linear to batch
// 8 (the default there, launches past it), and the retired key `fused` refused with the names.
TEST(ModelPairs, DecodeStepRungsAreRows) {
  const std::string model =
      "op = \"model\"\ndtype = \"bf16\"\n[shape]\nlayers = 1\nd_model = 128\nheads = 2\nvocab = 50\n"
      "max_positions = 40\nprompt_len = 17\ngenerate = 5\n";
  const auto skip = [&](const std::string& extra, const std::string& name) {
    for (const VariantChoice& v : make_problem(point(model + extra))->variants(assumed_caps()))
      if (v.name == name) return v.skip;
    ADD_FAILURE() << "no variant " << name;
    return std::string("?");
  };
  EXPECT_EQ(skip("batch = 8\n", "flash_mma+split_kv+small_linear"), "");
  EXPECT_EQ(skip("batch = 8\n", "flash_mma+split_kv+launches"), "");
  EXPECT_EQ(skip("batch = 9\n", "flash_mma+split_kv+small_linear"),
            "decode step: batch 9: the fused decode step takes 1 to 8");
  EXPECT_EQ(skip("batch = 9\n", "flash_mma+split_kv+launches"), "");
  const auto fastest = [&](const std::string& extra) {
    return make_problem(point(model + extra))->default_variants(assumed_caps()).at(0);
  };
  EXPECT_EQ(fastest("batch = 8\n").substr(fastest("batch = 8\n").rfind('+')), "+small_linear");
  EXPECT_EQ(fastest("batch = 9\n").substr(fastest("batch = 9\n").rfind('+')), "+launches");
  // Rung order within a pair: launches, then small_linear; persistent after every pair.
  std::vector<std::string> names;
  for (const VariantChoice& v : make_problem(point(model + "batch = 1\n"))->variants(assumed_caps()))
    names.push_back(v.name);
  const auto at = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) - names.begin(); };
  EXPECT_EQ(at("naive+split_kv+small_linear"), at("naive+split_kv+launches") + 1);
  EXPECT_LT(at("flash_mma+paged_flash+small_linear"), at("naive+persistent"));
  try {
    point(model + "batch = 1\nfused = false\n");
    ADD_FAILURE() << "fused was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("PREFILL+DECODE+launches for fused = false"), std::string::npos) << e.what();
  }
}

// mha's fusion ladder: each pair on both steps, launches first; the epilogue step run by the GEMM
// rungs that have an epilogue and refused, with the GEMM's reason, by the rest; the default the
// fastest pair on the highest step its GEMM takes; each step checked along its own rounding.
TEST(MhaSteps, EpilogueStepIsARowOfTheGemmsThatHaveOne) {
  const std::string mha = "op = \"mha\"\ndtype = \"bf16\"\n[shape]\nbatch = 2\nseq = 64\nd_model = 256\nheads = 4\n";
  const auto skip = [&](const std::string& extra, const std::string& name) {
    for (const VariantChoice& v : make_problem(point(mha + extra))->variants(assumed_caps()))
      if (v.name == name) return v.skip;
    ADD_FAILURE() << "no variant " << name;
    return std::string("?");
  };
  EXPECT_EQ(skip("", "wgmma_ws+flash_ws+epilogue"), "");
  EXPECT_EQ(skip("", "naive+flash_mma+epilogue"), "");
  EXPECT_EQ(skip("", "cublas+flash_ws+launches"), "");
  EXPECT_EQ(skip("", "cublas+flash_ws+epilogue"),
            "projections: no fused epilogue (bias, column split): naive and wgmma_ws have one");
  // head_dim 40 over 4 heads: q is 160 columns, not whole 64-column boxes.
  EXPECT_EQ(skip("head_dim = 40\n", "wgmma_ws+flash_mma+epilogue"),
            "projections: a column split needs parts of a multiple of 64 columns (the TMA stores' boxes), 16-byte "
            "aligned");
  EXPECT_EQ(skip("head_dim = 40\n", "naive+flash_mma+epilogue"), "");
  const auto problem = make_problem(point(mha));
  EXPECT_EQ(problem->default_variants(assumed_caps()).at(0), "wgmma_ws+flash_ws+epilogue");
  EXPECT_EQ(make_problem(point(mha + "head_dim = 40\n"))->default_variants(assumed_caps()).at(0),
            "wgmma_ws+flash_mma+launches");
  std::vector<std::string> names;
  for (const VariantChoice& v : problem->variants(assumed_caps())) names.push_back(v.name);
  const auto at = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) - names.begin(); };
  EXPECT_EQ(at("cublas+naive+launches"), 0);
  EXPECT_EQ(at("cublas+naive+epilogue"), 1);
  EXPECT_EQ(problem->rounding_path("wgmma_ws+flash_ws+epilogue"), "epilogue");
  EXPECT_EQ(problem->rounding_path("cublas+naive+launches"), "launches");
  EXPECT_THROW(point("kernels = [\"cublas+flash_ws\"]\n" + mha), InputError);  // the pairs of before issue 51
}

// The decode step as one kernel pairs with every prefill, and says what it cannot hold.
TEST(ModelPairs, PersistentStepPairsWithEveryPrefill) {
  const std::string model =
      "op = \"model\"\n[shape]\nlayers = 1\nvocab = 50\nmax_positions = 40\nprompt_len = 17\ngenerate = 5\n";
  const auto skip = [&](const std::string& extra, const std::string& name) {
    for (const VariantChoice& v : make_problem(point(model + extra))->variants(assumed_caps()))
      if (v.name == name) return v.skip;
    ADD_FAILURE() << "no variant " << name;
    return std::string("?");
  };
  const std::string bf16 = "d_model = 128\nheads = 2\n[sweep]\ndtype = [\"bf16\"]\n";
  EXPECT_EQ(skip("batch = 8\n" + bf16, "flash_mma+persistent"), "");
  EXPECT_EQ(skip("batch = 1\n" + bf16, "naive+persistent"), "");
  EXPECT_EQ(skip("batch = 9\n" + bf16, "flash_mma+persistent"),
            "decode step: batch 9: the fused decode step takes 1 to 8");
  // A lane loads an eighth of a value row in whole 16-byte loads: 64 dims at least in bf16, 32 in fp32.
  EXPECT_EQ(skip("batch = 1\nd_model = 128\nheads = 4\n[sweep]\ndtype = [\"bf16\"]\n", "flash_mma+persistent"),
            "decode step: head_dim 32: the persistent step takes multiples of 64 up to 128");
  EXPECT_EQ(skip("batch = 1\nd_model = 128\nheads = 4\n[sweep]\ndtype = [\"fp32\"]\n", "naive+persistent"), "");
  EXPECT_EQ(skip("batch = 1\nd_model = 256\nheads = 1\n[sweep]\ndtype = [\"fp32\"]\n", "naive+persistent"),
            "decode step: head_dim 256: the persistent step takes multiples of 32 up to 128");
  // Not the default: the small_linear step measured faster (bench notes, run 130).
  EXPECT_NE(make_problem(point(model + "batch = 1\n" + bf16))->default_variants(assumed_caps()).at(0).find(
                "+split_kv+small_linear"),
            std::string::npos);
}

TEST(Registry, EveryOpIsComplete) {
  std::set<std::string> names;
  for (const OpSpec& op : ops()) {
    EXPECT_TRUE(names.insert(op.name).second) << op.name;
    EXPECT_EQ(find_op(op.name), &op);
    EXPECT_FALSE(op.summary.empty()) << op.name;
    EXPECT_FALSE(op.variant_names().empty()) << op.name;
    EXPECT_EQ(op.baseline(), op.variant_names().front());
    std::set<std::string> keys;
    for (const KeySpec& k : op.keys) {
      EXPECT_TRUE(keys.insert(k.name).second) << op.name << "." << k.name;
      EXPECT_FALSE(k.meaning.empty()) << op.name << "." << k.name;
      if (k.type == KeyType::variant) EXPECT_NE(find_op(k.variant_of), nullptr) << op.name << "." << k.name;
    }
  }
  EXPECT_EQ(find_op("no-such-op"), nullptr);
}

// A stacked output's reference part by part: each part sees its own row indices, and
// the rows come back in the order asked for, whatever part they belong to.
TEST(Registry, ReferenceByPartKeepsTheOrder) {
  const ref::Rows rows = {7, 0, 5, 2, 3};
  std::vector<int64_t> parts_seen;
  const ref::Matrix m = reference_by_part(rows, 3, 2, [&](int64_t part, const ref::Rows& mine) {
    parts_seen.push_back(part);
    ref::Matrix r(static_cast<int64_t>(mine.size()), 2);
    for (size_t i = 0; i < mine.size(); ++i) r.row(static_cast<int64_t>(i)) << 100.0 * part + mine[i], -1;
    return r;
  });
  EXPECT_EQ(parts_seen, (std::vector<int64_t>{0, 1, 2}));
  for (size_t i = 0; i < rows.size(); ++i)
    EXPECT_EQ(m(static_cast<int64_t>(i), 0), 100.0 * (rows[i] / 3) + rows[i] % 3) << i;
}
