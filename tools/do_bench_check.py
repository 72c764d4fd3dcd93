#!/usr/bin/env python3
# Tool: times the Triton FlashAttention example and PyTorch SDPA's flash and cuDNN backends
# with triton.testing.do_bench on the cases/perf prefill shapes, to hold attnbench's medians of
# the same Python variants against the harness most Triton users time with (issue 47).
"""do_bench's medians of the Python attention variants on the cases/perf attention shapes.

Each point of cases/perf/attention-*.toml (op attention; the [sweep] expanded as attnbench
expands it, by tools/peers.py's reader) gets q, k, v in attnbench's layouts ([batch, seq,
heads, head_dim], N(0, 1)), and three calls are timed by triton.testing.do_bench with its
defaults (25 ms of warm-up, 100 ms of samples, the L2 flushed before every sample by zeroing a
256 MB buffer) and return_mode="median":

  triton_flash       kernels/plugin/examples/triton_flash_attention.py's flash_forward()
  torch_sdpa_flash   kernels/peers/torch_sdpa.py's sdpa_forward(..., "flash", ...)
  torch_sdpa_cudnn   the same with "cudnn"

The files are imported by path, so the code timed here is the code attnbench times as the
variants of those names (each file's supports() decides, as in attnbench, whether a point
runs). With --attnbench REPORT.json (an `attnbench run` over the same cases with those
plugins, e.g. `attnbench run cases/perf --plugin kernels/plugin/examples/triton_flash_attention.py
--plugin kernels/peers/torch_sdpa.py -k triton_flash -k 'torch_sdpa_*' -o run.json`) each row
also shows attnbench's median and the ratio do_bench / attnbench. Expect them to agree within
noise above 100 us; below that, and anywhere in detail, the two differ in what they flush
(do_bench zeroes its buffer, leaving dirty lines whose write-back lands in the timed call;
attnbench's cold mode reads its buffer) and in whether the host's launch time can leak into
the events (do_bench records its start event before the Python call; attnbench holds the
stream until the launch is queued).

  python3 tools/do_bench_check.py [--cases GLOB] [--point SUBSTRING] [--attnbench RUN.json] [--json OUT]

Needs torch, triton and a CUDA GPU (exit 2 without them).
"""
import argparse
import glob
import importlib.util
import json
import math
import pathlib
import sys
import types

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))  # peers.py: the case reader
sys.path.insert(0, str(ROOT / "app" / "python"))  # attnbench.py: the decorator the plugin files use

import peers  # noqa: E402

EXAMPLE = ROOT / "kernels" / "plugin" / "examples" / "triton_flash_attention.py"
SDPA = ROOT / "kernels" / "peers" / "torch_sdpa.py"
VARIANTS = ("triton_flash", "torch_sdpa_flash", "torch_sdpa_cudnn")
TORCH_DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp8_e4m3": "float8_e4m3fn"}


def load(path):
    """Runs a plugin file as a module; returns it and its declared variants by name."""
    import attnbench
    del attnbench._declared[:]
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # a real module, so torch.compile can import it by name
    spec.loader.exec_module(module)
    declared = {v.name: v for v in attnbench._declared}
    del attnbench._declared[:]
    return module, declared


def params(s, dtype):
    """The attention params attnbench hands a Python variant (app/python/bridge.cpp), for supports()."""
    ns = types.SimpleNamespace
    top_left = s.get("causal") == "top_left"
    scale = s.get("scale") or 1 / math.sqrt(s["head_dim"])
    return ns(batch=s["batch"], heads=s["heads"], kv_heads=s["kv_heads"], seq_q=s["seq_q"], seq_k=s["seq_k"],
              head_dim=s["head_dim"], q_offset=0 if top_left else s["seq_k"] - s["seq_q"], window=s.get("window", 0),
              causal=bool(s.get("causal")), dtype=TORCH_DTYPES.get(dtype, dtype),
              score=ns(alibi=bool(s.get("alibi") or s.get("alibi_slopes")), scale=scale,
                       scale_log2=scale * math.log2(math.e), softcap=s.get("softcap", 0), sinks=bool(s.get("sinks"))),
              rope=ns(style=s.get("rope", "none"), rotary_dim=0, first=0, rows=0),
              sparse_block=s.get("sparse_block", 0))


def device_facts(torch):
    d = torch.cuda.get_device_properties(torch.cuda.current_device())
    return types.SimpleNamespace(sm_count=d.multi_processor_count, cc_major=d.major, cc_minor=d.minor,
                                 smem_per_block_optin=getattr(d, "shared_memory_per_block_optin", 0),
                                 l2_bytes=getattr(d, "L2_cache_size", 0), total_memory=d.total_memory)


