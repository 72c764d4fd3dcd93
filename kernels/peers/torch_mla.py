# Peer: the absorbed multi-head latent attention (DeepSeek-V2/V3's MLA decode, op mla, issue 49)
# written in PyTorch, as a variant verified against the fp64 reference and timed by attnbench's own
# loop beside our rungs (naive, split_kv, split_kv_reg), in the same call:
#   attnbench verify smoke/mla --plugin kernels/peers/torch_mla.py -k torch_mla -k naive
#   attnbench run cases/perf/mla-bf16-b64-h16-s1-ctx16384.toml --plugin kernels/peers/torch_mla.py
#
# What the row runs, all of it inside the timed launch:
#   1. the gather: every sequence's cached rows read out of the paged latent cache through its
#      block table into a dense [batch, L, token] tensor, L = the longest context (p.longest_context,
#      a host value): token j of sequence b is slot j % block_size of block block_tables[b, j //
#      block_size] (plugin.h). Positions past a sequence's context are clamped to its last token, so
#      the NaN the cache holds past each context is never read; the softmax masks them. One
#      torch.gather of the table and one index_select of the rows: a pass a paged kernel does not
#      make, and shorter sequences are padded to the longest (their padding is computed and masked),
#      which is how a batched-matmul implementation pays for a ragged batch.
#   2. the rows in fp32: a cache in the dtype converted (.float()); FlashMLA's fp8 layout dequantised
#      exactly as the op defines it: the 512 e4m3 codes converted to fp32 and multiplied by the fp32
#      scale of their 128-value tile (one rounding, of an exact product wherever the scale is a power
#      of two, as attnbench writes them), the 64 bf16 RoPE values converted.
#   3. the absorbed attention as two batched matmuls and a softmax, fp32 throughout: scores =
#      scale * q . [latent, rope]^T over the whole 576-wide row ([batch, s_q * heads, L], one torch.bmm
#      per launch, q converted to fp32), the keys a query token does not see set to -inf (causal:
#      query token t of sequence b sees keys j <= context_lens[b] - s_q + t, bottom-right within its
#      sequence; without causal every j < context_lens[b]), torch.softmax, then o = P . latent[:, :512]
#      (a second torch.bmm over the rows' first latent_dim columns, a strided view, no copy), written
#      into attnbench's o (fp32: by bmm's out=; fp16/bf16: one copy_ that rounds it).
# The matmuls are cuBLAS's fp32 GEMMs with TF32 off: with torch's fp32 matmul precision other than
# "highest" (torch.set_float32_matmul_precision, allow_tf32) their operands would be rounded to 10
# mantissa bits, so supports() refuses then. Nothing is
# rounded below fp32 before o, so the row is at least as accurate as the dtype-faithful reference;
# its cost is the fp32 copies (the rows, the score matrix and P in memory: about batch * L *
# (4 * width + 8 * s_q * heads) bytes of temporaries, refused above half the card's memory).
#
# What it refuses, and why: a cache in a dtype other than the queries' (the op has none), a layout it
# does not know (kv_dtype neither the dtype nor FlashMLA's fp8), an fp8 cache whose latent_dim is not
# a multiple of 128 (the op's shape check refuses those too), TF32 matmuls, temporaries over half the
# card's memory. fp32 queries and the fp8 cache are computed exactly as defined, so both run.
# The launch only queues work on attnbench's stream: no .item(), no host copy; the index tensors
# (positions 0..L-1, the query tokens' offsets) are made once per (L, s_q) and kept, so a CUDA graph
# of the launch only reads them.
# Run on an H100 80GB HBM3 (run 277, cold L2, the rungs in the same call): verified beside naive,
# 172 passed, 0 failed; b64 h16 s1 ctx16384 bf16 5.1552 ms (split_kv 0.5625, split_kv_reg 0.4709),
# its fp8 twin 6.9684 ms (split_kv_reg 0.5644), the compute-bound b64 h128 s1 ctx4096 bf16 2.5277 ms
# (split_kv 0.4725).
import attnbench
import torch

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
FP8 = "float8_e4m3fn"
TILE = 128  # latent values per fp32 scale in FlashMLA's fp8 layout


def _temporaries(p):
    """Bytes of the launch's temporaries: the gathered rows (in the cache's bytes) and their fp32
    copy, the index tensors, the scores and P, and q in fp32."""
    width = p.latent_dim + p.rope_dim
    keys = p.batch * p.longest_context
    rows = p.batch * p.s_q * p.heads
    return keys * (p.token_bytes + 4 * width + 3 * 8) + rows * (2 * 4 * p.longest_context + 4 * width)


def _tf32_on():
    """Whether this torch may run fp32 matmuls in TF32 or bf16 passes: torch's own setting
    ("highest" unless torch.set_float32_matmul_precision or allow_tf32 changed it)."""
    return torch.get_float32_matmul_precision() != "highest"


