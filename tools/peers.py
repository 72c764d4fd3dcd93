#!/usr/bin/env python3
# Tool: times the peer libraries (PyTorch) on the cases/perf shapes, the yardstick for our timings.
"""Times the peer libraries on the shapes of cases/perf/*.toml, the yardstick for `attnbench run cases/perf`.

What it measures, per case point (a case's [sweep] expanded as attnbench expands it):
  softmax    torch.softmax over the last dim of x [rows, cols]
  gemm       torch.matmul (cuBLAS; TF32 off): nt C = A·Bᵀ with b [batch, n, k], nn C = A·B with b [batch, k, n]
  attention  torch SDPA, FLASH_ATTENTION (FA2) and CUDNN_ATTENTION backends (fp32: EFFICIENT_ATTENTION), on
             q [b, seq_q, heads, d], k, v [b, seq_k, kv_heads, d] (attnbench's layouts, seen as [b, h, s, d]),
             enable_gqa when kv_heads < heads, causal aligned bottom-right; a case with a `softcap` key also gets
             FlexAttention (torch.compile'd flex_attention, Triton) with score_mod softcap·tanh(score/softcap), at
             every point of the case (softcap 0 too: its own yardstick for the cap's cost; SDPA takes no cap)
  decode     the same backends with seq_q = 1 over the first `context` rows of the cache [b, max_context, kv_heads, d]
             (one query sees every key, so no mask)
  paged      dense decode peers on the same contexts, cache in the query dtype (SDPA has no paged or fp8 cache)
  pipeline   its prefill only: causal attention over the prompt
  mha        the layer in PyTorch: F.linear (fused QKV, bias), SDPA on each backend, F.linear (output, bias)
  sample     vLLM's PyTorch-native sampler (its forward_native): logits.float() / T, apply_top_k_top_p (a sort
             of each row, top-k's k-th value, softmax and cumsum of the sorted row for top-p, a scatter back), then
             softmax and the exponential race (probs / Exp(1), argmax); logits N(0, 4.5²) as the op draws them
             (variant torch_sample_sort): PyTorch's sort-based top-p, the yardstick issue 52 sets
  ragged     the batch's prefill part (every sequence with more than one new token) as FlexAttention over the
             concatenated queries and dense keys, a document mask keeping each query to its own sequence's keys,
             causal bottom-right within it (and the window); the decodes are not in it, and the row says so
             (variant torch_flex_prefill)
A peer that cannot run a shape prints "unavailable: reason" instead of a time.

How: each sample is flush, CUDA event, the call, CUDA event, after a warm-up. The flush leaves L2 cold:
`--flush write` (default) zeroes a buffer of twice the L2 size, as Triton's do_bench does (the L2 is left full of
dirty lines, whose write-back lands in the timed call); `--flush read` sums that buffer instead (clean lines, as
attnbench's default flush). Samples are taken until they add up to --budget-ms (100) or --max-samples (500), at
least 5, and the median is reported with TFLOP/s (attention: 4·b·h·d per visible (query, key) pair, bottom-right
causal; GEMM 2·m·n·k), GB/s (every tensor read once, the output written once) and the SM clock read while the samples
run (torch.cuda.clock_rate(), which needs pynvml; else "-").

`--report FILE` also writes the rows as an attnbench json report (docs/report.schema.json; a "peer report",
attnbench.version "peers"), rewritten after every row until the run is complete: each row has the case and sweep
point labels attnbench's own reports give that point, a variant (torch_sdpa_flash, torch_sdpa_cudnn,
torch_sdpa_efficient, torch_matmul, torch_softmax; a pipeline case's with the suffix _prefill, an mha case's,
the whole layer in PyTorch, with _layer), status "peer" with
its cold timing (every sample; the median and quartiles as attnbench computes them), or "skipped" with the reason
the peer could not run, and the command that times that row alone. `attnbench report RUN.json --peers FILE` and
app/plot/attnbench_plot.py draw it beside attnbench's variants (docs/results.md). Writing the report needs no torch:
peer_report() is a function of the measurements (tests/test_peers_report.py builds one from made-up samples).

  python3 tools/peers.py [--cases GLOB] [--point LABEL] [--variant NAME] [--flush write|read] [--json FILE]
                         [--report FILE]
  python3 tools/peers.py --list      # the shapes it would time; needs no torch and no GPU
"""
import argparse, contextlib, datetime, fnmatch, glob, itertools, json, math, os, pathlib, shlex, sys, time

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib

CASES = pathlib.Path(__file__).resolve().parent.parent / "cases" / "perf"
BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}  # the dtypes the peers run in, and their element sizes


