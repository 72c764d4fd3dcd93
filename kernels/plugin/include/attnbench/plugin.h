/* attnbench plugin ABI, version 6.
 *
 * A plugin is one .cu file (or a shared library built from one) that gives attnbench
 * more variants of its ops. attnbench compiles the file with nvcc, loads it, and runs
 * its variants beside the built-in ones: the same fp64 verification, NaN-poisoned
 * outputs, timing modes, reports, --dump and compare (docs/plugins.md).
 *
 * The file includes this header, defines its launch functions and a table of
 * attnbench_variant, and names the table once with ATTNBENCH_PLUGIN(table).
 *
 * Every params struct below is what attnbench passes to a variant of that op. Pointers
 * are device memory unless a comment says otherwise; shapes are element counts; tensors
 * are row-major in the order their comment lists the dims, densely packed unless a
 * stride is given. Storage types are attnbench_dtype values; softmax statistics and
 * accumulation are meant to be fp32, as attnbench's own kernels keep them.
 *
 * The header is C and C++; it needs only cuda_runtime_api.h. Fields are fixed-width so
 * the layout is the same in every compiler. A new field or op raises the version.
 */
#ifndef ATTNBENCH_PLUGIN_H
#define ATTNBENCH_PLUGIN_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#define ATTNBENCH_PLUGIN_ABI_VERSION 6

/* Storage types (attnbench_*_params.dtype). fp8_e4m3 appears only as a KV cache's (paged, ragged,
 * reshape_and_cache; mla's FlashMLA layout). */
enum {
  ATTNBENCH_FP32 = 0,
  ATTNBENCH_FP16 = 1,     /* __half */
  ATTNBENCH_BF16 = 2,     /* __nv_bfloat16 */
  ATTNBENCH_FP8_E4M3 = 3  /* __nv_fp8_e4m3, saturating at +-448 */
};

/* The ops a plugin variant can implement (attnbench_variant.op). */
enum {
  ATTNBENCH_OP_SOFTMAX = 1,
  ATTNBENCH_OP_GEMM = 2,
  ATTNBENCH_OP_ATTENTION = 3, /* prefill */
  ATTNBENCH_OP_DECODE = 4,
  ATTNBENCH_OP_PAGED = 5,
  ATTNBENCH_OP_CACHE_APPEND = 6,
  ATTNBENCH_OP_RESHAPE_AND_CACHE = 7,
  ATTNBENCH_OP_RAGGED = 8,    /* a serving batch over a paged cache */
  ATTNBENCH_OP_ATTENTION_BACKWARD = 9, /* prefill attention's dQ, dK, dV (training) */
  ATTNBENCH_OP_MLA = 10       /* DeepSeek's multi-head latent attention decode (FlashMLA) */
};

/* The card a variant is asked about (attnbench_variant.supports). */
typedef struct attnbench_device {
  int32_t sm_count;
  int32_t cc_major, cc_minor;       /* compute capability: 9.0 on H100 and H200 */
  uint64_t smem_per_block_optin;    /* shared memory bytes a block may have after cudaFuncSetAttribute */
  uint64_t l2_bytes;
  uint64_t total_memory;
} attnbench_device;

/* Rotary position embedding, when a case asks for it (style != 0). Pair i of a row at
 * position t turns by the angle whose cosine and sine are
 * cos_sin[2 * ((t - first) * (rotary_dim / 2) + i)] and the float after it.
 * neox pairs element i with i + rotary_dim / 2; gptj pairs 2i with 2i + 1.
 * Elements from rotary_dim on are not rotated. */
typedef struct attnbench_rope {
  int32_t style;         /* 0 none, 1 neox, 2 gptj */
  int32_t rotary_dim;    /* even, at most head_dim */
  int32_t first, rows;   /* the table covers positions [first, first + rows) */
  const float* cos_sin;  /* [rows][rotary_dim / 2][2] = (cos, sin) */
} attnbench_rope;

/* The score options shared by attention, decode and paged (their params' `score`). A score
 * s = scale * q.k becomes softcap * tanh(s / softcap) when softcap > 0; then ALiBi adds
 * -alibi_slopes[h] * |query position - key position| when alibi != 0; then the masks.
 * A query that sees no key outputs zeros. A new score option is a new field here (and a
 * new ABI version). */
