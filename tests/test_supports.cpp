// What the Hopper-only variants (attention flash_wgmma and flash_ws, gemm wgmma) claim and refuse: their
// supports() decide which cases they run on, and a refusal must name a reason a user can act
// on. Checked without a GPU, against the device caps of an H100/H200 and of an A100. Also which
// decode variants take the pipeline's cache append into their kernel, and the split count
// split_kv sizes its workspace for.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/attention/attention.hpp"
#include "kernels/backward/backward.hpp"
#include "kernels/decode/decode.hpp"
#include "kernels/gemm/gemm.hpp"
#include "kernels/paged/paged.hpp"

using namespace attnbench;

namespace {
DeviceCaps caps(int major, int minor) {
  DeviceCaps c;
  c.sm_count = 132;
  c.cc_major = major;
  c.cc_minor = minor;
  c.smem_per_block_optin = 227 * 1024;
  return c;
}
const DeviceCaps kHopper = caps(9, 0), kAmpere = caps(8, 0);

template <class P>
const Variant<P>& variant(const std::vector<Variant<P>>& table, const std::string& name) {
  for (const auto& v : table)
    if (name == v.name) return v;
  throw std::runtime_error("no variant " + name);
}

AttentionParams prefill() {
  AttentionParams p{};
  p.batch = 2;
  p.heads = 32;
  p.kv_heads = 8;
  p.seq_q = 113;
  p.seq_k = 203;
  p.head_dim = 128;
  p.causal = true;
  p.dtype = DType::bf16;
  finish_attention_params(p);
  return p;
}

// The pipeline case's decode step: batch 8, GQA 32:8, d128, bf16.
DecodeParams decode_step() {
  DecodeParams p{};
  p.batch = 8;
  p.heads = 32;
  p.kv_heads = 8;
  p.head_dim = 128;
  p.max_context = 1152;
  p.longest_context = 1100;
  p.dtype = DType::bf16;
  finish_decode_params(p);
  return p;
}

GemmParams gemm(GemmLayout layout, int64_t n, int64_t k) {
  GemmParams p{};
  p.m = 100;
  p.n = n;
  p.k = k;
  p.layout = layout;
  p.dtype = DType::fp16;
  return p;
}
}  // namespace

TEST(FlashWgmma, ClaimsD128CausalGqaOnHopper) {
  EXPECT_EQ(variant(attention_variants(), "flash_wgmma").supports(prefill(), kHopper), "");
}

TEST(FlashWgmma, ClaimsWindowAndAlibi) {
  const auto& wg = variant(attention_variants(), "flash_wgmma");
  AttentionParams p = prefill();
  p.window = 16;
  EXPECT_EQ(wg.supports(p, kHopper), "");
  p = prefill();
  p.score.alibi = true;
  EXPECT_EQ(wg.supports(p, kHopper), "");
}

TEST(FlashWgmma, RefusesWhatOnlyFlashMmaHasAndSaysSo) {
  const auto& wg = variant(attention_variants(), "flash_wgmma");
  const auto& mma = variant(attention_variants(), "flash_mma");
  AttentionParams p = prefill();
  p.sparse.block = 128;
  EXPECT_NE(wg.supports(p, kHopper).find("block-sparse"), std::string::npos);
  p = prefill();
  p.head_dim = 64;
  finish_attention_params(p);
  EXPECT_NE(wg.supports(p, kHopper).find("head_dim 128"), std::string::npos);
  EXPECT_EQ(mma.supports(p, kHopper), "");
}

TEST(FlashWgmma, RefusesOtherCardsAndFp32) {
  const auto& wg = variant(attention_variants(), "flash_wgmma");
  EXPECT_NE(wg.supports(prefill(), kAmpere).find("sm_90"), std::string::npos);
  AttentionParams p = prefill();
  p.dtype = DType::fp32;
  EXPECT_NE(wg.supports(p, kHopper).find("fp16/bf16"), std::string::npos);
  DeviceCaps small = kHopper;
  small.smem_per_block_optin = 100 * 1024;
  EXPECT_NE(wg.supports(prefill(), small).find("shared memory"), std::string::npos);
}