def attnbench_medians(path):
    """{(case, point, variant): median ms} of an attnbench json report's timed rows."""
    out = {}
    for r in json.loads(pathlib.Path(path).read_text()).get("rows", []):
        t = r.get("timing")
        if t and r.get("status") == "verified":
            out[(r["case"], r["point"], r["variant"])] = (t["median_ms"], t["mode"])
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=str(ROOT / "cases" / "perf" / "attention-*.toml"),
                    help="case files (a glob; default cases/perf/attention-*.toml)")
    ap.add_argument("--point", help="only points whose label contains this")
    ap.add_argument("--attnbench", help="an attnbench json report over the same cases, to compare with")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args(argv)
    try:
        import torch
        import triton
        import triton.testing
    except ImportError as e:
        print(f"do_bench_check: needs torch and triton ({e})", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("do_bench_check: needs a CUDA GPU", file=sys.stderr)
        return 2
    import attnbench
    attnbench._device = torch.cuda.current_device()
    example, ex_variants = load(EXAMPLE)
    sdpa, sdpa_variants = load(SDPA)
    supports = {**ex_variants, **sdpa_variants}
    calls = {
        "triton_flash": lambda q, k, v, o, c, off, sc: example.flash_forward(q, k, v, o, c, off, sc),
        "torch_sdpa_flash": lambda q, k, v, o, c, off, sc: sdpa.sdpa_forward(q, k, v, o, "flash", c, off, sc),
        "torch_sdpa_cudnn": lambda q, k, v, o, c, off, sc: sdpa.sdpa_forward(q, k, v, o, "cudnn", c, off, sc),
    }
    ours = attnbench_medians(args.attnbench) if args.attnbench else {}
    dev = device_facts(torch)
    name = torch.cuda.get_device_name()
    files = sorted(glob.glob(args.cases))
    if not files:
        print(f"do_bench_check: no case files match {args.cases}", file=sys.stderr)
        return 2
    print(f"do_bench (median, L2 zeroed before each sample) on {name}, torch {torch.__version__}, "
          f"triton {triton.__version__}")
    header = f"{'point':58} {'variant':18} {'do_bench ms':>12} {'TFLOP/s':>8}"
    if ours:
        header += f" {'attnbench ms':>13} {'ratio':>6}"
    print(header)
    rows = []
    for path in files:
        for pt in peers.case_points(pathlib.Path(path)):
            if pt["op"] != "attention" or (args.point and args.point not in pt["label"]):
                continue
            s, dtype = pt["shape"], pt["dtype"]
            p = params(s, dtype)
            b, h, g, sq, sk, d = (s[k] for k in ("batch", "heads", "kv_heads", "seq_q", "seq_k", "head_dim"))
            flops = 4 * b * h * d * peers.visible_pairs(sq, sk, p.causal, p.window) if p.q_offset == sk - sq else None
            tensors = None
            for variant in VARIANTS:
                row = dict(case=pt["case"], point=pt["point"], label=pt["label"], variant=variant, dtype=dtype)
                why = supports[variant].supports(p, dev)  # the variant's own rule, as in attnbench
                if why:
                    row["unavailable"] = why
                    print(f"{pt['label']:58} {variant:18} unavailable: {why}")
                    rows.append(row)
                    continue
                if tensors is None:
                    dt = getattr(torch, p.dtype)
                    gen = torch.Generator(device="cuda").manual_seed(1)
                    rand = lambda *shape: torch.randn(*shape, generator=gen, device="cuda", dtype=dt)
                    o = torch.empty(b, sq, h, d, device="cuda", dtype=dt)
                    tensors = rand(b, sq, h, d), rand(b, sk, g, d), rand(b, sk, g, d), o
                q, k, v, o = tensors
                fn = lambda: calls[variant](q, k, v, o, p.causal, p.q_offset, p.score.scale)
                ms = triton.testing.do_bench(fn, return_mode="median")
                row.update(median_ms=ms, tflops=flops / ms / 1e9 if flops else None)
                line = f"{pt['label']:58} {variant:18} {ms:12.4f} {row['tflops'] or 0:8.1f}"
                mine = ours.get((pt["case"], pt["point"], variant))
                if mine:
                    row.update(attnbench_median_ms=mine[0], attnbench_mode=mine[1], ratio=ms / mine[0])
                    line += f" {mine[0]:13.4f} {ms / mine[0]:6.3f}"
                print(line, flush=True)
                rows.append(row)
            del tensors
            torch.cuda.empty_cache()
    if args.json:
        doc = dict(tool="tools/do_bench_check.py", device=name, torch=torch.__version__, triton=triton.__version__,
                   timer="triton.testing.do_bench(return_mode='median'), default warm-up, rep and L2 flush",
                   attnbench_report=args.attnbench, rows=rows)
        pathlib.Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