typedef struct attnbench_score {
  int32_t alibi;             /* 0 or 1 */
  const float* alibi_slopes; /* [heads]; read only when alibi */
  float scale;               /* the softmax scale (1/sqrt(head_dim) unless the case sets one) */
  float scale_log2;          /* scale * log2(e), for kernels that use exp2 */
  float softcap;             /* 0 = none */
  /* Attention sinks (gpt-oss): when sinks != 0, query head h's softmax has one more logit,
   * sink_logits[h] (score units), joining its max and denominator but without a value. */
  int32_t sinks;             /* 0 or 1 */
  const float* sink_logits;  /* [heads]; read only when sinks */
} attnbench_score;

/* softmax: y = softmax(x) along each row. */
typedef struct attnbench_softmax_params {
  const void* x;  /* [rows, cols], dtype, 16-byte aligned */
  void* y;        /* [rows, cols], dtype */
  int64_t rows, cols;
  int32_t dtype;  /* fp32, fp16 or bf16 */
} attnbench_softmax_params;

/* gemm: C = A B^T (layout 0, "nt") or C = A B (layout 1, "nn"), batched, fp32 accumulate. */
typedef struct attnbench_gemm_params {
  const void* a;  /* [batch, m, k] */
  const void* b;  /* nt: [batch, n, k]; nn: [batch, k, n] */
  void* c;        /* [batch, m, n] */
  int64_t batch, m, n, k;
  int32_t layout; /* 0 nt, 1 nn */
  int32_t dtype;  /* a, b and c: fp32, fp16 or bf16 */
} attnbench_gemm_params;

/* attention (prefill): O = softmax(Q K^T * scale + bias + mask) V per query head.
 * Query head h reads kv head h / (heads / kv_heads). Row i of head h of q and o is at
 * i * heads * head_dim + h * head_dim within its batch; row j of kv head g of k and v at
 * j * kv_heads * head_dim + g * head_dim; batches are *_batch_stride elements apart.
 * Query i sits at position i + q_offset; it sees key j when j <= i + q_offset (causal)
 * and when |i + q_offset - j| < window (window > 0; only the past side when causal). */
typedef struct attnbench_attention_params {
  const void* q;  /* [batch, seq_q, heads, head_dim] */
  const void* k;  /* [batch, seq_k, kv_heads, head_dim] */
  const void* v;  /* [batch, seq_k, kv_heads, head_dim] */
  void* o;        /* [batch, seq_q, heads, head_dim] */
  int64_t q_batch_stride, kv_batch_stride, o_batch_stride; /* elements */
  int64_t batch, heads, kv_heads, seq_q, seq_k, head_dim;
  int64_t q_offset;   /* seq_k - seq_q (bottom-right causal alignment), or 0 (top-left) */
  int64_t window;     /* 0 = none */
  int32_t causal;     /* 0 or 1 */
  attnbench_score score;
  int32_t dtype;      /* q, k, v and o: fp32, fp16 or bf16 */
  attnbench_rope rope; /* q row i turned at position i + q_offset, k row j at j, before the scores */
  /* Block-sparse attention when sparse_block > 0: query block b (queries b * sparse_block ..)
   * sees key block c only when sparse_live[(h * q_blocks + b) * k_blocks + c] is 1; the
   * live blocks are also listed, ascending, in sparse_idx[(h * q_blocks + b) * k_blocks + ..]
   * with sparse_num[h * q_blocks + b] entries. The other masks still apply inside. */
  int32_t sparse_block, sparse_q_blocks, sparse_k_blocks;
  const uint8_t* sparse_live;
  const int32_t* sparse_num;
  const int32_t* sparse_idx;
} attnbench_attention_params;

/* decode: one new query per sequence against its dense KV cache. Sequence b attends to
 * cache rows [0, context_lens[b]); its query sits at position context_lens[b] - 1 and is
 * rotated there when rope is on (the cache holds keys rotated when they were stored). */
typedef struct attnbench_decode_params {
  const void* q;         /* [batch, heads, head_dim] */
  const void* k_cache;   /* [batch, max_context, kv_heads, head_dim] */
  const void* v_cache;   /* [batch, max_context, kv_heads, head_dim] */
  void* o;               /* [batch, heads, head_dim] */
  const int32_t* context_lens; /* [batch], each in [1, max_context] */
  int64_t batch, heads, kv_heads, head_dim, max_context;
  int64_t longest_context; /* the largest context_lens entry (host value) */
  int64_t window;        /* 0 = none, else only the last `window` keys */
  attnbench_score score;
  int32_t dtype;
  attnbench_rope rope;
} attnbench_decode_params;

