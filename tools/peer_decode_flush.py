# Tool: the peers' decode timed under both of attnbench's cold-mode flushes (gpu_session.sh perf).
"""PyTorch's FlashAttention-2 and cuDNN decode on the shapes of cases/perf/decode-*, timed under both of
attnbench's cold-mode flushes, so that a ratio to `attnbench run` is like for like whichever flush that run used.

  read:  sum a buffer of twice the L2 size before each sample, as attnbench's default flush does: the L2 holds
         clean lines, and the timed kernel pays only for its own traffic.
  write: zero that buffer instead, as Triton's do_bench (and peers.py's default) does; the L2 is left full of dirty
         lines, whose write-back runs inside the timed kernel.

This is peers.py's code (the same cases, tensors, peers and sampling) run once per flush, not a copy of it;
`python3 tools/peers.py --cases 'decode-*' --flush read` gives one half. It stays a script of its own so that the
flush comparison is one command (gpu_session.sh's `perf` runs it) and one file of rows with both flushes.
Run on the GPU machine:  python3 tools/peer_decode_flush.py [--cases GLOB] [--json FILE]"""
import argparse, json, pathlib, sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import peers  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--cases", default="decode-*", help="glob on the cases/perf file names")
ap.add_argument("--budget-ms", type=float, default=100)
ap.add_argument("--max-samples", type=int, default=500)
ap.add_argument("--json", help="write every row, both flushes, to this file")
args = ap.parse_args()

selected = list(peers.select(args.cases))
if not selected:
    ap.error(f"no case in {peers.CASES} matches {args.cases!r}")
rows = []
for flush in ("read", "write"):
    rows += peers.run(selected, flush, args.budget_ms, args.max_samples, report=lambda line: print(line, flush=True))
if args.json:
    import torch
    with open(args.json, "w") as f:
        json.dump(dict(device=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows), f, indent=1)
