#!/usr/bin/env python3
# Tool: attnbench's fp64 reference checked against PyTorch's SDPA, outside attnbench, on a --dump.
"""Checks attnbench's fp64 reference against PyTorch's scaled_dot_product_attention
on a `--dump` of attention, decode or paged cases, outside attnbench.

    attnbench verify cases/attention/gqa.toml --dump /tmp/d
    python3 tools/npy_sdpa_check.py /tmp/d            # every manifest.json below /tmp/d

For every dumped point it loads q, k, v (numpy), runs SDPA (by default on the GPU in
the case's storage dtype, the way a model would), and compares the rows attnbench's
reference covers with the case's tolerance: |sdpa - ref| <= atol + rtol * |ref|.
The semantics are written out here, independently of attnbench (docs/cases.md):
query i sits at p = i + seq_k - seq_q (bottom right, causal = true or
"bottom_right") or p = i (causal = "top_left"); causal keeps j <= p, a window w
keeps p - j < w (and j - p < w when not causal); ALiBi adds -slope(h) * |p - j|
with ALiBi's slopes (alibi_slopes below) or the case's alibi_slopes; softcap c
turns a score s = scale * q.k into c * tanh(s / c) before bias and masks (computed
explicitly: SDPA has no soft-capping); RoPE (rope = "neox" rotates halves, "gptj"
interleaved pairs, of the first rotary_dim elements, pair i by position *
rope_theta^(-2i/rotary_dim)) turns attention's queries at p and keys at j, and
decode's and paged's query at context - 1 (their caches hold rotated keys), written
out here in fp64; block-sparse masks (sparse_block, sparse_local, sparse_global,
sparse_random) are rebuilt here from their definition and applied as an explicit
mask; a query that sees no key outputs 0. It also
reports how far each dumped variant's output is from SDPA.

Exit status: 0 every point agrees, 1 a mismatch, 2 nothing to check or bad input.
"""
import argparse
import json
import pathlib
import sys

import numpy as np
import torch
import torch.nn.functional as F

TORCH_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def alibi_slopes(heads):
    """ALiBi's slopes as its authors compute them: 2^(-8i/n), i = 1..n, for a power of two n; otherwise
    those of the largest power of two below, then every other slope of twice that count."""
    def power_of_two(n):
        return [2.0 ** (-8.0 * i / n) for i in range(1, n + 1)]
    n = 1
    while n * 2 <= heads:
        n *= 2
    slopes = power_of_two(n) + power_of_two(2 * n)[0::2][: heads - n]
    return torch.tensor(slopes, dtype=torch.float64)


def slopes_of(shape):
    """The case's slopes, ALiBi's standard ones, or None."""
    given = shape.get("alibi_slopes") or []
    if given:
        return torch.tensor(given, dtype=torch.float64)
    return alibi_slopes(shape["heads"]) if shape.get("alibi") else None


def causal_of(shape):
    """(causal, top_left) from the shape's causal: a bool (older dumps) or a word."""
    c = shape.get("causal", False)
    if isinstance(c, bool):
        return c, False
    return c != "none", c == "top_left"