/* paged: decode over a KV cache kept in blocks of block_size tokens (vLLM's layouts).
 * Token t of sequence b is in block block_tables[b * max_blocks_per_seq + t / block_size]
 * at offset t % block_size. x = 16 / bytes of kv_dtype. An fp8 cache holds value / scale:
 * multiply what you load by k_scale or v_scale. Table entries past a sequence's last block
 * and every unused slot point at NaN, so reading past a context shows in the output. */
typedef struct attnbench_paged_params {
  const void* q;        /* [batch, heads, head_dim], dtype */
  const void* k_cache;  /* [num_blocks, kv_heads, head_dim / x, block_size, x], kv_dtype */
  const void* v_cache;  /* [num_blocks, kv_heads, head_dim, block_size], kv_dtype */
  void* o;              /* [batch, heads, head_dim], dtype */
  const int32_t* block_tables; /* [batch, max_blocks_per_seq] */
  const int32_t* context_lens; /* [batch], each >= 1 */
  int64_t batch, heads, kv_heads, head_dim;
  int64_t block_size, num_blocks, max_blocks_per_seq;
  int64_t longest_context;
  int64_t partition_size; /* the case's v2 partition (tokens), for kernels that split */
  int64_t window;
  attnbench_score score;
  int32_t dtype, kv_dtype;
  float k_scale, v_scale;
  attnbench_rope rope;
} attnbench_paged_params;

/* cache_append: row t of sequence b's new K and V goes to cache row positions[b] + t;
 * with rope the key is rotated at that position as it is stored, the value copied. */
typedef struct attnbench_cache_append_params {
  void* k_cache;        /* [batch, max_context, kv_heads, head_dim] */
  void* v_cache;
  const void* k_new;    /* [batch, tokens, kv_heads, head_dim] */
  const void* v_new;
  const int32_t* positions; /* [batch] */
  int64_t batch, tokens, kv_heads, head_dim, max_context;
  int32_t dtype;
  attnbench_rope rope;
} attnbench_cache_append_params;

/* reshape_and_cache: token i's K and V rows go to slot slot_mapping[i] (block =
 * slot / block_size, offset = slot % block_size) of the paged caches, in the layouts of
 * attnbench_paged_params; an fp8 cache stores value / scale rounded to nearest even,
 * saturating at +-448. A negative slot skips the token. With rope the key is rotated at
 * positions[i] before it is stored. */
typedef struct attnbench_reshape_and_cache_params {
  const void* k;        /* [tokens, kv_heads, head_dim], dtype */
  const void* v;
  void* k_cache;
  void* v_cache;
  const int64_t* slot_mapping; /* [tokens] */
  const int32_t* positions;    /* [tokens]; read only with rope */
  int64_t tokens, kv_heads, head_dim, block_size;
  int64_t num_blocks;          /* blocks in each cache */
  int32_t dtype, kv_dtype;
  float k_scale, v_scale;
  attnbench_rope rope;
} attnbench_reshape_and_cache_params;

/* ragged: one batch of sequences as a serving engine runs it (vLLM V1's unified attention,
 * FlashInfer's batch prefill): sequence b has query_len[b] = cu_seqlens_q[b + 1] -
 * cu_seqlens_q[b] new tokens, the last query_len[b] of its context_lens[b] keys, which are in
 * the cache already. Query t of sequence b (packed row cu_seqlens_q[b] + t of q and o) sits at
 * position context_lens[b] - query_len[b] + t and sees keys [0, position] (causal, aligned
 * bottom-right within its sequence), with a window only the last `window` of those. Key j of
 * sequence b is token j % block_size of block block_tables[b * max_blocks_per_seq + j /
 * block_size]. The cache is the "flash" layout: one key's heads and dims contiguous. Table
 * entries past a sequence's last block and every slot no sequence owns hold NaN. An fp8 cache
 * holds value / scale: multiply what you load by k_scale or v_scale. With rope each query is
 * turned at its position (the cache holds keys turned when they were stored). */
