# An example Python plugin: a small FlashAttention-2 forward in Triton, written to be read.
# One program computes BLOCK_M queries of one (batch, head): it walks the keys BLOCK_N at a
# time, keeps the row max m and the sum l of exp in fp32 (the online softmax), rescales its
# output accumulator when m grows, and divides by l once at the end, so the score matrix never
# leaves the SM. Scores are taken in the log2 domain (scale * log2 e folded into one multiply),
# so the exponentials are exp2, the hardware's own instruction.
#   attnbench verify smoke/attention --plugin kernels/plugin/examples/triton_flash_attention.py -k triton_flash
#
# It runs what attnbench's attention op calls plain or causal attention: any seq_q and seq_k
# (the last tiles masked), causal at either alignment (query i at position i + q_offset sees
# key j <= i + q_offset; a query that sees no key outputs 0), GQA (query head h reads kv head
# h // (heads / kv_heads)), head_dim 64 or 128, fp16 or bf16 with fp32 accumulation. It
# refuses the rest (window, ALiBi, soft-capping, sinks, RoPE, block-sparse, fp32, fp8).
# flash_forward() is a plain function on torch tensors: tools/do_bench_check.py times it with
# triton.testing.do_bench, the same code attnbench times here.
import math

import attnbench
import torch
import triton
import triton.language as tl

HEAD_DIMS = (64, 128)
LOG2E = math.log2(math.e)


@triton.jit
def flash_fwd(Q, K, V, O,
              stride_qb, stride_qs, stride_qh,  # element strides of q [batch, seq_q, heads, d]
              stride_kb, stride_ks, stride_kh,  # of k [batch, seq_k, kv_heads, d]
              stride_vb, stride_vs, stride_vh,  # of v, as k
              stride_ob, stride_os, stride_oh,  # of o, as q
              heads, group, seq_q, seq_k, q_offset, scale_log2,
              CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    block_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // heads
    h = bh % heads
    g = h // group  # GQA: the kv head this query head reads

    rows = block_m * BLOCK_M + tl.arange(0, BLOCK_M)  # this program's queries
    dims = tl.arange(0, HEAD_DIM)  # the last dim is contiguous (stride 1) in all four tensors
    q = tl.load(Q + b * stride_qb + h * stride_qh + rows[:, None] * stride_qs + dims[None, :],
                mask=rows[:, None] < seq_q, other=0.0)
    k_base = K + b * stride_kb + g * stride_kh
    v_base = V + b * stride_vb + g * stride_vh

    m = tl.full([BLOCK_M], float("-inf"), tl.float32)  # running max of the scores (log2 units)
    l = tl.zeros([BLOCK_M], tl.float32)  # running sum of exp2(score - m)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)  # running sum of exp2(score - m) * v

    # Causal: no key past the last query's position is seen by any query here, so the loop
    # stops there instead of masking whole tiles away (half the work of a square causal case).
    end = seq_k
    if CAUSAL:
        end = tl.minimum(seq_k, (block_m + 1) * BLOCK_M + q_offset)
    for start in range(0, end, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        k = tl.load(k_base + cols[:, None] * stride_ks + dims[None, :], mask=cols[:, None] < seq_k, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale_log2  # [BLOCK_M, BLOCK_N] scores, fp32, log2 units
        seen = cols[None, :] < seq_k
        if CAUSAL:
            seen = seen & (cols[None, :] <= rows[:, None] + q_offset)
        s = tl.where(seen, s, float("-inf"))

        m_new = tl.maximum(m, tl.max(s, axis=1))
        # A row that has seen no key yet has m_new = -inf; shifting by 0 instead keeps exp2 away
        # from -inf - -inf = NaN (its p and alpha are then exp2(-inf) = 0).
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m - shift)  # rescales what was summed against the old max
        p = tl.exp2(s - shift[:, None])
        l = l * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + cols[:, None] * stride_vs + dims[None, :], mask=cols[:, None] < seq_k, other=0.0)
        # P in the inputs' dtype for the tensor cores, as FlashAttention does; fp32 accumulation.
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m = m_new

    # A query that saw no key has l = 0 and acc = 0: it outputs 0, as attnbench defines it.
    out = acc / tl.where(l == 0.0, 1.0, l)[:, None]
    tl.store(O + b * stride_ob + h * stride_oh + rows[:, None] * stride_os + dims[None, :],
             out.to(O.dtype.element_ty), mask=rows[:, None] < seq_q)


def flash_forward(q, k, v, o, causal, q_offset, scale):
    """o = softmax(q k^T * scale + causal mask) v on torch's current stream. q, o [batch, seq_q,
    heads, d]; k, v [batch, seq_k, kv_heads, d] (attnbench's layouts; any batch stride, the
    last dim contiguous); causal: query i sees key j <= i + q_offset."""
    batch, seq_q, heads, d = q.shape
    seq_k, kv_heads = k.shape[1], k.shape[2]
    if d not in HEAD_DIMS or any(x.stride(-1) != 1 for x in (q, k, v, o)):
        raise ValueError("head_dim 64 or 128 with the last dim contiguous")
    # 128 queries by 64 keys per step: the tile FlashAttention-2 uses on sm_80/90; 8 warps at
    # d128 so each warp's share of the [128, d] accumulator stays in registers; K and V tiles
    # loaded 2 or 3 steps ahead, as many as shared memory holds at that head_dim.
    block_m, block_n = 128, 64
    warps, stages = (4, 3) if d == 64 else (8, 2)
    grid = (triton.cdiv(seq_q, block_m), batch * heads)
    flash_fwd[grid](q, k, v, o,
                    q.stride(0), q.stride(1), q.stride(2),
                    k.stride(0), k.stride(1), k.stride(2),
                    v.stride(0), v.stride(1), v.stride(2),
                    o.stride(0), o.stride(1), o.stride(2),
                    heads, heads // kv_heads, seq_q, seq_k, q_offset, scale * LOG2E,
                    CAUSAL=bool(causal), HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n,
                    num_warps=warps, num_stages=stages)


def supports(p, device):
    if p.dtype not in ("float16", "bfloat16"):
        return "fp16 or bf16 (tensor-core dots)"
    if p.head_dim not in HEAD_DIMS:
        return "head_dim 64 or 128"
    if p.window or p.score.alibi or p.score.softcap or p.score.sinks or p.rope.style != "none" or p.sparse_block:
        return "the example takes plain or causal attention: no window, ALiBi, soft-capping, sinks, RoPE or sparsity"
    if p.batch * p.heads > 65535:
        return "batch * heads is the grid's second dim: at most 65535"
    if device.cc_major < 8:
        return "sm_80 or newer (bf16 and the tile sizes)"
    return None


@attnbench.variant("attention", supports=supports,
                   note="example Triton plugin: FlashAttention-2 forward, 128x64 tiles, exp2 online softmax, "
                        "causal either alignment, GQA, d64/128")
def triton_flash(t, p, stream):
    q, k, v, o = (torch.from_dlpack(x) for x in (t.q, t.k, t.v, t.o))
    with attnbench.on_stream(stream):  # Triton launches on torch's current stream
        flash_forward(q, k, v, o, p.causal, p.q_offset, p.score.scale)