TEST(FlashWs, ClaimsEachTensorCoreHeadDimWithEveryMaskOnHopper) {
  const auto& ws = variant(attention_variants(), "flash_ws");
  for (int d : {64, 128, 256}) {
    AttentionParams p = prefill();
    p.head_dim = d;
    finish_attention_params(p);
    EXPECT_EQ(ws.supports(p, kHopper), "") << "head_dim " << d;
    p.window = 16;
    EXPECT_EQ(ws.supports(p, kHopper), "") << "window, head_dim " << d;
    p.window = 0;
    p.score.alibi = true;
    p.score.softcap = 30;
    EXPECT_EQ(ws.supports(p, kHopper), "") << "alibi + softcap, head_dim " << d;
  }
}

TEST(FlashWs, RefusesOtherHeadDimsSparseFp32AndOtherCards) {
  const auto& ws = variant(attention_variants(), "flash_ws");
  AttentionParams p = prefill();
  p.head_dim = 80;
  finish_attention_params(p);
  EXPECT_NE(ws.supports(p, kHopper).find("head_dim 64, 128 or 256"), std::string::npos);
  p = prefill();
  p.sparse.block = 128;
  EXPECT_NE(ws.supports(p, kHopper).find("block-sparse"), std::string::npos);
  p = prefill();
  p.dtype = DType::fp32;
  EXPECT_NE(ws.supports(p, kHopper).find("fp16, bf16 or fp8_e4m3"), std::string::npos);
  EXPECT_NE(ws.supports(prefill(), kAmpere).find("sm_90"), std::string::npos);
  p = prefill();
  p.q_batch_stride += 4;  // rows 8 bytes off a 16-byte TMA stride
  EXPECT_NE(ws.supports(p, kHopper).find("multiples of 8"), std::string::npos);
}

// fp8 e4m3 inputs: naive and flash_ws (head_dim 128, plain or causal) run them, the rest say
// which do; the descales fold into scale_log2.
TEST(FlashWs, TakesFp8AtHeadDim128PlainOrCausal) {
  AttentionParams p = prefill();
  p.dtype = DType::fp8_e4m3;
  p.descale_q = 0.5f;
  p.descale_k = 0.25f;
  finish_attention_params(p);
  EXPECT_FLOAT_EQ(p.score.scale_log2, p.score.scale * 0.125f * kLog2e);
  EXPECT_EQ(variant(attention_variants(), "flash_ws").supports(p, kHopper), "");
  EXPECT_EQ(variant(attention_variants(), "naive").supports(p, kHopper), "");
  EXPECT_NE(variant(attention_variants(), "cublas").supports(p, kHopper).find("fp8: naive and flash_ws"),
            std::string::npos);
  EXPECT_NE(variant(attention_variants(), "flash_mma").supports(p, kHopper).find("fp16/bf16"), std::string::npos);
  AttentionParams q = p;
  q.head_dim = 64;
  finish_attention_params(q);
  EXPECT_NE(variant(attention_variants(), "flash_ws").supports(q, kHopper).find("fp8: head_dim 128 only"),
            std::string::npos);
  q = p;
  q.score.softcap = 30;
  EXPECT_NE(variant(attention_variants(), "flash_ws").supports(q, kHopper).find("plain or causal"), std::string::npos);
  q = p;
  q.descale_v = 0;
  EXPECT_NE(variant(attention_variants(), "naive").supports(q, kHopper).find("descale"), std::string::npos);
}

TEST(FlashWs, SaysHowMuchSharedMemoryEachHeadDimNeeds) {
  const auto& ws = variant(attention_variants(), "flash_ws");
  DeviceCaps card = kHopper;
  card.smem_per_block_optin = 220 * 1024;  // d64 (122 KB) fits; d128 and d256 take 226 KB
  AttentionParams p = prefill();
  for (int d : {128, 256}) {
    p.head_dim = d;
    finish_attention_params(p);
    EXPECT_NE(ws.supports(p, card).find("226 KB of shared memory"), std::string::npos) << ws.supports(p, card);
  }
  p.head_dim = 64;
  finish_attention_params(p);
  EXPECT_EQ(ws.supports(p, card), "");
}

