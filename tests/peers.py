#!/usr/bin/env python3
"""Times the peer libraries on the shapes of cases/perf/*.toml, the yardstick for `attnbench run cases/perf`.

What it measures, per case point (a case's [sweep] expanded as attnbench expands it):
  softmax    torch.softmax over the last dim of x [rows, cols]
  gemm       torch.matmul (cuBLAS; TF32 off): nt C = A·Bᵀ with b [batch, n, k], nn C = A·B with b [batch, k, n]
  attention  torch SDPA, FLASH_ATTENTION (FA2) and CUDNN_ATTENTION backends (fp32: EFFICIENT_ATTENTION), on
             q [b, seq_q, heads, d], k, v [b, seq_k, kv_heads, d] (attnbench's layouts, seen as [b, h, s, d]),
             enable_gqa when kv_heads < heads, causal aligned bottom-right
  decode     the same backends with seq_q = 1 over the first `context` rows of the cache [b, max_context, kv_heads, d]
             (one query sees every key, so no mask)
  paged      dense decode peers on the same contexts, cache in the query dtype (SDPA has no paged or fp8 cache)
  pipeline   its prefill only: causal attention over the prompt
A peer that cannot run a shape prints "unavailable: reason" instead of a time.

How: each sample is flush, CUDA event, the call, CUDA event, after a warm-up. The flush leaves L2 cold:
`--flush write` (default) zeroes a buffer of twice the L2 size, as Triton's do_bench does (the L2 is left full of
dirty lines, whose write-back lands in the timed call); `--flush read` sums that buffer instead (clean lines, as
attnbench's default flush). Samples are taken until they add up to --budget-ms (100) or --max-samples (500), at
least 5, and the median is reported with TFLOP/s (attention: 4·b·h·d per visible (query, key) pair, bottom-right
causal; GEMM 2·m·n·k), GB/s (every tensor read once, the output written once) and the SM clock read while the samples
run (torch.cuda.clock_rate(), which needs pynvml; else "-").

  python3 tests/peers.py [--cases GLOB] [--flush write|read] [--json FILE]
  python3 tests/peers.py --list      # the shapes it would time; needs no torch and no GPU
"""
import argparse, contextlib, fnmatch, itertools, json, pathlib, tomllib

CASES = pathlib.Path(__file__).resolve().parent.parent / "cases" / "perf"
BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8_e4m3": 1}


# ------------------------------------------------------------------------------------------- cases, as attnbench reads them
def points(path):
    """(label, op, dtype, shape) for every point of one case file; the first sweep key varies slowest."""
    doc = tomllib.loads(path.read_text())
    shape, axes = dict(doc.get("shape", {})), dict(doc.get("sweep", {}))
    for key, value in list(shape.items()):  # a list on a shape key is a sweep; for context only a list of lists
        if isinstance(value, list) and (key != "context" or (value and isinstance(value[0], list))):
            axes[key] = shape.pop(key)
    for values in itertools.product(*axes.values()):
        point = dict(zip(axes, values))
        label = path.stem + ("" if not point else " [" + ",".join(f"{k}={fmt(v)}" for k, v in point.items()) + "]")
        label += " prefill" if doc["op"] == "pipeline" else ""
        dtype = point.pop("dtype", doc.get("dtype", "fp32"))
        yield label, doc["op"], dtype, defaults(doc["op"], dtype, {**shape, **point})


def fmt(v):
    return str(v).lower() if isinstance(v, bool) else str(v).replace(" ", "")


def defaults(op, dtype, s):
    s.setdefault("batch", 1)
    if op == "gemm":
        s.setdefault("layout", "nt")
    if op in ("attention", "decode", "paged", "pipeline"):
        s.setdefault("kv_heads", s["heads"])
    if op == "attention":
        s.setdefault("seq_k", s["seq_q"])
        for key, value in (("causal", False), ("window", 0), ("alibi", False)):
            s.setdefault(key, value)
    if op in ("decode", "paged"):
        if isinstance(s["context"], int):
            s["context"] = [s["context"]] * s["batch"]
        s.setdefault("max_context", max(s["context"]))
        s.setdefault("kv_dtype", dtype)
    return s


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
    e = BYTES[dtype]
    sdpa = ["efficient"] if dtype == "fp32" else ["flash", "cudnn"]
    if s.get("softcap") or s.get("scale") or s.get("alibi_slopes") or s.get("causal") == "top_left":
        return "skip: SDPA's fused backends take no soft-capping, ALiBi slopes or top-left alignment here"
    if s.get("rope", "none") != "none":
        return "skip: SDPA takes no RoPE (the point without it is the peer's yardstick)"
    if op == "softmax":
        return "softmax", ["torch.softmax"], s, 0, 2 * e * s["rows"] * s["cols"]
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
    return f"skip: no peer for op {op}"