# ------------------------------------------------------------------------------------------- cases, as attnbench reads them
def case_points(path):
    """Every point of one case file, the first sweep key varying slowest, as dicts: label (this script's own,
    'STEM [k=v,...]'), case and point (the labels attnbench's reports give it: the case's name, and its sweep
    keys as `key=value` joined by spaces, "" without a sweep), stem (the file's), op, dtype and shape (defaulted)."""
    doc = tomllib.loads(path.read_text())
    shape, axes = dict(doc.get("shape", {})), {}
    for key, values in doc.get("sweep", {}).items():  # a range string is the list it names, as attnbench reads it
        axes[key] = range_values(values) if isinstance(values, str) and looks_like_range(values) else values
    for key, value in list(shape.items()):  # a list on a shape key is a sweep; for context only a list of lists
        if isinstance(value, list) and (key != "context" or (value and isinstance(value[0], list))):
            axes[key] = shape.pop(key)
    for values in itertools.product(*axes.values()):
        point = dict(zip(axes, values))
        label = path.stem + ("" if not point else " [" + ",".join(f"{k}={fmt(v)}" for k, v in point.items()) + "]")
        label += " prefill" if doc["op"] == "pipeline" else ""
        ours = " ".join(f"{k}={show(v)}" for k, v in point.items())
        dtype = point.pop("dtype", doc.get("dtype", "fp32"))
        yield dict(label=label, case=doc.get("name", path.stem), point=ours, stem=path.stem, op=doc["op"],
                   dtype=dtype, shape=defaults(doc["op"], dtype, {**shape, **point}))


def fmt(v):
    return str(v).lower() if isinstance(v, bool) else str(v).replace(" ", "")


def show(v):
    """A value as attnbench's sweep labels show it (app/case.cpp's show()): 8, bf16, true, 0.5, [1,7,1000]."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "%g" % v  # C++'s ostream default: 6 significant digits
    if isinstance(v, list):
        return "[" + ",".join(show(x) for x in v) + "]"
    return str(v)


def looks_like_range(s):
    """'START:STOP:*FACTOR' or 'START:STOP:+STEP', as app/case.cpp's looks_like_range()."""
    a = s.find(":")
    b = s.find(":", a + 1) if a >= 0 else -1
    return a >= 0 and b >= 0 and b + 1 < len(s) and s[b + 1] in "*+"


def range_values(s):
    """The values of a sweep range, STOP included when the steps reach it (app/case.cpp's range_values())."""
    a = s.find(":")
    b = s.find(":", a + 1)
    parts = s[:a], s[a + 1:b], s[b + 2:]
    if not all(p.isdigit() and p.isascii() and len(p) <= 18 for p in parts):
        raise ValueError(f"sweep range {s!r}: expected START:STOP:*FACTOR or START:STOP:+STEP with whole numbers")
    start, stop, step = map(int, parts)
    times = s[b + 1] == "*"
    if start > stop or (start < 1 or step < 2 if times else step < 1):
        raise ValueError(f"sweep range {s!r}: needs 1 <= START <= STOP and a FACTOR of at least 2" if times else
                         f"sweep range {s!r}: needs START <= STOP and a STEP of at least 1")
    values, v = [], start
    while v <= stop:
        values.append(v)
        v = v * step if times else v + step
    return values