def mla_supports(p, device):
    if p.dtype not in DTYPES:
        return "takes fp32, fp16 or bf16 queries, not %s" % p.dtype
    if p.kv_dtype not in (p.dtype, FP8):
        return "a cache in the queries' dtype or FlashMLA's fp8 layout only (not %s)" % p.kv_dtype
    if p.kv_dtype == FP8 and p.latent_dim % TILE:
        return "FlashMLA's fp8 layout has one scale per 128 latent values: latent_dim %d" % p.latent_dim
    need = _temporaries(p)
    if need > device.total_memory // 2:
        return "the padded fp32 rows, scores and P take %.1f GiB" % (need / 2**30)
    if torch.cuda.is_available() and _tf32_on():
        return "fp32 matmul precision is %r, not 'highest': the fp32 bmm would round its operands (TF32)" % (
            torch.get_float32_matmul_precision())
    return None


_positions = {}  # (L, s_q, device) -> (arange(L), arange(s_q)), int64


def _index(L, s_q, dev):
    key = (L, s_q, dev)
    if key not in _positions:
        _positions[key] = (torch.arange(L, device=dev), torch.arange(s_q, device=dev))
    return _positions[key]


def gather_rows(cache, tables, ctx, block_size, L, j):
    """[batch, L, token] rows of the paged cache ([num_blocks, block_size, token]) through the block
    tables ([batch, max_blocks] int32): row j of sequence b is its token min(j, ctx[b] - 1)."""
    batch = tables.shape[0]
    jj = torch.minimum(j.unsqueeze(0), ctx.unsqueeze(1) - 1)  # [batch, L]: never past a context
    blocks = torch.gather(tables, 1, torch.div(jj, block_size, rounding_mode="floor"))
    slots = blocks.long() * block_size + torch.remainder(jj, block_size)
    flat = cache.reshape(-1, cache.shape[-1])  # [num_blocks * block_size, token], a view
    return flat.index_select(0, slots.reshape(-1)).view(batch, L, cache.shape[-1])


def fp32_rows(rows, latent_dim, rope_dim, fp8):
    """The gathered rows as fp32 [batch, L, latent_dim + rope_dim]: a cache in the dtype converted,
    an fp8 one dequantised (code * its tile's scale; the bf16 RoPE values converted)."""
    if not fp8:
        return rows.float()
    batch, L = rows.shape[0], rows.shape[1]
    tiles = latent_dim // TILE
    out = torch.empty(batch, L, latent_dim + rope_dim, dtype=torch.float32, device=rows.device)
    codes = rows[..., :latent_dim].view(torch.float8_e4m3fn).unflatten(-1, (tiles, TILE))
    scales = rows[..., latent_dim:latent_dim + 4 * tiles].view(torch.float32)  # [batch, L, tiles]
    latent = out[..., :latent_dim].unflatten(-1, (tiles, TILE))
    latent.copy_(codes)  # e4m3 -> fp32: exact
    latent.mul_(scales.unsqueeze(-1))
    if rope_dim:
        out[..., latent_dim:].copy_(rows[..., latent_dim + 4 * tiles:].view(torch.bfloat16))
    return out


def mla_forward(q, cache, o, tables, ctx, p):
    """o = the absorbed MLA of q [batch, s_q, heads, width] over the paged latent cache, written
    into o [batch, s_q, heads, latent_dim]. Queues on torch's current stream."""
    batch, s_q, heads, width = q.shape
    L, latent = p.longest_context, p.latent_dim
    j, t = _index(L, s_q, q.device)
    ctx = ctx.long()
    k = fp32_rows(gather_rows(cache, tables, ctx, p.block_size, L, j), latent, p.rope_dim, p.kv_dtype == FP8)
    scores = torch.bmm(q.reshape(batch, s_q * heads, width).float(), k.transpose(1, 2))  # [b, s_q * heads, L]
    scores.mul_(p.scale)
    # Query token t sees keys j < limit[b, t]: context - s_q + t + 1 with causal, context without.
    limit = ctx.unsqueeze(1) - s_q + 1 + t.unsqueeze(0) if p.causal else ctx.unsqueeze(1).expand(batch, s_q)
    hidden = j.view(1, 1, L) >= limit.unsqueeze(-1)  # [batch, s_q, L]
    scores.view(batch, s_q, heads, L).masked_fill_(hidden.unsqueeze(2), float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    out = o.view(batch, s_q * heads, latent)
    if o.dtype == torch.float32:
        torch.bmm(probs, k[..., :latent], out=out)
    else:
        out.copy_(torch.bmm(probs, k[..., :latent]))


@attnbench.variant("mla", supports=mla_supports,
                   note="PyTorch eager absorbed MLA: rows gathered through the block table (index_select, in the "
                        "time) and padded to the longest context, fp32 bmm q.[latent,rope]^T, softmax, fp32 bmm P.latent")
def torch_mla(t, p, stream):
    q, cache, o = torch.from_dlpack(t.q), torch.from_dlpack(t.cache), torch.from_dlpack(t.o)
    tables, ctx = torch.from_dlpack(t.block_tables), torch.from_dlpack(t.context_lens)
    with attnbench.on_stream(stream), torch.no_grad():
        mla_forward(q, cache, o, tables, ctx, p)
