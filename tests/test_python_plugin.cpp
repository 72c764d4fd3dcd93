// The Python bridge without a GPU (app/python_plugin.cpp, app/python/bridge.cpp): a Python
// file's variants load as plugin-ABI variants, and a launch hands Python the views each op's
// struct describes. tests/plugins/py_views.py's launches raise with what they were handed
// (shapes, strides, dtypes, pointers, whether __dlpack__ made a valid capsule, the scalars),
// which take_python_error() returns; the structs here point at made-up addresses that nothing
// dereferences. The GPU test (gpu_python_plugins) runs real kernels through the same path.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "app/errors.hpp"
#include "app/python_plugin.hpp"

namespace attnbench {
namespace {

const std::string kPlugins = std::string(ATTNBENCH_SOURCE_DIR) + "/tests/plugins/";

// The py_views.py variants by op number, or a reason to skip (no bridge built, no libpython).
struct Views {
  std::map<int32_t, const attnbench_variant*> by_op;
  std::string skip;
};

const Views& views() {
  static const Views v = [] {
    Views out;
    std::string library;
    try {
      const attnbench_plugin* p = open_python_plugin(kPlugins + "py_views.py", 0, library);
      for (int32_t i = 0; i < p->count; ++i) out.by_op[p->variants[i].op] = &p->variants[i];
    } catch (const InputError& e) {
      out.skip = e.what();
    }
    return out;
  }();
  return v;
}

// What the op's variant was handed for `params`.
std::string handed(int32_t op, const void* params) {
  const Views& v = views();
  const attnbench_variant* variant = v.by_op.at(op);
  void* workspace = nullptr;
  const cudaError_t e = variant->launch(params, workspace, reinterpret_cast<cudaStream_t>(0x5150));
  EXPECT_EQ(e, cudaErrorUnknown);
  return take_python_error();
}

#define SKIP_WITHOUT_BRIDGE()                                    \
  if (!views().skip.empty()) GTEST_SKIP() << views().skip;

const void* at(uintptr_t address) { return reinterpret_cast<const void*>(address); }

TEST(PythonPlugin, LoadsEveryOpsVariant) {
  SKIP_WITHOUT_BRIDGE();
  EXPECT_EQ(views().by_op.size(), 10u);
  EXPECT_STREQ(views().by_op.at(ATTNBENCH_OP_PAGED)->name, "views_paged");
  EXPECT_STREQ(views().by_op.at(ATTNBENCH_OP_PAGED)->note, "reports its views");
}

TEST(PythonPlugin, SoftmaxRowsAndColumns) {
  SKIP_WITHOUT_BRIDGE();
  attnbench_softmax_params p{at(4096), const_cast<void*>(at(8192)), 3, 5, ATTNBENCH_BF16};
  const std::string got = handed(ATTNBENCH_OP_SOFTMAX, &p);
  EXPECT_NE(got.find("launch() raised RuntimeError: VIEWS softmax stream=20816"), std::string::npos) << got;
  EXPECT_NE(got.find("x=bfloat16[3, 5][5, 1]@4096 "), std::string::npos) << got;
  EXPECT_NE(got.find("y=bfloat16[3, 5][5, 1]@8192 "), std::string::npos) << got;
  EXPECT_NE(got.find("'cols': 5, 'dtype': 'bfloat16', 'rows': 3"), std::string::npos) << got;
  EXPECT_NE(got.find("(py_views.py:"), std::string::npos) << "the traceback's last frame: " << got;
  EXPECT_EQ(got.find("!capsule"), std::string::npos) << got;
}

TEST(PythonPlugin, AttentionStridesFollowTheBatchStrides) {
  SKIP_WITHOUT_BRIDGE();
  attnbench_attention_params p{};
  p.q = at(1 << 20);
  p.k = at(2 << 20);
  p.v = at(3 << 20);
  p.o = const_cast<void*>(at(4 << 20));
  p.batch = 2, p.heads = 8, p.kv_heads = 2, p.seq_q = 16, p.seq_k = 48, p.head_dim = 64;
  p.q_batch_stride = 9000, p.kv_batch_stride = 7000, p.o_batch_stride = 16 * 8 * 64;
  p.causal = 1;
  p.q_offset = 32;
  p.dtype = ATTNBENCH_FP16;
  p.score.scale = 0.125f;
  p.score.sinks = 1;
  p.score.sink_logits = static_cast<const float*>(at(5 << 20));
  const std::string got = handed(ATTNBENCH_OP_ATTENTION, &p);
  EXPECT_NE(got.find("q=float16[2, 16, 8, 64][9000, 512, 64, 1]@1048576"), std::string::npos) << got;
  EXPECT_NE(got.find("k=float16[2, 48, 2, 64][7000, 128, 64, 1]@2097152"), std::string::npos) << got;
  EXPECT_NE(got.find("o=float16[2, 16, 8, 64][8192, 512, 64, 1]"), std::string::npos) << got;
  EXPECT_NE(got.find("sink_logits=float32[8][1]@5242880"), std::string::npos) << got;
  EXPECT_NE(got.find("alibi_slopes=None"), std::string::npos) << got;
  EXPECT_NE(got.find("cos_sin=None"), std::string::npos) << got;
  EXPECT_NE(got.find("sparse_live=None"), std::string::npos) << got;
  EXPECT_NE(got.find("'causal': True"), std::string::npos) << got;
  EXPECT_NE(got.find("'q_offset': 32"), std::string::npos) << got;
  EXPECT_NE(got.find("score={'alibi': False, 'scale': 0.125, 'scale_log2': 0.0, 'sinks': True, 'softcap': 0.0}"),
            std::string::npos)
      << got;
  EXPECT_NE(got.find("rope={'first': 0, 'rotary_dim': 0, 'rows': 0, 'style': 'none'}"), std::string::npos) << got;
}

TEST(PythonPlugin, PagedCachesInVllmsLayoutsWithFp8) {
  SKIP_WITHOUT_BRIDGE();
  attnbench_paged_params p{};
  p.q = at(64);
  p.k_cache = at(128);
  p.v_cache = at(256);
  p.o = const_cast<void*>(at(512));
  p.block_tables = static_cast<const int32_t*>(at(1024));
  p.context_lens = static_cast<const int32_t*>(at(2048));
  p.batch = 3, p.heads = 8, p.kv_heads = 2, p.head_dim = 128;
  p.block_size = 16, p.num_blocks = 40, p.max_blocks_per_seq = 7;
  p.dtype = ATTNBENCH_BF16, p.kv_dtype = ATTNBENCH_FP8_E4M3;
  p.k_scale = 0.5f, p.v_scale = 2.f;
  const std::string got = handed(ATTNBENCH_OP_PAGED, &p);
  // x = 16 bytes of fp8 = 16 elements: [num_blocks, kv_heads, head_dim / x, block_size, x].
  EXPECT_NE(got.find("k_cache=float8_e4m3fn[40, 2, 8, 16, 16][4096, 2048, 256, 16, 1]@128"), std::string::npos) << got;
  EXPECT_NE(got.find("v_cache=float8_e4m3fn[40, 2, 128, 16][4096, 2048, 16, 1]@256"), std::string::npos) << got;
  EXPECT_NE(got.find("block_tables=int32[3, 7][7, 1]@1024"), std::string::npos) << got;
  EXPECT_NE(got.find("context_lens=int32[3][1]@2048"), std::string::npos) << got;
  EXPECT_NE(got.find("'k_scale': 0.5"), std::string::npos) << got;
  EXPECT_NE(got.find("'kv_dtype': 'float8_e4m3fn'"), std::string::npos) << got;
}

TEST(PythonPlugin, RaggedBatchWithTheHostsLengths) {
  SKIP_WITHOUT_BRIDGE();
  const int32_t cu[] = {0, 1, 6, 135};
  const int32_t ctx[] = {1328, 18, 463};
  attnbench_ragged_params p{};
  p.q = at(4096);
  p.k_cache = at(8192);
  p.v_cache = at(16384);
  p.o = const_cast<void*>(at(32768));
  p.cu_seqlens_q = static_cast<const int32_t*>(at(65536));
  p.host_cu_seqlens_q = cu;
  p.host_context_lens = ctx;
  p.batch = 3, p.total_queries = 135, p.heads = 4, p.kv_heads = 4, p.head_dim = 80;
  p.block_size = 24, p.num_blocks = 100, p.max_blocks_per_seq = 56;
  p.dtype = ATTNBENCH_FP16, p.kv_dtype = ATTNBENCH_FP16;
  p.rope = {1, 64, 0, 1328, static_cast<const float*>(at(131072))};
  const std::string got = handed(ATTNBENCH_OP_RAGGED, &p);
  EXPECT_NE(got.find("q=float16[135, 4, 80][320, 80, 1]@4096"), std::string::npos) << got;
  EXPECT_NE(got.find("k_cache=float16[100, 24, 4, 80][7680, 320, 80, 1]@8192"), std::string::npos) << got;
  EXPECT_NE(got.find("cu_seqlens_q=int32[4][1]@65536"), std::string::npos) << got;
  EXPECT_NE(got.find("context_lens=None"), std::string::npos) << got;
  EXPECT_NE(got.find("cos_sin=float32[1328, 32, 2][64, 2, 1]@131072"), std::string::npos) << got;
  EXPECT_NE(got.find("'host_context_lens': [1328, 18, 463]"), std::string::npos) << got;
  EXPECT_NE(got.find("'host_cu_seqlens_q': [0, 1, 6, 135]"), std::string::npos) << got;
  EXPECT_NE(got.find("'style': 'neox'"), std::string::npos) << got;
}

// The backward's nine tensors in the struct's layouts: q, o, d_o and dq [batch, seq_q, heads,
// head_dim], k, v, dk and dv [batch, seq_k, kv_heads, head_dim] (GQA: fewer heads), lse fp32
// [batch, heads, seq_q]; dense, so torch.permute gives the [batch, heads, seq, head_dim] views
// SDPA's backward ops take.
TEST(PythonPlugin, AttentionBackwardGradientsAndLse) {
  SKIP_WITHOUT_BRIDGE();
  attnbench_attention_backward_params p{};
  p.q = at(1 << 20);
  p.k = at(2 << 20);
  p.v = at(3 << 20);
  p.o = at(4 << 20);
  p.d_o = at(5 << 20);
  p.lse = static_cast<const float*>(at(6 << 20));
  p.dq = const_cast<void*>(at(7 << 20));
  p.dk = const_cast<void*>(at(8 << 20));
  p.dv = const_cast<void*>(at(9 << 20));
  p.batch = 2, p.heads = 4, p.kv_heads = 2, p.seq_q = 33, p.seq_k = 70, p.head_dim = 64;
  p.causal = 1;
  p.q_offset = 37;
  p.window = 0;
  p.dtype = ATTNBENCH_BF16;
  p.score.scale = 0.125f;
  p.score.alibi = 1;
  p.score.alibi_slopes = static_cast<const float*>(at(10 << 20));
  p.score.softcap = 30.f;
  const std::string got = handed(ATTNBENCH_OP_ATTENTION_BACKWARD, &p);
  EXPECT_NE(got.find("VIEWS attention_backward stream=20816"), std::string::npos) << got;
  EXPECT_NE(got.find("q=bfloat16[2, 33, 4, 64][8448, 256, 64, 1]@1048576 "), std::string::npos) << got;
  EXPECT_NE(got.find("k=bfloat16[2, 70, 2, 64][8960, 128, 64, 1]@2097152 "), std::string::npos) << got;
  EXPECT_NE(got.find("v=bfloat16[2, 70, 2, 64][8960, 128, 64, 1]@3145728 "), std::string::npos) << got;
  EXPECT_NE(got.find("o=bfloat16[2, 33, 4, 64][8448, 256, 64, 1]@4194304 "), std::string::npos) << got;
  EXPECT_NE(got.find("d_o=bfloat16[2, 33, 4, 64][8448, 256, 64, 1]@5242880 "), std::string::npos) << got;
  EXPECT_NE(got.find("lse=float32[2, 4, 33][132, 33, 1]@6291456 "), std::string::npos) << got;
  EXPECT_NE(got.find("dq=bfloat16[2, 33, 4, 64][8448, 256, 64, 1]@7340032 "), std::string::npos) << got;
  EXPECT_NE(got.find("dk=bfloat16[2, 70, 2, 64][8960, 128, 64, 1]@8388608 "), std::string::npos) << got;
  EXPECT_NE(got.find("dv=bfloat16[2, 70, 2, 64][8960, 128, 64, 1]@9437184 "), std::string::npos) << got;
  EXPECT_NE(got.find("alibi_slopes=float32[4][1]@10485760 "), std::string::npos) << got;
  EXPECT_NE(got.find("sink_logits=None"), std::string::npos) << got;
  EXPECT_NE(got.find("workspace=None"), std::string::npos) << "no workspace was asked for: " << got;
  for (const char* scalar : {"'causal': True", "'dtype': 'bfloat16'", "'head_dim': 64", "'heads': 4", "'kv_heads': 2",
                             "'q_offset': 37", "'seq_k': 70", "'seq_q': 33", "'window': 0"})
    EXPECT_NE(got.find(scalar), std::string::npos) << scalar << " in " << got;
  EXPECT_NE(got.find("score={'alibi': True, 'scale': 0.125, 'scale_log2': 0.0, 'sinks': False, 'softcap': 30.0}"),
            std::string::npos)
      << got;
  EXPECT_EQ(got.find("rope="), std::string::npos) << "the op has no RoPE: " << got;
  EXPECT_EQ(got.find("!capsule"), std::string::npos) << got;
}

// mla's tensors in the struct's layouts: q [batch, s_q, heads, latent_dim + rope_dim], o [batch,
// s_q, heads, latent_dim], the paged latent cache [num_blocks, block_size, width] in the dtype, its
// block tables and lengths, the host's lengths as a list; the scalars by the struct's names.
TEST(PythonPlugin, MlaLatentCacheInTheDtype) {
  SKIP_WITHOUT_BRIDGE();
  const int32_t ctx[] = {70, 2, 1025};
  attnbench_mla_params p{};
  p.q = at(1 << 20);
  p.cache = at(2 << 20);
  p.o = const_cast<void*>(at(3 << 20));
  p.block_tables = static_cast<const int32_t*>(at(4 << 20));
  p.context_lens = static_cast<const int32_t*>(at(5 << 20));
  p.host_context_lens = ctx;
  p.batch = 3, p.s_q = 2, p.heads = 16, p.latent_dim = 512, p.rope_dim = 64;
  p.block_size = 24, p.num_blocks = 60, p.max_blocks_per_seq = 43;
  p.longest_context = 1025;
  p.token_bytes = 576 * 2;
  p.scale = 0.125f;
  p.causal = 1;
  p.dtype = ATTNBENCH_BF16, p.kv_dtype = ATTNBENCH_BF16;
  const std::string got = handed(ATTNBENCH_OP_MLA, &p);
  EXPECT_NE(got.find("VIEWS mla stream=20816"), std::string::npos) << got;
  EXPECT_NE(got.find("q=bfloat16[3, 2, 16, 576][18432, 9216, 576, 1]@1048576 "), std::string::npos) << got;
  EXPECT_NE(got.find("cache=bfloat16[60, 24, 576][13824, 576, 1]@2097152 "), std::string::npos) << got;
  EXPECT_NE(got.find("o=bfloat16[3, 2, 16, 512][16384, 8192, 512, 1]@3145728 "), std::string::npos) << got;
  EXPECT_NE(got.find("block_tables=int32[3, 43][43, 1]@4194304 "), std::string::npos) << got;
  EXPECT_NE(got.find("context_lens=int32[3][1]@5242880 "), std::string::npos) << got;
  EXPECT_NE(got.find("workspace=None"), std::string::npos) << "no workspace was asked for: " << got;
  for (const char* scalar :
       {"'batch': 3", "'block_size': 24", "'causal': True", "'dtype': 'bfloat16'", "'heads': 16",
        "'host_context_lens': [70, 2, 1025]", "'kv_dtype': 'bfloat16'", "'latent_dim': 512", "'longest_context': 1025",
        "'max_blocks_per_seq': 43", "'num_blocks': 60", "'rope_dim': 64", "'s_q': 2", "'scale': 0.125",
        "'token_bytes': 1152"})
    EXPECT_NE(got.find(scalar), std::string::npos) << scalar << " in " << got;
  EXPECT_EQ(got.find("score="), std::string::npos) << "mla has no score options but its scale: " << got;
  EXPECT_EQ(got.find("rope="), std::string::npos) << "the op turns nothing: " << got;
  EXPECT_EQ(got.find("!capsule"), std::string::npos) << got;
}

// FlashMLA's fp8 layout: a token's 656 bytes (512 e4m3 codes, 4 fp32 scales, 64 bf16 RoPE values)
// go over as bytes, [num_blocks, block_size, token_bytes] uint8; kv_dtype names the layout; the
// queries keep their own dtype (fp32 here). No host lengths given: None.
TEST(PythonPlugin, MlaFp8CacheAsItsBytes) {
  SKIP_WITHOUT_BRIDGE();
  attnbench_mla_params p{};
  p.q = at(1 << 20);
  p.cache = at(2 << 20);
  p.o = const_cast<void*>(at(3 << 20));
  p.block_tables = static_cast<const int32_t*>(at(4 << 20));
  p.context_lens = static_cast<const int32_t*>(at(5 << 20));
  p.batch = 1, p.s_q = 1, p.heads = 128, p.latent_dim = 512, p.rope_dim = 64;
  p.block_size = 64, p.num_blocks = 10, p.max_blocks_per_seq = 8;
  p.longest_context = 500;
  p.token_bytes = 656;
  p.scale = 0.5f;
  p.causal = 0;
  p.dtype = ATTNBENCH_FP32, p.kv_dtype = ATTNBENCH_FP8_E4M3;
  const std::string got = handed(ATTNBENCH_OP_MLA, &p);
  EXPECT_NE(got.find("q=float32[1, 1, 128, 576][73728, 73728, 576, 1]@1048576 "), std::string::npos) << got;
  EXPECT_NE(got.find("cache=uint8[10, 64, 656][41984, 656, 1]@2097152 "), std::string::npos) << got;
  EXPECT_NE(got.find("o=float32[1, 1, 128, 512][65536, 65536, 512, 1]@3145728 "), std::string::npos) << got;
  for (const char* scalar : {"'causal': False", "'dtype': 'float32'", "'host_context_lens': None",
                             "'kv_dtype': 'float8_e4m3fn'", "'scale': 0.5", "'token_bytes': 656"})
    EXPECT_NE(got.find(scalar), std::string::npos) << scalar << " in " << got;
  EXPECT_EQ(got.find("!capsule"), std::string::npos) << got;
}

TEST(PythonPlugin, ReshapeAndCacheKnowsItsPool) {
  SKIP_WITHOUT_BRIDGE();
  attnbench_reshape_and_cache_params p{};
  p.k = at(16);
  p.v = at(32);
  p.k_cache = const_cast<void*>(at(48));
  p.v_cache = const_cast<void*>(at(64));
  p.slot_mapping = static_cast<const int64_t*>(at(80));
  p.tokens = 5, p.kv_heads = 2, p.head_dim = 64, p.block_size = 16, p.num_blocks = 9;
  p.dtype = ATTNBENCH_FP32, p.kv_dtype = ATTNBENCH_FP32;
  const std::string got = handed(ATTNBENCH_OP_RESHAPE_AND_CACHE, &p);
  // fp32: x = 4 elements.
  EXPECT_NE(got.find("k_cache=float32[9, 2, 16, 16, 4][2048, 1024, 64, 4, 1]@48"), std::string::npos) << got;
  EXPECT_NE(got.find("slot_mapping=int64[5][1]@80"), std::string::npos) << got;
  EXPECT_NE(got.find("positions=None"), std::string::npos) << "read only with rope: " << got;
}

TEST(PythonPlugin, NoErrorIsPendingAfterItWasTaken) {
  SKIP_WITHOUT_BRIDGE();
  attnbench_softmax_params p{at(4096), const_cast<void*>(at(8192)), 1, 1, ATTNBENCH_FP32};
  EXPECT_FALSE(handed(ATTNBENCH_OP_SOFTMAX, &p).empty());
  EXPECT_EQ(take_python_error(), "");
}

TEST(PythonPlugin, OverheadIsMeasuredThroughTheSameMarshalling) {
  SKIP_WITHOUT_BRIDGE();
  attnbench_softmax_params p{at(4096), const_cast<void*>(at(8192)), 1, 1, ATTNBENCH_FP32};
  const double us = python_overhead_us(ATTNBENCH_OP_SOFTMAX, &p);
  EXPECT_GT(us, 0.1);     // it does build objects and call into Python
  EXPECT_LT(us, 5000.0);  // and is not a process start
}

}  // namespace
}  // namespace attnbench