def defaults(op, dtype, s):
    s.setdefault("batch", 1)
    if op == "gemm":
        s.setdefault("layout", "nt")
    if op == "sample":
        for key, value in (("temperature", 1.0), ("top_k", 0), ("top_p", 1.0), ("min_p", 0.0)):
            s.setdefault(key, value)
    if op in ("attention", "decode", "paged", "pipeline", "mha"):
        s.setdefault("kv_heads", s["heads"])
    if op == "mha":
        s.setdefault("head_dim", s["d_model"] // s["heads"])
        s.setdefault("causal", False)
        s.setdefault("window", 0)
        s.setdefault("alibi", False)
    if op == "attention":
        s.setdefault("seq_k", s["seq_q"])
        for key, value in (("causal", False), ("window", 0), ("alibi", False)):
            s.setdefault(key, value)
    if op == "ragged":
        s.setdefault("kv_heads", s["heads"])
        s.setdefault("window", 0)
        s.setdefault("kv_dtype", dtype)
        s["sequences"] = [tuple(p) for p in s["sequences"]] if "sequences" in s else batch_mix(s["mix"])
    if op in ("decode", "paged"):
        if isinstance(s["context"], int):
            s["context"] = [s["context"]] * s["batch"]
        s.setdefault("max_context", max(s["context"]))
        s.setdefault("kv_dtype", dtype)
    return s


def batch_mix(text):
    """vLLM's batch grammar as app/ops/batch_mix.cpp reads it: segments joined by '_', each an optional count then
    q<Q>[s<S>], s<S> or spec<N>s<S>, a number followed by k times 1024. [(query_len, context_len), ...]."""
    import re
    num = r"(\d+)(k?)"
    val = lambda n, k: int(n) * (1024 if k else 1)
    out = []
    for seg in text.split("_"):
        m = re.fullmatch(r"(\d*)(?:q%s(?:s%s)?|s%s|spec(\d+)s%s)" % (num, num, num, num), seg)
        if not m:
            raise ValueError(f"batch mix {text!r}: cannot read {seg!r}")
        count = int(m.group(1) or 1)
        if m.group(2):  # q<Q>[s<S>]
            q = val(m.group(2), m.group(3))
            pair = (q, val(m.group(4), m.group(5)) if m.group(4) else q)
        elif m.group(6):  # s<S>
            pair = (1, val(m.group(6), m.group(7)))
        else:  # spec<N>s<S>
            pair = (int(m.group(8)), val(m.group(9), m.group(10)))
        if not 1 <= pair[0] <= pair[1] or count < 1:
            raise ValueError(f"batch mix {text!r}: {seg!r} is not 1 <= query_len <= context_len")
        out += [pair] * count
    return out


def visible_pairs(sq, sk, causal, window):
    """(query, key) pairs a bottom-right aligned mask lets through, as attnbench's attention_pairs()."""
    pairs = 0
    for i in range(sq):
        pos, lo, hi = i + sk - sq, 0, sk - 1
        if causal:
            hi = min(hi, pos)
        if window:
            lo = max(lo, pos - window + 1)
            hi = hi if causal else min(hi, pos + window - 1)
        pairs += max(0, hi - lo + 1)
    return pairs


def plan(op, dtype, s):
    """What to time: (kind, peers, dims, flops, bytes), or a reason to skip. Peers run in the query dtype."""
    if op == "model":
        return "skip: the model's peer is PyTorch eager GPT-2, tests/gpt2_check.py bench"
    if dtype not in BYTES:
        return f"skip: the peers run in fp32, fp16 or bf16, not {dtype} (the case's bf16 point is the yardstick)"
    e = BYTES[dtype]
    sdpa = ["efficient"] if dtype == "fp32" else ["flash", "cudnn"]
    # Soft-capping: SDPA takes none; FlexAttention takes it as a score_mod, and times every point of a case with
    # a softcap key (the uncapped ones too, its own yardstick for the cap's cost). The attention branch does the rest.
    if op == "attention" and "softcap" in s and dtype != "fp32" and not (
            s.get("scale") or s.get("alibi_slopes") or s.get("causal") == "top_left" or s["window"] or s["alibi"]
            or s.get("rope", "none") != "none"):
        sdpa = ["flex"] if s["softcap"] else sdpa + ["flex"]
    elif s.get("softcap") or s.get("scale") or s.get("alibi_slopes") or s.get("causal") == "top_left":
        return "skip: SDPA's fused backends take no soft-capping, ALiBi slopes or top-left alignment here"
    if s.get("rope", "none") != "none":
        return "skip: SDPA takes no RoPE (the point without it is the peer's yardstick)"
    if op == "ragged":
        if s.get("alibi") or s.get("softcap") or s.get("sinks") or s["kv_dtype"] != dtype:
            return "skip: the FlexAttention peer takes a plain score over a cache in the query dtype"
        pre = [(q, c) for q, c in s["sequences"] if q > 1]
        if not pre:
            return "skip: no prefill part (the peer times the sequences with more than one new token)"
        h, g, d = s["heads"], s["kv_heads"], s["head_dim"]
        pairs = sum(visible_pairs(q, c, True, s["window"]) for q, c in pre)
        nq, nk = sum(q for q, _ in pre), sum(c for _, c in pre)
        return "ragged", ["flex"], dict(s, prefill=pre), 4 * h * d * pairs, e * d * (2 * nq * h + 2 * nk * g)
    if op == "softmax":
        return "softmax", ["torch.softmax"], s, 0, 2 * e * s["rows"] * s["cols"]
    if op == "sample":  # the op's own floor: the logits read once, the tokens written
        if s["temperature"] == 0:
            return "skip: greedy is an argmax, not a sampler"
        return "sample", ["torch_sort"], s, 0, e * s["batch"] * s["vocab"] + 4 * s["batch"]
    if op == "gemm":
        b, m, n, k = s["batch"], s["m"], s["n"], s["k"]
        return "gemm", ["cublas"], s, 2 * b * m * n * k, e * b * (m * k + n * k + m * n)
    if op in ("attention", "pipeline"):
        a = dict(s) if op == "attention" else dict(
            batch=s["batch"], heads=s["heads"], kv_heads=s["kv_heads"], head_dim=s["head_dim"],
            seq_q=s["prompt"], seq_k=s["prompt"], causal=True, window=0, alibi=False)
        if a["window"] or a["alibi"]:
            return "skip: SDPA's fused backends take no sliding window or ALiBi"
        b, h, g, d, sq, sk = (a[k] for k in ("batch", "heads", "kv_heads", "head_dim", "seq_q", "seq_k"))
        flops = 4 * b * h * d * visible_pairs(sq, sk, a["causal"], 0)
        return "attention", sdpa, a, flops, e * b * d * (2 * sq * h + 2 * sk * g)
    if op in ("decode", "paged"):
        if s.get("window"):
            return "skip: SDPA's fused backends take no sliding window"
        if len(set(s["context"])) > 1:
            return "skip: SDPA takes one context for the whole batch; this case's contexts differ"
        b, h, g, d, ctx = s["batch"], s["heads"], s["kv_heads"], s["head_dim"], s["context"][0]
        return "decode", sdpa, s, 4 * b * h * ctx * d, e * b * d * (2 * h + 2 * ctx * g)
    if op == "mha":
        if s["window"] or s["alibi"]:
            return "skip: SDPA's fused backends take no sliding window or ALiBi"
        b, n, dm, h, g, d = (s[k] for k in ("batch", "seq", "d_model", "heads", "kv_heads", "head_dim"))
        width, tokens = (h + 2 * g) * d, b * n
        flops = 2 * tokens * dm * width + 4 * b * h * d * visible_pairs(n, n, s["causal"], 0) + 2 * tokens * h * d * dm
        return "mha", sdpa, s, flops, e * (2 * tokens * dm + width * (dm + 1) + dm * (h * d + 1))
    return f"skip: no peer for op {op}"


def describe(kind, s, dtype):
    if kind == "softmax":
        return f"x [{s['rows']}, {s['cols']}] {dtype}"
    if kind == "sample":
        return (f"logits [{s['batch']}, {s['vocab']}] {dtype}, T {s['temperature']}, top_k {s['top_k']}, "
                f"top_p {s['top_p']}, min_p {s['min_p']}: vLLM's forward_native (sort, cumsum, exponential race)")
    if kind == "gemm":
        b = f"[{s['batch']}, {s['n']}, {s['k']}]" if s["layout"] == "nt" else f"[{s['batch']}, {s['k']}, {s['n']}]"
        return f"{s['layout']}: a [{s['batch']}, {s['m']}, {s['k']}] b {b} {dtype}"
    if kind == "ragged":
        pre = s["prefill"]
        return (f"the prefill part, {len(pre)} sequences: q [{sum(q for q, _ in pre)}, {s['heads']}, {s['head_dim']}] "
                f"over k,v [{sum(c for _, c in pre)}, {s['kv_heads']}, {s['head_dim']}] {dtype}, document mask, causal "
                f"bottom-right in each")
    b, h, g, d = s["batch"], s["heads"], s["kv_heads"], s["head_dim"]
    if kind == "attention":
        causal = " causal" if s["causal"] else ""
        return f"q [{b}, {s['seq_q']}, {h}, {d}] k,v [{b}, {s['seq_k']}, {g}, {d}] {dtype}{causal}"
    if kind == "mha":
        causal = " causal" if s["causal"] else ""
        return f"x [{b}, {s['seq']}, {s['d_model']}] heads {h}, kv_heads {g}, head_dim {d} {dtype}{causal}: F.linear, SDPA, F.linear"
    ctx = f"{s['context'][0]}" + (f" of {s['max_context']}" if s["context"][0] < s["max_context"] else "")
    return f"q [{b}, 1, {h}, {d}] k,v [{b}, {ctx}, {g}, {d}] {dtype}"


# ------------------------------------------------------------------------------------------------------------ timing
def build(torch, kind, peer, s, dtype):
    """(call, context the call runs in): the inputs are made here, the call only computes."""
    dt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    rand = lambda *shape: torch.randn(*shape, device="cuda", dtype=dt)
    if kind == "softmax":
        x = rand(s["rows"], s["cols"])
        return (lambda: torch.softmax(x, dim=-1)), contextlib.nullcontext()
    if kind == "sample":
        logits = rand(s["batch"], s["vocab"]) * 4.5
        return (lambda: torch_sample(torch, logits, s)), contextlib.nullcontext()
    if kind == "gemm":
        torch.backends.cuda.matmul.allow_tf32 = False
        b, m, n, k = s["batch"], s["m"], s["n"], s["k"]
        a = rand(b, m, k).squeeze(0)
        bt = rand(b, n, k).squeeze(0).transpose(-1, -2) if s["layout"] == "nt" else rand(b, k, n).squeeze(0)
        return (lambda: torch.matmul(a, bt)), contextlib.nullcontext()
    if kind == "ragged":  # the prefill part, concatenated; a document mask keeps each query to its own keys
        from torch.nn.attention.flex_attention import flex_attention, create_block_mask
        h, g, d, window, pre = s["heads"], s["kv_heads"], s["head_dim"], s["window"], s["prefill"]
        nq, nk = sum(q for q, _ in pre), sum(c for _, c in pre)
        dev = dict(device="cuda", dtype=torch.int32)
        q_doc = torch.cat([torch.full((q,), i, **dev) for i, (q, _) in enumerate(pre)])
        k_doc = torch.cat([torch.full((c,), i, **dev) for i, (_, c) in enumerate(pre)])
        q_pos = torch.cat([torch.arange(c - q, c, **dev) for q, c in pre])  # a query's position among its keys
        k_pos = torch.cat([torch.arange(c, **dev) for _, c in pre])

        def mask(b_, h_, i, j):
            seen = (q_doc[i] == k_doc[j]) & (k_pos[j] <= q_pos[i])
            return seen & (k_pos[j] > q_pos[i] - window) if window else seen
        block_mask = create_block_mask(mask, None, None, nq, nk)
        q, k, v = (rand(1, n, heads, d).transpose(1, 2) for n, heads in ((nq, h), (nk, g), (nk, g)))
        flex = torch.compile(flex_attention, dynamic=False)
        return (lambda: flex(q, k, v, block_mask=block_mask, enable_gqa=g != h)), contextlib.nullcontext()
    from torch.nn.attention import sdpa_kernel, SDPBackend
    F = torch.nn.functional
    b, h, g, d = s["batch"], s["heads"], s["kv_heads"], s["head_dim"]
    kw = dict(enable_gqa=g != h)
    if peer == "flex":  # compiled on the first call, which run() makes before sampling
        from torch.nn.attention.flex_attention import flex_attention, create_block_mask
        sq, sk, cap = s["seq_q"], s["seq_k"], s.get("softcap", 0)
        q, k, v = (rand(b, n, heads, d).transpose(1, 2) for n, heads in ((sq, h), (sk, g), (sk, g)))
        mask = create_block_mask(lambda b_, h_, i, j: j <= i + (sk - sq), None, None, sq, sk) if s["causal"] else None
        mod = (lambda score, b_, h_, i, j: cap * torch.tanh(score / cap)) if cap else None
        flex = torch.compile(flex_attention, dynamic=False)
        return (lambda: flex(q, k, v, score_mod=mod, block_mask=mask, **kw)), contextlib.nullcontext()
    backend = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
               "efficient": SDPBackend.EFFICIENT_ATTENTION}[peer]
    if kind == "mha":  # the layer as PyTorch writes it: fused QKV linear, SDPA, output linear
        n, dm = s["seq"], s["d_model"]
        x, w_qkv, b_qkv = rand(b, n, dm), rand((h + 2 * g) * d, dm) * dm ** -0.5, rand((h + 2 * g) * d)
        w_o, b_o = rand(dm, h * d) * (h * d) ** -0.5, rand(dm)

        def layer():
            q, k, v = F.linear(x, w_qkv, b_qkv).split([h * d, g * d, g * d], dim=-1)
            q, k, v = (t.view(b, n, -1, d).transpose(1, 2) for t in (q, k, v))
            o = F.scaled_dot_product_attention(q, k, v, is_causal=bool(s["causal"]), **kw)
            return F.linear(o.transpose(1, 2).reshape(b, n, h * d), w_o, b_o)
        return layer, sdpa_kernel([backend])
    if kind == "attention":
        sq, sk = s["seq_q"], s["seq_k"]
        q, k, v = rand(b, sq, h, d), rand(b, sk, g, d), rand(b, sk, g, d)  # attnbench's [b, s, h, d]
        if s["causal"] and sq == sk:
            kw["is_causal"] = True
        elif s["causal"]:  # SDPA's is_causal is top-left when seq_q != seq_k
            from torch.nn.attention.bias import causal_lower_right
            kw["attn_mask"] = causal_lower_right(sq, sk)
    else:
        q = rand(b, 1, h, d)
        cache = s["max_context"]
        k, v = rand(b, cache, g, d)[:, :s["context"][0]], rand(b, cache, g, d)[:, :s["context"][0]]
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # views as [b, h, s, d]: SDPA's order, attnbench's memory
    return (lambda: F.scaled_dot_product_attention(q, k, v, **kw)), sdpa_kernel([backend])