TEST(FlashWs, TurnsQueriesInSharedMemoryAtHeadDim64And128AndLeavesTheRestToItsBaseline) {
  const auto& ws = variant(attention_variants(), "flash_ws");
  const auto& first = variant(attention_variants(), "flash_ws_rope_first");
  // A dense problem at head_dim d with neox RoPE over all of it.
  auto with_rope = [](int d) {
    AttentionParams p = prefill();
    p.head_dim = d;
    p.q_batch_stride = p.kv_batch_stride = p.o_batch_stride = 0;
    p.score.scale = 0;
    p.rope.style = RopeTable::neox;
    p.rope.rotary_dim = d;
    finish_attention_params(p);
    return p;
  };
  for (int d : {64, 128}) EXPECT_EQ(ws.supports(with_rope(d), kHopper), "") << "head_dim " << d;
  AttentionParams p = with_rope(128);
  EXPECT_TRUE(first.applies(p));
  AttentionParams q = p;
  q.score.softcap = 30;
  EXPECT_NE(ws.supports(q, kHopper).find("flash_ws_rope_first runs the rest"), std::string::npos);
  EXPECT_EQ(first.supports(q, kHopper), "");  // the baseline turns Q and K first, then runs without RoPE
  q = with_rope(256);
  EXPECT_NE(ws.supports(q, kHopper).find("flash_ws_rope_first runs the rest"), std::string::npos);
  EXPECT_EQ(first.supports(q, kHopper), "");
  q = p;
  q.rope.rotary_dim = 40;  // neox turns 16-byte chunks with their partners
  EXPECT_NE(ws.supports(q, kHopper).find("multiple of 16"), std::string::npos);
  p.rope = {};
  EXPECT_FALSE(first.applies(p));
}

TEST(FlashWs, RefusesMoreWorkTilesThanAnIntCounts) {
  AttentionParams p = prefill();
  p.batch = 1 << 20;
  p.heads = 64;
  p.kv_heads = 8;
  p.seq_q = 4096;  // 32 query blocks: 2^31 work tiles
  finish_attention_params(p);
  EXPECT_NE(variant(attention_variants(), "flash_ws").supports(p, kHopper).find("2^31"), std::string::npos);
}

TEST(GemmWgmma, ClaimsBothLayoutsOffTheTiles) {
  const auto& wg = variant(gemm_variants(), "wgmma");
  EXPECT_EQ(wg.supports(gemm(GemmLayout::nt, 72, 40), kHopper), "");
  EXPECT_EQ(wg.supports(gemm(GemmLayout::nn, 72, 40), kHopper), "");
}

TEST(GemmWgmma, RefusesWhatItsCopiesCannotMove) {
  const auto& wg = variant(gemm_variants(), "wgmma");
  EXPECT_NE(wg.supports(gemm(GemmLayout::nt, 72, 9), kHopper).find("k % 8"), std::string::npos);
  EXPECT_NE(wg.supports(gemm(GemmLayout::nn, 33, 40), kHopper).find("n % 8"), std::string::npos);
  EXPECT_EQ(wg.supports(gemm(GemmLayout::nt, 33, 40), kHopper), "");  // nt reads B by rows of k
  EXPECT_NE(wg.supports(gemm(GemmLayout::nt, 72, 40), kAmpere).find("sm_90"), std::string::npos);
  GemmParams p = gemm(GemmLayout::nt, 72, 40);
  p.dtype = DType::fp32;
  EXPECT_NE(wg.supports(p, kHopper).find("fp16/bf16"), std::string::npos);
  // mma, the portable kernel, takes the same problem on an A100.
  EXPECT_EQ(variant(gemm_variants(), "mma").supports(gemm(GemmLayout::nn, 72, 40), kAmpere), "");
}