typedef struct attnbench_ragged_params {
  const void* q;        /* [total_queries, heads, head_dim], dtype */
  const void* k_cache;  /* [num_blocks, block_size, kv_heads, head_dim], kv_dtype */
  const void* v_cache;  /* [num_blocks, block_size, kv_heads, head_dim], kv_dtype */
  void* o;              /* [total_queries, heads, head_dim], dtype */
  const int32_t* cu_seqlens_q; /* [batch + 1]: 0, then each sequence's end in q */
  const int32_t* context_lens; /* [batch], query_len[b] <= context_lens[b] */
  const int32_t* block_tables; /* [batch, max_blocks_per_seq] */
  const int32_t* host_cu_seqlens_q; /* the same on the host (a scheduler has them) */
  const int32_t* host_context_lens;
  int64_t batch, total_queries, heads, kv_heads, head_dim;
  int64_t block_size, num_blocks, max_blocks_per_seq;
  int64_t longest_context, longest_query; /* host values */
  int64_t window;
  attnbench_score score;
  int32_t dtype, kv_dtype;
  float k_scale, v_scale;
  attnbench_rope rope;
} attnbench_ragged_params;

/* attention_backward: the gradients of prefill attention (attnbench_attention_params' math and
 * masks) as a training step needs them, from dO, the forward's output O and its log-sum-exp.
 * Per (batch, query head h), with s = scale * q.k, z = cap(s) + bias + mask (the score options
 * and masks of attention): P = exp(z - lse), D_i = rowsum(dO_i * O_i), dP = dO V^T,
 * dS = P * (dP - D) * cap'(s) (cap' = 1 - tanh^2(s / softcap), 1 without soft-capping),
 * dQ = scale * dS K, dK = scale * dS^T Q, dV = P^T dO; dK and dV of kv head g summed over its
 * query heads h (h / (heads / kv_heads) == g). Dense layouts, attention's: row i of head h of q,
 * o, d_o and dq at ((b * seq_q + i) * heads + h) * head_dim; row j of kv head g of k, v, dk and
 * dv at ((b * seq_k + j) * kv_heads + g) * head_dim. Query i sits at position i + q_offset and
 * sees key j when j <= i + q_offset (causal) and |i + q_offset - j| < window (window > 0; only
 * the past side when causal). A query that sees no key has dq = 0 and adds nothing to dk, dv;
 * a key no query sees has dk = dv = 0: every element of dq, dk and dv is written. Attention
 * sinks are not in this op (score.sinks is 0), nor RoPE or block-sparse masks. */
typedef struct attnbench_attention_backward_params {
  const void* q;    /* [batch, seq_q, heads, head_dim] */
  const void* k;    /* [batch, seq_k, kv_heads, head_dim] */
  const void* v;    /* [batch, seq_k, kv_heads, head_dim] */
  const void* o;    /* [batch, seq_q, heads, head_dim]: the forward's output, in dtype */
  const void* d_o;  /* [batch, seq_q, heads, head_dim]: dL/dO */
  /* [batch, heads, seq_q] fp32: the forward's log-sum-exp of each query's logits z, natural log,
   * score units (p = exp(z - lse)); +inf for a query that sees no key. */
  const float* lse;
  void* dq;         /* [batch, seq_q, heads, head_dim] */
  void* dk;         /* [batch, seq_k, kv_heads, head_dim] */
  void* dv;         /* [batch, seq_k, kv_heads, head_dim] */
  int64_t batch, heads, kv_heads, seq_q, seq_k, head_dim;
  int64_t q_offset;   /* seq_k - seq_q (bottom-right causal alignment), or 0 (top-left) */
  int64_t window;     /* 0 = none */
  int32_t causal;     /* 0 or 1 */
  attnbench_score score;
  int32_t dtype;      /* q, k, v, o, d_o, dq, dk and dv: fp32, fp16 or bf16 */
} attnbench_attention_backward_params;

/* mla: DeepSeek-V2/V3's multi-head latent attention decode over a paged latent cache, as FlashMLA
 * serves it (flash_mla_with_kvcache with one kv head, d = width, d_v = latent_dim). Every query
 * head reads the same cached rows: a token's row is width = latent_dim + rope_dim values (512
 * latent, then 64 RoPE: 576), the key the whole row, the value its first latent_dim values; the
 * projections are absorbed into q (width wide) and o (latent_dim wide). Sequence b holds
 * context_lens[b] tokens and its s_q query tokens are the last s_q of them: query token t, head h
 * (row ((b * s_q + t) * heads + h) of q and o) sees keys j <= context_lens[b] - s_q + t with
 * causal (bottom-right within its sequence), every j < context_lens[b] without. Score s_j =
 * scale * q . K[j] over the whole width, an exact softmax over the keys it sees, o = sum_j P_j *
 * K[j][0 .. latent_dim). No other score option, mask or RoPE (the cached RoPE values and the
 * queries' are turned already). Token j of sequence b is slot j % block_size of block
 * block_tables[b * max_blocks_per_seq + j / block_size]; its row is token_bytes bytes at
 * cache + (block * block_size + slot) * token_bytes. kv_dtype == dtype: the row is width values
 * of dtype. kv_dtype == ATTNBENCH_FP8_E4M3: FlashMLA's fp8 layout (656 bytes at 512 + 64):
 * latent_dim e4m3 codes, then latent_dim / 128 fp32 scales (little-endian), then rope_dim bf16
 * RoPE values, whatever dtype is; latent value i is code i times the scale of its 128-value tile
 * (attnbench writes powers of two: the product is exact in fp32), the RoPE values are not
 * quantised. A variant may refuse the fp8 layout in supports(). Table entries past
 * a sequence's last block, and every slot no token owns (the tail of each sequence's last block
 * too), hold NaN (all-ones bytes): a kernel that reads past a context fails. */