def torch_sample(torch, logits, s):
    """vLLM v1's PyTorch-native sampler (TopKTopPSampler.forward_native with apply_top_k_top_p, min-p before it as
    its logits processor does): the sort-based way."""
    x = logits.float() / s["temperature"]
    if s["min_p"] > 0:
        p = torch.softmax(x, dim=-1)
        x = x.masked_fill(p < s["min_p"] * p.amax(dim=-1, keepdim=True), float("-inf"))
    k, top_p = s["top_k"], s["top_p"]
    if (0 < k < x.shape[-1]) or top_p < 1:
        x_sort, x_idx = x.sort(dim=-1, descending=False)
        if 0 < k < x.shape[-1]:
            x_sort = x_sort.masked_fill(x_sort < x_sort[:, -k:-k + 1], float("-inf"))
        if top_p < 1:
            cum = x_sort.softmax(dim=-1).cumsum(dim=-1)
            mask = cum <= 1 - top_p
            mask[:, -1] = False
            x_sort = x_sort.masked_fill(mask, float("-inf"))
        x = x.scatter(dim=-1, index=x_idx, src=x_sort)
    probs = x.softmax(dim=-1)
    return probs.div_(torch.empty_like(probs).exponential_()).argmax(dim=-1)


def clock_mhz(torch):
    try:
        return torch.cuda.clock_rate()
    except Exception:
        return None