// The pipeline leaves the append to the decode kernel only where that kernel stores the rows:
// split_kv and flash_decode on their tensor-core kernel (fp16/bf16, head_dim <= 128). Their
// CUDA-core kernel (fp32, head_dim 256) reads K/V through the read-only path, and the other
// variants (the baseline, the unfused-RoPE one, a plugin) know nothing of the rows, so the
// pipeline appends for them first.
TEST(DecodeAppend, FoldedOnlyWhereTheTensorCoreKernelStoresTheRows) {
  const DecodeParams p = decode_step();
  for (const char* v : {"split_kv", "flash_decode"}) {
    EXPECT_TRUE(decode_folds_append(v, p)) << v;
    DecodeParams q = p;
    q.dtype = DType::fp16;
    EXPECT_TRUE(decode_folds_append(v, q)) << v;
    q.head_dim = 64;
    EXPECT_TRUE(decode_folds_append(v, q)) << v;
    q.head_dim = 256;
    EXPECT_FALSE(decode_folds_append(v, q)) << v << " at head_dim 256";
    q = p;
    q.dtype = DType::fp32;
    EXPECT_FALSE(decode_folds_append(v, q)) << v << " in fp32";
  }
  for (const char* v : {"naive", "split_kv_rope_first", "no_such_variant"}) EXPECT_FALSE(decode_folds_append(v, p)) << v;
}

// New rows must be as aligned as the cache for the kernel's 16-byte stores and loads.
TEST(DecodeAppend, RefusesMisalignedNewRows) {
  DecodeParams p = decode_step();
  alignas(16) static char rows[64];
  p.k_new = rows;
  p.v_new = rows + 32;
  const auto& split = variant(decode_variants(), "split_kv");
  EXPECT_EQ(split.supports(p, kHopper), "");
  p.v_new = rows + 2;
  EXPECT_NE(split.supports(p, kHopper).find("k_new and v_new must be 16-byte aligned"), std::string::npos);
}

// split_kv's workspace holds the partials of the most splits a launch may plan: at head_dim
// <= 64 the shortest chunks of 32, 64 and 128 keys that still make few blocks (GPT-2 at batch
// 1: 12 kv heads x 640 keys / 32 = 240 blocks, 20 splits; over 1024 keys 32-key chunks would
// make 384 > 256, so 64-key ones, 16 splits; batch 8: 96 x 640 / 64 > 256, so 128-key ones, 5
// splits), 256-key ones above head_dim 64. Each split's partial is head_dim fp32 (256-byte
// rounded) plus an (m, l) pair, per query head.
TEST(SplitKv, PlansItsWorkspaceForTheChunkItsBlockCountAllows) {
  DecodeParams p = decode_step();
  p.heads = p.kv_heads = 12;
  p.head_dim = 64;
  p.max_context = p.longest_context = 640;
  const auto& split = variant(decode_variants(), "split_kv");
  const auto bytes = [](int64_t rows, int64_t splits, int64_t head_dim) {
    const int64_t o = rows * splits * head_dim * 4;
    return static_cast<std::size_t>((o + 255) / 256 * 256 + rows * splits * 8);
  };
  p.batch = 1;
  EXPECT_EQ(split.workspace(p), bytes(12, 20, 64));
  p.max_context = p.longest_context = 1024;
  EXPECT_EQ(split.workspace(p), bytes(12, 16, 64));
  p.max_context = p.longest_context = 640;
  p.batch = 8;
  EXPECT_EQ(split.workspace(p), bytes(96, 5, 64));
  p = decode_step();  // batch 8, 32 heads over 8, d128, longest 1100: 256-key chunks
  EXPECT_EQ(split.workspace(p), bytes(256, 4, 128));
}