M64 = (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def block_live(shape, heads, seq_q, seq_k, offset, seed):
    """Block-sparse masks [heads, seq_q, seq_k] (True = live) from the sparse_* keys, as docs/cases.md defines
    them: local blocks around the diagonal block of each query block's first position, global rows and columns,
    and sparse_random distinct key blocks per (head, query block), the first draws of a Fisher-Yates shuffle of
    random_bits(seed, 0x5ba75e00000000 + h * q_blocks + b, n) (kernels/common/random.hpp). None when dense."""
    B = shape.get("sparse_block", 0)
    if not B:
        return None
    Q, K = -(-seq_q // B), -(-seq_k // B)
    local, glob, rnd = shape.get("sparse_local", 0), shape.get("sparse_global", 0), shape.get("sparse_random", 0)
    live = np.zeros((heads, Q, K), dtype=bool)
    for h in range(heads):
        for b in range(Q):
            diag = (b * B + offset) // B  # floor division, as for negative positions
            for c in range(K):
                live[h, b, c] = abs(c - diag) <= local or c < glob or b < glob
            order = list(range(K))
            for n in range(min(rnd, K)):
                stream = 0x5BA75E00000000 + h * Q + b
                r = splitmix64(splitmix64((seed * 0x100000001B3 + stream) & M64) ^ n)
                pick = n + r % (K - n)
                order[n], order[pick] = order[pick], order[n]
                live[h, b, order[n]] = True
    full = live.repeat(B, axis=1)[:, :seq_q].repeat(B, axis=2)[:, :, :seq_k]
    return torch.from_numpy(full)


def bias_and_visible(pos, seq_k, heads, causal, window, slopes, blocks=None):
    """Additive float64 mask [heads, len(pos), seq_k] and which rows see any key; blocks: [heads, len(pos), seq_k]
    block-sparse liveness of these rows, or None."""
    p = torch.as_tensor(pos, dtype=torch.int64)[:, None]
    j = torch.arange(seq_k, dtype=torch.int64)[None, :]
    visible = torch.ones(len(pos), seq_k, dtype=torch.bool)
    if causal:
        visible &= j <= p
    if window > 0:
        visible &= (p - j) < window
        if not causal:
            visible &= (j - p) < window
    bias = torch.zeros(heads, len(pos), seq_k, dtype=torch.float64)
    if slopes is not None:
        bias -= slopes[:, None, None] * (p - j).abs().to(torch.float64)[None]
    visible = visible[None].expand(heads, -1, -1)
    if blocks is not None:
        visible = visible & blocks
    bias.masked_fill_(~visible, float("-inf"))
    return bias, visible.any(dim=2)


def rope(x, pos, shape):
    """x [..., n, d] with row r turned to position pos[r] (fp64, explicit)."""
    style = shape.get("rope", "none")
    if style == "none":
        return x
    r = shape.get("rotary_dim") or x.shape[-1]
    inv_freq = float(shape.get("rope_theta", 10000.0)) ** (-torch.arange(0, r, 2, dtype=torch.float64) / r)
    angle = torch.as_tensor(np.asarray(pos), dtype=torch.float64)[:, None] * inv_freq[None, :]  # [n, r/2]
    cos, sin = angle.cos(), angle.sin()
    first = torch.arange(r // 2) if style == "neox" else torch.arange(0, r, 2)
    second = first + r // 2 if style == "neox" else first + 1
    x = x.clone()
    a, b = x[..., first].clone(), x[..., second].clone()
    x[..., first] = a * cos - b * sin
    x[..., second] = b * cos + a * sin
    return x


def sdpa_rows(q, k, v, pos, scale, causal, window, slopes, softcap, dtype, device, blocks=None):
    """Attention for the queries q [heads, n, d] at positions `pos` over k, v [kv_heads, seq_k, d]: PyTorch's
    SDPA, or the same math written out when soft-capping (which SDPA does not have)."""
    heads, kv_heads = q.shape[0], k.shape[0]
    k = k.repeat_interleave(heads // kv_heads, dim=0)
    v = v.repeat_interleave(heads // kv_heads, dim=0)
    bias, sees = bias_and_visible(pos, k.shape[1], heads, causal, window, slopes, blocks)
    to = lambda x: x.to(device=device, dtype=dtype)
    if softcap > 0:
        # Written out in fp32 at least (fp64 when asked), as models compute soft-capping: a 16-bit matmul would
        # round every score to 8 or 11 bits before the tanh.
        wide = torch.float64 if dtype is torch.float64 else torch.float32
        up = lambda x: x.to(device=device, dtype=wide)
        s = (up(q) @ up(k).transpose(-1, -2)) * scale
        s = softcap * torch.tanh(s / softcap) + up(bias)
        out = torch.softmax(s, dim=-1) @ up(v)
    else:
        out = F.scaled_dot_product_attention(to(q)[None], to(k)[None], to(v)[None], attn_mask=to(bias)[None],
                                             scale=scale)[0]
    out = out.to(torch.float64).cpu()
    out[~sees] = 0  # rows that see no key: attnbench outputs 0, SDPA gives NaN
    return out


def check_point(d, m, args):
    shape, op = m["shape"], m["op"]
    load = lambda name: torch.from_numpy(np.load(d / m["inputs"][name]["file"])).to(torch.float64)
    ref = np.load(d / m["reference"]["file"])
    rows = np.load(d / m["reference"]["rows_file"])
    atol, rtol = m["tolerance"]["atol"], m["tolerance"]["rtol"]
    dtype = {"storage": TORCH_DTYPES[m["dtype"]], "float32": torch.float32, "float64": torch.float64}[args.dtype]
    device = args.device
    if dtype is torch.float64 and device == "cuda":
        device = "cpu"  # fp64 SDPA is a math-only path; the CPU does it as well
    heads, scale = shape["heads"], shape["scale"]
    slopes, softcap = slopes_of(shape), shape.get("softcap", 0)
    causal, top_left = causal_of(shape)
    got = np.zeros_like(ref)

    if op == "attention":
        q, k, v = load("q"), load("k"), load("v")  # [b, s, heads, d]
        seq_q, seq_k = shape["seq_q"], shape["seq_k"]
        blocks = block_live(shape, heads, seq_q, seq_k, 0 if top_left else seq_k - seq_q, m.get("case_seed", m["seed"]))
        b_of, i_of, h_of = rows // (seq_q * heads), rows // heads % seq_q, rows % heads
        for b in np.unique(b_of):
            sel = np.nonzero(b_of == b)[0]
            queries = np.unique(i_of[sel])  # only the queries the reference covers
            pos = queries if top_left else queries + seq_k - seq_q
            out = sdpa_rows(rope(q[b, queries].transpose(0, 1), pos, shape),
                            rope(k[b].transpose(0, 1), np.arange(seq_k), shape), v[b].transpose(0, 1),
                            pos, scale, causal, shape["window"], slopes, softcap, dtype, device,
                            None if blocks is None else blocks[:, queries])  # [heads, n, d]
            where = {int(i): n for n, i in enumerate(queries)}
            for r in sel:
                got[r] = out[h_of[r], where[int(i_of[r])]].numpy()
    elif op == "decode":
        q, kc, vc = load("q"), load("k_cache"), load("v_cache")  # q [b, heads, d]; caches [b, max_context, kv_heads, d]
        context = shape["context"]
        b_of, h_of = rows // heads, rows % heads
        for b in np.unique(b_of):
            n = context[b]
            out = sdpa_rows(rope(q[b][:, None], [n - 1], shape), kc[b, :n].transpose(0, 1), vc[b, :n].transpose(0, 1), [n - 1], scale,
                            False, shape.get("window", 0), slopes, softcap, dtype, device)  # [heads, 1, d]
            for r in np.nonzero(b_of == b)[0]:
                got[r] = out[h_of[r], 0].numpy()
    elif op == "paged":
        # The tokens one sequence after another, [tokens, kv_heads, d]; the cache holds them in the kv dtype,
        # an fp8 cache as value / scale with the scale putting the largest |value| at 448.
        q, k, v = load("q"), load("k"), load("v")
        if shape["kv_dtype"] == "fp8_e4m3":
            def stored(x):
                s = x.abs().max() / 448
                return (x / s).to(torch.float8_e4m3fn).to(torch.float64) * s
            k, v = stored(k), stored(v)
        context = shape["context"]
        first = np.concatenate([[0], np.cumsum(context)[:-1]])
        b_of, h_of = rows // heads, rows % heads
        for b in np.unique(b_of):
            n, f = context[b], first[b]
            out = sdpa_rows(rope(q[b][:, None], [n - 1], shape), k[f:f + n].transpose(0, 1), v[f:f + n].transpose(0, 1), [n - 1], scale,
                            False, shape.get("window", 0), slopes, softcap, dtype, device)
            for r in np.nonzero(b_of == b)[0]:
                got[r] = out[h_of[r], 0].numpy()
    else:
        return None

    err = np.abs(got - ref)
    bad = err > atol + rtol * np.abs(ref)
    ok = not bad.any() and np.isfinite(got).all()
    label = f"{m['case']} [{m['point'] or '-'}] seed {m['seed']}"
    print(f"{'ok  ' if ok else 'FAIL'} {label}: SDPA ({str(dtype).replace('torch.', '')}, {device}) vs reference over "
          f"{len(rows)} rows: max abs err {err.max():.2e}, {int(bad.sum())} of {bad.size} outside "
          f"{atol:g} + {rtol:g}*|ref|")
    for name, o in m["outputs"].items():
        out = np.load(d / o["file"]).reshape(m["reference"]["output_view"])[rows].astype(np.float64)
        print(f"       {name}: max abs diff to SDPA {np.nanmax(np.abs(out - got)):.2e}, to reference "
              f"{np.nanmax(np.abs(out - ref)):.2e}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dump", type=pathlib.Path, help="a --dump directory (searched for manifest.json files)")
    ap.add_argument("--dtype", choices=["storage", "float32", "float64"], default="storage",
                    help="SDPA's compute dtype (default: the case's storage dtype)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    manifests = sorted(args.dump.rglob("manifest.json"))
    results = []
    for path in manifests:
        m = json.loads(path.read_text())
        ok = check_point(path.parent, m, args)
        if ok is None:
            print(f"skip {m['case']}: op {m['op']} (only attention, decode and paged)")
        else:
            results.append(ok)
    if not results:
        print(f"{args.dump}: no attention, decode or paged dumps found", file=sys.stderr)
        return 2
    print(f"{results.count(True)} agree, {results.count(False)} disagree")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