def sample(torch, call, flush, budget_ms, max_samples):
    """Samples, each flush, event, call, event, in the order taken; the SM clock read once per round of up to 10
    samples, while the card runs it (the readings there were); and the wall time the sampling took, in ms."""
    for _ in range(10):  # warm-up: plans, autotuning, clocks
        flush()
        call()
    torch.cuda.synchronize()
    times, mhz, began = [], [], time.perf_counter()
    while len(times) < max_samples and (sum(times) < budget_ms or len(times) < 5):
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(min(10, max_samples - len(times)))]
        for start, end in events:
            flush()
            start.record()
            call()
            end.record()
        reading = clock_mhz(torch)  # the card is busy with this round
        if reading:
            mhz.append(reading)
        torch.cuda.synchronize()
        times += [start.elapsed_time(end) for start, end in events]
    return times, mhz, 1e3 * (time.perf_counter() - began)


def flusher(torch, mode):
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 64 << 20
    buf = torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")
    return (lambda: buf.zero_()) if mode == "write" else (lambda: buf.sum())


def run(selected, flush_mode, budget_ms=100, max_samples=500, report=print, variant=None, on_result=None):
    """Times every peer of every selected point (only `variant`'s, when given); returns the results, one for each
    peer of a point that has peers: point (select's), peer, flops, bytes and either samples_ms, mhz, elapsed_ms (as
    sample() gives them) or unavailable (why). on_result(results) is called after each."""
    import torch
    flush, results = flusher(torch, flush_mode), []
    report(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, flush {flush_mode}")
    report(f"{'case':58s} {'peer':14s} {'ms':>9s} {'TFLOP/s':>8s} {'GB/s':>8s} {'MHz':>5s}")
    for p in selected:
        label, op, dtype, what = p["label"], p["op"], p["dtype"], p["plan"]
        if isinstance(what, str):
            report(f"{label:58s} {what}")
            continue
        kind, peers, s, flops, nbytes = what
        for peer in peers:
            if variant is not None and variant_name(op, peer) != variant:
                continue
            result = dict(point=p, peer=peer, flops=flops, bytes=nbytes)
            try:
                call, ctx = build(torch, kind, peer, s, dtype)
                with ctx:
                    call()  # a backend that cannot run this shape raises here
                    samples, mhz, elapsed_ms = sample(torch, call, flush, budget_ms, max_samples)
                result.update(samples_ms=samples, mhz=mhz, elapsed_ms=elapsed_ms)
                row = json_row(result, flush_mode)
                tf = f"{row['tflops']:8.1f}" if flops else f"{'-':>8s}"
                report(f"{label:58s} {peer:14s} {row['ms']:9.4f} {tf} {row['gbps']:8.0f} {row['sm_mhz'] or '-':>5}")
            except Exception as err:  # includes out of memory: the next peer and case still run
                for key in ("samples_ms", "mhz", "elapsed_ms"):
                    result.pop(key, None)
                result["unavailable"] = (str(err).strip().splitlines() or [type(err).__name__])[0][:100]
                report(f"{label:58s} {peer:14s} unavailable: {result['unavailable']}")
            results.append(result)
            if on_result:
                on_result(results)
            call = ctx = None
            torch.cuda.empty_cache()
    return results


def device_facts(torch):
    """The report's "device": what torch tells (and pynvml, when it is there: the driver, the SM clock's maximum)."""
    index = torch.cuda.current_device()
    p = torch.cuda.get_device_properties(index)
    d = dict(name=p.name, index=index, sm_count=p.multi_processor_count, compute_capability=f"{p.major}.{p.minor}",
             memory_bytes=p.total_memory, cuda_runtime=torch.version.cuda or "", sm_clock_max_mhz=0, nvml=False)
    if getattr(p, "L2_cache_size", 0):  # torch >= 2.5
        d["l2_bytes"] = int(p.L2_cache_size)
    if all(isinstance(getattr(p, k, None), int) for k in ("pci_domain_id", "pci_bus_id", "pci_device_id")):
        d["pci_bus_id"] = f"{p.pci_domain_id:04x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0"
    try:
        import pynvml
        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetCudaDriverVersion()
        d["driver"] = f"{v // 1000}.{v % 1000 // 10}"  # as attnbench writes it
        handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda._get_nvml_device_index(index))
        mhz = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)
        if mhz > 0 and clock_mhz(torch):
            d["sm_clock_max_mhz"], d["nvml"] = float(mhz), True
    except Exception:
        pass
    return d