def describe(kind, s, dtype):
    if kind == "softmax":
        return f"x [{s['rows']}, {s['cols']}] {dtype}"
    if kind == "gemm":
        b = f"[{s['batch']}, {s['n']}, {s['k']}]" if s["layout"] == "nt" else f"[{s['batch']}, {s['k']}, {s['n']}]"
        return f"{s['layout']}: a [{s['batch']}, {s['m']}, {s['k']}] b {b} {dtype}"
    b, h, g, d = s["batch"], s["heads"], s["kv_heads"], s["head_dim"]
    if kind == "attention":
        causal = " causal" if s["causal"] else ""
        return f"q [{b}, {s['seq_q']}, {h}, {d}] k,v [{b}, {s['seq_k']}, {g}, {d}] {dtype}{causal}"
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
    if kind == "gemm":
        torch.backends.cuda.matmul.allow_tf32 = False
        b, m, n, k = s["batch"], s["m"], s["n"], s["k"]
        a = rand(b, m, k).squeeze(0)
        bt = rand(b, n, k).squeeze(0).transpose(-1, -2) if s["layout"] == "nt" else rand(b, k, n).squeeze(0)
        return (lambda: torch.matmul(a, bt)), contextlib.nullcontext()
    from torch.nn.attention import sdpa_kernel, SDPBackend
    F = torch.nn.functional
    b, h, g, d = s["batch"], s["heads"], s["kv_heads"], s["head_dim"]
    kw = dict(enable_gqa=g != h)
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
    backend = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
               "efficient": SDPBackend.EFFICIENT_ATTENTION}[peer]
    return (lambda: F.scaled_dot_product_attention(q, k, v, **kw)), sdpa_kernel([backend])


def clock_mhz(torch):
    try:
        return torch.cuda.clock_rate()
    except Exception:
        return None


def median_ms(torch, call, flush, budget_ms, max_samples):
    """Median of samples, each flush, event, call, event; also the SM clock read while they run."""
    for _ in range(10):  # warm-up: plans, autotuning, clocks
        flush()
        call()
    torch.cuda.synchronize()
    times, mhz = [], None
    while len(times) < max_samples and (sum(times) < budget_ms or len(times) < 5):
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(min(10, max_samples - len(times)))]
        for start, end in events:
            flush()
            start.record()
            call()
            end.record()
        mhz = clock_mhz(torch) or mhz  # the card is busy with this round
        torch.cuda.synchronize()
        times += [start.elapsed_time(end) for start, end in events]
    times.sort()
    return times[len(times) // 2], len(times), mhz


def flusher(torch, mode):
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 64 << 20
    buf = torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")
    return (lambda: buf.zero_()) if mode == "write" else (lambda: buf.sum())


def run(selected, flush_mode, budget_ms=100, max_samples=500, report=print):
    """Times every peer of every selected point; returns the rows."""
    import torch
    flush, rows = flusher(torch, flush_mode), []
    report(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, flush {flush_mode}")
    report(f"{'case':58s} {'peer':14s} {'ms':>9s} {'TFLOP/s':>8s} {'GB/s':>8s} {'MHz':>5s}")
    for label, op, dtype, what in selected:
        if isinstance(what, str):
            report(f"{label:58s} {what}")
            continue
        kind, peers, s, flops, nbytes = what
        for peer in peers:
            row = dict(case=label, op=op, dtype=dtype, peer=peer, flush=flush_mode)
            try:
                call, ctx = build(torch, kind, peer, s, dtype)
                with ctx:
                    call()  # a backend that cannot run this shape raises here
                    ms, samples, mhz = median_ms(torch, call, flush, budget_ms, max_samples)
                row.update(ms=ms, samples=samples, sm_mhz=mhz, gbps=nbytes / ms / 1e6,
                           tflops=flops / ms / 1e9 if flops else None)
                tf = f"{row['tflops']:8.1f}" if flops else f"{'-':>8s}"
                report(f"{label:58s} {peer:14s} {ms:9.4f} {tf} {row['gbps']:8.0f} {mhz or '-':>5}")
            except Exception as err:  # includes out of memory: the next peer and case still run
                row["unavailable"] = (str(err).strip().splitlines() or [type(err).__name__])[0][:100]
                report(f"{label:58s} {peer:14s} unavailable: {row['unavailable']}")
            rows.append(row)
            call = ctx = None
            torch.cuda.empty_cache()
    return rows


def select(pattern):
    """Every point of the cases/perf files whose name (with or without .toml) matches pattern."""
    for path in sorted(CASES.glob("*.toml")):
        if fnmatch.fnmatch(path.name, pattern) or fnmatch.fnmatch(path.stem, pattern):
            for label, op, dtype, s in points(path):
                yield label, op, dtype, plan(op, dtype, s)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="*", help="glob on the cases/perf file names, e.g. 'decode-*'")
    ap.add_argument("--flush", choices=["write", "read"], default="write")
    ap.add_argument("--budget-ms", type=float, default=100, help="stop sampling after this much timed work")
    ap.add_argument("--max-samples", type=int, default=500)
    ap.add_argument("--json", help="write every row to this file")
    ap.add_argument("--list", action="store_true", help="print the shapes and exit (no torch needed)")
    args = ap.parse_args(argv)
    selected = list(select(args.cases))
    if not selected:
        ap.error(f"no case in {CASES} matches {args.cases!r}")
    if args.list:
        for label, op, dtype, what in selected:
            if isinstance(what, str):
                print(f"{label}\n    {what}")
                continue
            kind, peers, s, flops, nbytes = what
            work = (f"{flops / 1e9:.4g} GFLOP, " if flops else "") + f"{nbytes / 1e6:.4g} MB"
            print(f"{label}\n    {describe(kind, s, dtype)}: {' '.join(peers)} ({work})")
        return
    rows = run(selected, args.flush, args.budget_ms, args.max_samples, report=lambda line: print(line, flush=True))
    if args.json:
        import torch
        with open(args.json, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