typedef struct attnbench_mla_params {
  const void* q;      /* [batch, s_q, heads, latent_dim + rope_dim], dtype */
  const void* cache;  /* [num_blocks, block_size, token_bytes] bytes (see above) */
  void* o;            /* [batch, s_q, heads, latent_dim], dtype */
  const int32_t* block_tables; /* [batch, max_blocks_per_seq] */
  const int32_t* context_lens; /* [batch], each >= s_q */
  /* context_lens on the host as well, as a serving engine's scheduler has them (FlashMLA's
   * get_mla_metadata plans its splits from them); NULL = not given. */
  const int32_t* host_context_lens;
  int64_t batch, s_q, heads, latent_dim, rope_dim;
  int64_t block_size, num_blocks, max_blocks_per_seq;
  int64_t longest_context; /* the largest context_lens entry (host value) */
  int64_t token_bytes;     /* bytes of one cached token: width * bytes of dtype, or the fp8 layout's */
  float scale;             /* the softmax scale (1/sqrt(latent_dim + rope_dim) unless the case sets one) */
  int32_t causal;          /* 0 or 1 */
  int32_t dtype;           /* q and o: fp32, fp16 or bf16 */
  int32_t kv_dtype;        /* dtype (the row in dtype) or ATTNBENCH_FP8_E4M3 (FlashMLA's fp8 layout) */
} attnbench_mla_params;

/* One variant. `params` points at the struct of the variant's op. */
typedef struct attnbench_variant {
  const char* name;  /* letters, digits and _; unique among the op's variants, built-in ones included */
  const char* note;  /* one line for `attnbench list` */
  int32_t op;        /* ATTNBENCH_OP_* */
  /* NULL when the variant can run `params` on `device`, else why not, in a few words
   * (a string that outlives the call). The pointer may be NULL: it runs everything. */
  const char* (*supports)(const void* params, const attnbench_device* device);
  /* Scratch bytes the launch needs, 256-byte aligned when given. May be NULL: none. */
  size_t (*workspace)(const void* params);
  /* Queues the variant's kernels on `stream` and returns cudaGetLastError() or the first
   * error. It must not synchronize, allocate or write outside the output and workspace:
   * attnbench times, replays in CUDA graphs and checks what it queues. */
  cudaError_t (*launch)(const void* params, void* workspace, cudaStream_t stream);
} attnbench_variant;

typedef struct attnbench_plugin {
  int32_t abi_version; /* ATTNBENCH_PLUGIN_ABI_VERSION when the plugin was built */
  int32_t count;
  const attnbench_variant* variants;
} attnbench_plugin;

/* The one symbol attnbench looks up. */
#define ATTNBENCH_PLUGIN_ENTRY "attnbench_plugin_entry"

#ifdef __cplusplus
#define ATTNBENCH_PLUGIN_EXTERN_C extern "C"
#else
#define ATTNBENCH_PLUGIN_EXTERN_C
#endif

/* Declares the plugin's variants: ATTNBENCH_PLUGIN(my_variants), once per file, where
 * my_variants is a static array of attnbench_variant. */
#define ATTNBENCH_PLUGIN(table)                                                                        \
  ATTNBENCH_PLUGIN_EXTERN_C __attribute__((visibility("default"))) const attnbench_plugin*             \
  attnbench_plugin_entry(void) {                                                                       \
    static const attnbench_plugin plugin = {ATTNBENCH_PLUGIN_ABI_VERSION,                              \
                                            (int32_t)(sizeof(table) / sizeof((table)[0])), (table)};   \
    return &plugin;                                                                                    \
  }

#endif /* ATTNBENCH_PLUGIN_H */