# ------------------------------------------------------------------------------------------------- what it writes
# The report's variant for each peer (the name this script's table and --json give it).
VARIANTS = {"flash": "torch_sdpa_flash", "cudnn": "torch_sdpa_cudnn", "efficient": "torch_sdpa_efficient",
            "cublas": "torch_matmul", "torch.softmax": "torch_softmax", "flex": "torch_flex",
            "torch_sort": "torch_sample_sort"}
LOW_CLOCK = 0.9  # a clock reading below this fraction of the maximum is low (app/clocks.hpp's kLowClock)
# The report layout written (app/report.hpp's kJsonSchema when this was written): raise it with the schema once
# the keys written here are checked against the new one (tests/test_peers_report.py fails until then).
SCHEMA = 4


def variant_name(op, peer):
    """The report's variant: a pipeline case's peers time its prefill only, and say so, as a ragged case's (its
    sequences of more than one new token); an mha case's time the whole layer (F.linear, SDPA, F.linear)."""
    return VARIANTS.get(peer, peer) + {"pipeline": "_prefill", "mha": "_layer", "ragged": "_prefill"}.get(op, "")


def json_row(result, flush):
    """One row of --json: the median is the upper middle sample; tflops null without flops."""
    p = result["point"]
    row = dict(case=p["label"], op=p["op"], dtype=p["dtype"], peer=result["peer"], flush=flush)
    if "unavailable" in result:
        row["unavailable"] = result["unavailable"]
        return row
    times, flops, nbytes = sorted(result["samples_ms"]), result["flops"], result["bytes"]
    ms = times[len(times) // 2]
    row.update(ms=ms, samples=len(times), sm_mhz=result["mhz"][-1] if result["mhz"] else None,
               gbps=nbytes / ms / 1e6, tflops=flops / ms / 1e9 if flops else None)
    return row


def quantile(xs, q):
    """Of sorted xs, interpolated, as app/stats.cpp's quantile()."""
    if not xs:
        return 0.0
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (pos - lo) * (xs[hi] - xs[lo])


def summarize(samples):
    """The statistics attnbench's timings give (app/stats.cpp's summarize())."""
    xs = sorted(samples)
    median = quantile(xs, 0.5)
    mad = quantile(sorted(abs(x - median) for x in xs), 0.5)
    return dict(median_ms=median, min_ms=xs[0], max_ms=xs[-1], q1_ms=quantile(xs, 0.25), q3_ms=quantile(xs, 0.75),
                mean_ms=sum(xs) / len(xs), noise=1.4826 * mad / median if median > 0 else 0.0, samples=len(xs))


def row_command(result, meta):
    """The command that times this row alone."""
    p = result["point"]
    words = ["python3", meta["script"], "--cases", glob.escape(p["stem"])]
    if p["point"]:
        words += ["--point", p["point"]]
    words += ["--variant", variant_name(p["op"], result["peer"]), "--flush", meta["flush"]]
    if meta.get("budget_ms", 100) != 100:
        words += ["--budget-ms", f"{meta['budget_ms']:g}"]
    if meta.get("max_samples", 500) != 500:
        words += ["--max-samples", str(meta["max_samples"])]
    return shlex.join(words)


def report_row(result, meta):
    """One result as a row of an attnbench json report (app/report.cpp's row_json(), for a peer)."""
    p = result["point"]
    row = dict(case=p["case"], point=p["point"], op=p["op"], dtype=p["dtype"],
               variant=variant_name(p["op"], result["peer"]), baseline=False, command=row_command(result, meta),
               flops=float(result["flops"]), bytes=float(result["bytes"]),
               peer=dict(library=meta["library"], version=meta["version"], backend=result["peer"],
                         flush=meta["flush"]))
    if "unavailable" in result:
        row.update(status="skipped", reason=result["unavailable"])
        return row
    t = dict(mode="cold", **summarize(result["samples_ms"]), launches_per_sample=1,
             elapsed_ms=result["elapsed_ms"], hold_timeouts=0)
    if not t["median_ms"] > 0:  # no rate to give, and compare divides by the median
        row.update(status="skipped", reason="the median sample is 0 ms (below the CUDA events' resolution)")
        return row
    readings, max_mhz = [m for m in result["mhz"] if m > 0], float(meta["device"].get("sm_clock_max_mhz", 0))
    if readings:  # as app/clocks.cpp's summarize_clocks(): each reading of a round, not of a sample
        t["clock"] = dict(mean_mhz=sum(readings) / len(readings), max_mhz=max_mhz, samples=len(readings),
                          low_samples=sum(max_mhz > 0 and m < LOW_CLOCK * max_mhz for m in readings))
    median = t["median_ms"]
    row.update(status="peer", timing=dict(t, samples_ms=[float("%.7g" % ms) for ms in result["samples_ms"]]),
               timings={"cold": t}, tflops=row["flops"] / (median * 1e9), gbps=row["bytes"] / (median * 1e6))
    return row


def peer_report(results, meta):
    """The attnbench json report (schema SCHEMA) of run()'s results: a pure function of them and of meta, which holds
    command (this run's, shell-quoted), date (UTC, ISO 8601), elapsed_ms, complete, device (device_facts()),
    library and version (the peers', "torch" and torch.__version__), flush, script (this script's path, for the
    rows' commands), budget_ms and max_samples (--budget-ms and --max-samples)."""
    return {"schema": SCHEMA,
            "attnbench": dict(version="peers", command=meta["command"], date=meta["date"], mode="run",
                              timing_mode="cold", load_ms=0.0, elapsed_ms=meta["elapsed_ms"],
                              complete=meta["complete"]),
            "device": meta["device"],
            "rows": [report_row(r, meta) for r in results]}


def write_json(path, doc, **kw):
    """Whole or not at all: a reader never sees half a file."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, **kw)
        f.write("\n")
    os.replace(tmp, path)


# ------------------------------------------------------------------------------------------------------------- main
def select(pattern, point=None):
    """Every point of the cases/perf files whose name (with or without .toml) matches pattern (and whose attnbench
    label is point, when given), as case_points() gives them with plan: plan()'s answer."""
    for path in sorted(CASES.glob("*.toml")):
        if fnmatch.fnmatch(path.name, pattern) or fnmatch.fnmatch(path.stem, pattern):
            for p in case_points(path):
                if point is None or p["point"] == point:
                    yield dict(p, plan=plan(p["op"], p["dtype"], p["shape"]))


def parser():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="*", help="glob on the cases/perf file names, e.g. 'decode-*'")
    ap.add_argument("--point", help="only the sweep point attnbench labels so, e.g. 'causal=true' ('' without a sweep)")
    ap.add_argument("--variant", help="only this peer, by its name in the report",
                    choices=[*VARIANTS.values(),
                             *(VARIANTS[p] + suffix for p in ("flash", "cudnn", "efficient") for suffix in ("_prefill", "_layer")),
                             VARIANTS["flex"] + "_prefill"])
    ap.add_argument("--flush", choices=["write", "read"], default="write")
    ap.add_argument("--budget-ms", type=float, default=100, help="stop sampling after this much timed work")
    ap.add_argument("--max-samples", type=int, default=500)
    ap.add_argument("--json", help="write every row to this file")
    ap.add_argument("--report", metavar="FILE", help="write the rows as an attnbench json report (a peer report)")
    ap.add_argument("--list", action="store_true", help="print the shapes and exit (no torch needed)")
    return ap


