"""PyTorch's FlashAttention-2 and cuDNN decode on the shapes of cases/perf/decode-*, timed
under both of attnbench's cold-mode flushes, so that a ratio to `attnbench run` is like for
like whichever flush that run used.

  write: zero a 256 MB buffer before each sample, as Triton's do_bench (and so
         ../shared/tools/peers.py) does; L2 is left full of dirty lines, whose write-back
         runs inside the timed kernel.
  read:  read the same buffer (a sum) instead, as attnbench's default flush does: the L2
         holds clean lines, and the timed kernel pays only for its own traffic.

Each sample: flush, event, the call, event (do_bench's method); the median of --reps.
Run on the GPU machine:  python3 tests/peer_decode_flush.py [--reps N] [--json FILE]"""
import argparse, json
import torch, torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend

ap = argparse.ArgumentParser()
ap.add_argument("--reps", type=int, default=200)
ap.add_argument("--json")
args = ap.parse_args()

buf = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
FLUSH = {"write": lambda: buf.zero_(), "read": lambda: buf.sum()}


def median_ms(fn, flush):
    for _ in range(10):  # warm-up: plans, autotuning, clocks
        flush(); fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(args.reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(args.reps)]
    for s, e in zip(starts, ends):
        flush()
        s.record(); fn(); e.record()
    torch.cuda.synchronize()
    t = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    return t[len(t) // 2]


rows = []
print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
for B, Hq, Hkv, L, D in [(64, 32, 8, 4096, 128), (8, 32, 8, 32768, 128), (1, 32, 8, 131072, 128),
                         (64, 32, 32, 2048, 128)]:
    q = torch.randn(B, Hq, 1, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(B, Hkv, L, D, device="cuda", dtype=torch.bfloat16); v = torch.randn_like(k)
    nbytes = 2 * k.numel() * 2 + 2 * q.numel() * 2
    for peer, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        for flush in ("read", "write"):
            try:
                with sdpa_kernel([backend]):
                    ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=Hq != Hkv), FLUSH[flush])
            except RuntimeError as e:
                print(f"  {peer}: not available ({str(e)[:60]})")
                break
            case = f"decode/bf16 B{B} Hq{Hq} Hkv{Hkv} L{L} d{D}"
            rows.append(dict(case=case, peer=peer, flush=flush, ms=round(ms, 4), tbps=round(nbytes / ms / 1e9, 3)))
            print(f"{case:38s} {peer:6s} {flush:5s} flush {ms:9.4f} ms  {nbytes / ms / 1e9:6.3f} TB/s", flush=True)
    del q, k, v; torch.cuda.empty_cache()
if args.json:
    json.dump(dict(device=torch.cuda.get_device_name(), rows=rows), open(args.json, "w"), indent=1)