// Attention sinks are in every rung but paged's v1 and v2 (vLLM's kernels as they were): the
// others take a case with sinks whenever they take it without; v1 and v2 refuse it by name, and
// run the same case without them.
TEST(Supports, EveryRungButVllmsTakesSinks) {
  AttentionParams a = prefill();
  a.dtype = DType::fp32;  // every attention rung's dtype but the Hopper ones'
  DecodeParams d = decode_step();
  PagedParams pg{};
  pg.batch = 8, pg.heads = 32, pg.kv_heads = 8, pg.head_dim = 128, pg.block_size = 16, pg.num_blocks = 600;
  pg.max_blocks_per_seq = 70, pg.longest_context = 1100, pg.dtype = pg.kv_dtype = DType::bf16;
  finish_paged_params(pg);
  auto check = [&](const auto& table, auto p, std::vector<std::string> take) {
    int refusing = 0;
    for (const auto& v : table) {
      const std::string plain = v.supports(p, kHopper);
      p.score.sinks = true;  // before allocation: the flag without the logits
      const std::string with = v.supports(p, kHopper);
      p.score.sinks = false;
      const bool takes = std::find(take.begin(), take.end(), v.name) != take.end();
      if (takes) {
        EXPECT_EQ(with, plain) << v.name << " takes sinks";
      } else if (plain.empty()) {
        ++refusing;
        EXPECT_NE(with.find("attention sinks"), std::string::npos) << v.name << ": " << with;
      } else {
        EXPECT_FALSE(with.empty()) << v.name;
      }
    }
    return refusing;
  };
  const auto names = [](const auto& table) {
    std::vector<std::string> out;
    for (const auto& v : table) out.push_back(v.name);
    return out;
  };
  EXPECT_EQ(check(attention_variants(), a, names(attention_variants())), 0);  // flash_fp32 at fp32
  a.dtype = DType::bf16;
  EXPECT_EQ(check(attention_variants(), a, names(attention_variants())), 0);  // flash_mma, flash_wgmma, flash_ws
  EXPECT_EQ(check(decode_variants(), d, names(decode_variants())), 0);
  EXPECT_EQ(check(paged_variants(), pg, {"paged_flash", "paged_flash_rope_first"}), 2);  // v1, v2
}

// The backward's deterministic rungs are rung 2's and rung 4's kernels with turns: each claims
// exactly what its nondeterministic twin claims, promises bit-for-bit repeats (the twins do
// not), and needs the twin's workspace plus one turn counter per (batch, head, query tile of 64).
TEST(BackwardDeterministicRungs, ClaimWhatTheirTwinsClaimAndAddOneTurnCounterATile) {
  BackwardParams p{};
  p.batch = 2, p.heads = 8, p.kv_heads = 2, p.seq_q = 1000, p.seq_k = 1000, p.head_dim = 128;
  p.causal = true, p.dtype = DType::bf16;
  finish_backward_params(p);
  const auto& table = backward_variants();
  const size_t turns = (2 * 8 * 16 * sizeof(int) + 255) / 256 * 256;  // 16 query tiles of 64
  for (const auto& [twin, det] : {std::pair<std::string, std::string>{"flash_mma", "flash_mma_det"},
                                  std::pair<std::string, std::string>{"flash_wgmma", "flash_wgmma_det"}}) {
    const auto& a = variant(table, twin);
    const auto& b = variant(table, det);
    EXPECT_FALSE(a.deterministic) << twin;
    EXPECT_TRUE(b.deterministic) << det;
    EXPECT_EQ(b.workspace(p), a.workspace(p) + turns) << det;
    for (const DeviceCaps& c : {kHopper, kAmpere}) EXPECT_EQ(a.supports(p, c), b.supports(p, c)) << det;
  }
  EXPECT_EQ(variant(table, "flash_wgmma_det").supports(p, kHopper), "");
  EXPECT_NE(variant(table, "flash_wgmma_det").supports(p, kAmpere), "");
  p.head_dim = 256;
  EXPECT_NE(variant(table, "flash_wgmma_det").supports(p, kHopper), "");
}