def main(argv=None):
    ap = parser()
    args = ap.parse_args(argv)
    selected = list(select(args.cases, args.point))
    if not selected:
        ap.error(f"no case in {CASES} matches {args.cases!r}" + ("" if args.point is None else
                                                                  f" with the point {args.point!r}"))
    if args.list:
        for p in selected:
            label, what = p["label"], p["plan"]
            if isinstance(what, str):
                print(f"{label}\n    {what}")
                continue
            kind, peers, s, flops, nbytes = what
            work = (f"{flops / 1e9:.4g} GFLOP, " if flops else "") + f"{nbytes / 1e6:.4g} MB"
            print(f"{label}\n    {describe(kind, s, p['dtype'])}: {' '.join(peers)} ({work})")
        return
    on_result, began = None, time.perf_counter()
    if args.report:
        import torch
        script = sys.argv[0] if argv is None else __file__
        meta = dict(command=shlex.join(["python3", script, *(sys.argv[1:] if argv is None else argv)]),
                    date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    device=device_facts(torch), library="torch", version=torch.__version__, flush=args.flush,
                    script=script, budget_ms=args.budget_ms, max_samples=args.max_samples)

        def on_result(results, complete=False):
            meta.update(elapsed_ms=1e3 * (time.perf_counter() - began), complete=complete)
            write_json(args.report, peer_report(results, meta), indent=1, sort_keys=True, allow_nan=False)
        on_result([])
    results = run(selected, args.flush, args.budget_ms, args.max_samples, report=lambda line: print(line, flush=True),
                  variant=args.variant, on_result=on_result)
    if args.json:
        import torch
        rows = [json_row(r, args.flush) for r in results]
        with open(args.json, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows), f, indent=1)
    if args.report:
        on_result(results, complete=True)


if __name__ == "__main__":
    main()
