#!/usr/bin/env python3
"""tests/gpt2_check.py on the CPU: its safetensors writer and reader (every name, shape, dtype and byte range of a
small GPT-2 checkpoint in each dtype, the header's padding, the data covered exactly; BF16 rounding to nearest even
on hand-picked values and against an independent rounding; the reader's refusals), the logit comparison on made-up
logits (agreement, a near-tie divergence, a real one, values outside the tolerance, NaN), and, where torch is
installed, that greedy generation with a KV cache equals recomputing the whole sequence, that the fused forward
(bench's) equals the written-out one (check's), that bench --compile's static-shape decode step equals the eager
one, and `check` on a made-up dump (agree: 0, disagree: 1, bad input: 2).

    python3 tests/test_gpt2_check.py

Exit codes: 0 passed (without torch: the parts that need none); 1 a check failed (each on one line); 77 skipped:
no numpy.
"""
import contextlib
import io
import json
import math
import os
import pathlib
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "gpt2_check.py")
sys.path.insert(0, HERE)

try:
    import numpy as np
except ImportError:
    print("skipped: no numpy")
    sys.exit(77)

import gpt2_check as g  # noqa: E402

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
    return ok


def raises(fn, what):
    try:
        fn()
    except g.InputError:
        return True
    failures.append(f"{what}: no InputError")
    return False


def quiet(fn, *args):
    """fn(*args) with its stdout and stderr kept: (result, text)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        r = fn(*args)
    return r, out.getvalue()


# ---------------------------------------------------------------------------------------------------------------- bf16
def f32(bits):
    return np.array([bits], dtype=np.uint32).view(np.float32)[0]


def test_bf16():
    cases = [  # (float32 bits, bf16 bits)
        (0x3F800000, 0x3F80),  # 1
        (0x3F808000, 0x3F80),  # 1 + 2^-8: halfway between 1 and 1 + 2^-7, to the even 1
        (0x3F818000, 0x3F82),  # 1 + 3*2^-8: halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): up
        (0x3F808001, 0x3F81),  # just above halfway: up
        (0x3F807FFF, 0x3F80),  # just below halfway: down
        (0x3F810000, 0x3F81),  # 1 + 2^-7: exact
        (0x3F80FFFF, 0x3F81),
        (0xBF808000, 0xBF80),  # -(1 + 2^-8)
        (0xBF818000, 0xBF82),
        (0x80000000, 0x8000),  # -0
        (0x00000000, 0x0000),
        (0x00008000, 0x0000),  # subnormal halfway to the even 0
        (0x00018000, 0x0002),  # subnormal halfway, odd below: up
        (0x00010000, 0x0001),
        (0x7F7F8000, 0x7F80),  # halfway past the largest bf16 (odd): infinity
        (0x7F7FFFFF, 0x7F80),  # the largest float32 rounds to infinity
        (0x7F7F7FFF, 0x7F7F),
        (0x7F800000, 0x7F80),  # inf
        (0xFF800000, 0xFF80),  # -inf
        (0x40490FDB, 0x4049),  # pi
    ]
    x = np.array([c[0] for c in cases], dtype=np.uint32).view(np.float32)
    got = g.bf16_bits(x)
    for (bits, want), have in zip(cases, got):
        check(int(have) == want, f"bf16 of 0x{bits:08X}: 0x{int(have):04X}, expected 0x{want:04X}")
    nan = g.bf16_bits(np.array([np.nan, f32(0x7F800001), f32(0xFFC00000)], dtype=np.float32))
    check(all(np.isnan(g.bf16_to_f32(nan))), f"bf16 of NaNs: {[hex(int(v)) for v in nan]}, expected NaNs")
    check(g.bf16_to_f32(np.array([0x3F81], dtype=np.uint16))[0] == 1 + 2 ** -7, "bf16 0x3F81 widened is 1 + 2^-7")

    # Against an independent rounding: the nearest of the two bf16 neighbours in float64, the even one on a tie.
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2 ** 32, 20000, dtype=np.uint64).astype(np.uint32)
    bits = bits[(bits & 0x7F800000) != 0x7F800000]  # finite
    bits = bits[((bits & 0x7FFFFFFF) < 0x7F7F8000)]  # below the point that rounds to infinity
    bits[:200] = (bits[:200] & 0xFFFF0000) | 0x8000  # plenty of exact ties
    x = bits.view(np.float32).astype(np.float64)
    lo = (bits & 0xFFFF0000).view(np.float32).astype(np.float64)
    hi = ((bits & 0xFFFF0000) + 0x10000).view(np.float32).astype(np.float64)
    dlo, dhi = np.abs(x - lo), np.abs(hi - x)
    up = (dhi < dlo) | ((dhi == dlo) & (((bits >> 16) & 1) == 1))
    want = ((bits >> 16) + up).astype(np.uint16)
    got = g.bf16_bits(bits.view(np.float32))
    check(np.array_equal(got, want), f"bf16 rounding: {int((got != want).sum())} of {len(bits)} differ from the "
                                     f"nearest-even rounding computed in float64")
    if g.torch is not None:
        t = g.torch.from_numpy(bits.view(np.float32).copy()).to(g.torch.bfloat16).view(g.torch.int16).numpy()
        check(np.array_equal(t.view(np.uint16), got), "bf16 rounding differs from torch's")


# ------------------------------------------------------------------------------------------------------------ the writer
DIMS = dict(layers=2, d=8, heads=2, vocab=11, positions=6)


def expected_names(layers, mask=True, prefix=""):
    names = ["wte.weight", "wpe.weight"]
    for i in range(layers):
        names += [f"h.{i}.{n}" for n in ["ln_1.weight", "ln_1.bias"] + (["attn.bias"] if mask else []) +
                  ["attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
                   "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight",
                   "mlp.c_proj.bias"]]
    return [prefix + n for n in names + ["ln_f.weight", "ln_f.bias"]]


def expected_shape(name, d, vocab, positions):
    tail = name.split(".", 2)[-1] if name.startswith("h.") else name
    return {"wte.weight": (vocab, d), "wpe.weight": (positions, d), "ln_1.weight": (d,), "ln_1.bias": (d,),
            "attn.bias": (1, 1, positions, positions), "attn.c_attn.weight": (d, 3 * d),
            "attn.c_attn.bias": (3 * d,), "attn.c_proj.weight": (d, d), "attn.c_proj.bias": (d,),
            "ln_2.weight": (d,), "ln_2.bias": (d,), "mlp.c_fc.weight": (d, 4 * d), "mlp.c_fc.bias": (4 * d,),
            "mlp.c_proj.weight": (4 * d, d), "mlp.c_proj.bias": (d,), "ln_f.weight": (d,),
            "ln_f.bias": (d,)}[tail]


def raw_header(path):
    """The file's header read here, independently of the script: (n, header as ordered pairs, padding, size)."""
    data = pathlib.Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    text = data[8:8 + n]
    pairs = json.loads(text.decode(), object_pairs_hook=lambda kv: kv)
    return n, pairs, text[len(text.rstrip(b" ")):], len(data), text


def stored(values, dtype):
    return {"F32": values.astype(np.float32), "F16": values.astype(np.float16).astype(np.float32),
            "BF16": g.bf16_to_f32(g.bf16_bits(values))}[dtype]


def test_writer(tmp):
    L, d, heads, V, P = DIMS["layers"], DIMS["d"], DIMS["heads"], DIMS["vocab"], DIMS["positions"]
    drawn = {name: values for name, _, values in g.gpt2_arrays(L, d, V, P, seed=3)}
    files = {}
    for dtype in ("F32", "F16", "BF16"):
        for mask, prefix in ((True, ""), (False, ""), (True, "transformer.")):
            path = os.path.join(tmp, f"w-{dtype}-{int(mask)}-{prefix or 'plain'}.safetensors")
            files[dtype, mask, prefix] = path
            names = g.write_gpt2(path, L, d, heads, V, P, dtype, seed=3, mask_buffer=mask, prefix=prefix)
            what = f"write {dtype} mask={mask} prefix={prefix!r}"
            want_names = expected_names(L, mask, prefix)
            check(names == want_names, f"{what}: names {names}")
            n, pairs, pad, size, text = raw_header(path)
            check(n % 8 == 0 and (8 + n) % 8 == 0, f"{what}: header length {n} is not a multiple of 8")
            check(set(pad) <= {ord(" ")} and len(pad) < 8, f"{what}: header padding {pad!r} is not < 8 spaces")
            check(text.startswith(b"{"), f"{what}: header does not start with '{{'")
            keys = [k for k, _ in pairs]
            check(keys[0] == "__metadata__" and dict(pairs[0][1]) == {"format": "pt"},
                  f"{what}: __metadata__ {pairs[0]}")
            check(keys[1:] == want_names, f"{what}: header order {keys[1:]}")
            at = 0
            for name, entry in pairs[1:]:
                e = dict(entry)
                shape = tuple(expected_shape(name[len(prefix):], d, V, P))
                want_dtype = "F32" if name.endswith(".attn.bias") else dtype
                check(set(e) == {"dtype", "shape", "data_offsets"}, f"{what}: {name} has keys {sorted(e)}")
                check(e["dtype"] == want_dtype, f"{what}: {name} dtype {e['dtype']}, expected {want_dtype}")
                check(tuple(e["shape"]) == shape, f"{what}: {name} shape {e['shape']}, expected {list(shape)}")
                begin, end = e["data_offsets"]
                check(begin == at, f"{what}: {name} begins at {begin}, expected {at} (a gap or overlap)")
                check(end - begin == g.ST_BYTES[want_dtype] * math.prod(shape), f"{what}: {name} holds {end - begin} "
                      "bytes")
                at = end
            check(at == size - 8 - n, f"{what}: the tensors end at {at}, the data is {size - 8 - n} bytes")

            st = g.SafeTensors(path)
            check(st.names() == want_names, f"{what}: the reader's names {st.names()}")
            check(st.metadata == {"format": "pt"}, f"{what}: the reader's metadata {st.metadata}")
            for name, e in pairs[1:]:
                e = dict(e)
                check(st.entries[name] == (e["dtype"], tuple(e["shape"]), *e["data_offsets"]),
                      f"{what}: the reader's entry of {name}: {st.entries[name]}")
                a = st.array(name)
                base = name[len(prefix):]
                if base.endswith(".attn.bias"):
                    want = np.tril(np.ones((P, P), np.float32)).reshape(1, 1, P, P)
                else:
                    want = stored(drawn[base], dtype)
                check(a.dtype == np.float32 and a.shape == want.shape and np.array_equal(a, want),
                      f"{what}: {name} read back differs from what was drawn (stored as {dtype})")
    # Prefix, mask and dtype do not change the values; storage rounding at load = the file stored in that dtype.
    plain, _ = g.load_gpt2(files["F32", True, ""], "fp32")
    for key, path in files.items():
        w, dims = g.load_gpt2(path, "fp32")
        check(dims == (L, d, V, P), f"load_gpt2 {key}: dims {dims}")
        check(sorted(w) == sorted(plain), f"load_gpt2 {key}: names {sorted(w)}")
        if key[0] == "F32":
            check(all(np.array_equal(w[k], plain[k]) for k in plain), f"load_gpt2 {key}: values differ from F32's")
    for dtype, storage in (("F16", "fp16"), ("BF16", "bf16")):
        w, _ = g.load_gpt2(files["F32", False, ""], storage)
        v, _ = g.load_gpt2(files[dtype, True, "transformer."], "fp32")
        check(all(np.array_equal(w[k], v[k]) for k in w), f"F32 rounded to {storage} at load != the {dtype} file")
        u, _ = g.load_gpt2(files[dtype, True, ""], storage)
        check(all(np.array_equal(u[k], v[k]) for k in u), f"the {dtype} file rounded to {storage} again changed")
    raises(lambda: g.load_gpt2(files["F32", True, ""], "fp32", dict(layers=3)), "load_gpt2 with the wrong layers")
    raises(lambda: g.load_gpt2(files["F32", True, ""], "fp32", dict(vocab=12)), "load_gpt2 with the wrong vocab")
    return files


def test_init_scale(tmp):
    L, d, V, P = 4, 64, 400, 64
    path = os.path.join(tmp, "scale.safetensors")
    g.write_gpt2(path, L, d, 4, V, P, "F32", seed=1)
    w, _ = g.load_gpt2(path)
    def near(name, mean, std):
        a = w[name].astype(np.float64)
        ok = abs(a.mean() - mean) < 4 * std / math.sqrt(a.size) + 1e-12 and abs(a.std() / std - 1) < 0.08
        check(ok, f"init of {name}: mean {a.mean():.4g} std {a.std():.4g}, expected {mean} and {std}")
    near("wte.weight", 0, 0.02)
    near("wpe.weight", 0, 0.01)
    near("h.1.attn.c_attn.weight", 0, 0.02)
    near("h.1.mlp.c_fc.weight", 0, 0.02)
    near("h.2.attn.c_proj.weight", 0, 0.02 / math.sqrt(2 * L))
    near("h.2.mlp.c_proj.weight", 0, 0.02 / math.sqrt(2 * L))
    near("h.0.mlp.c_fc.bias", 0, 0.02)
    near("h.3.ln_2.weight", 1, 0.02)
    near("h.3.ln_1.bias", 0, 0.02)


def test_cli_write(tmp):
    path = os.path.join(tmp, "cli.safetensors")
    base = [sys.executable, SCRIPT, "write", path]
    r = subprocess.run(base + "--layers 1 --d-model 8 --heads 2 --vocab 5 --max-positions 4 --dtype BF16".split(),
                       capture_output=True, text=True)
    check(r.returncode == 0 and os.path.exists(path), f"write CLI: exit {r.returncode} {r.stderr.strip()}")
    if r.returncode == 0:
        check(g.SafeTensors(path).entries["wte.weight"] == ("BF16", (5, 8), 0, 80), "write CLI: wte.weight entry")
    for bad, why in ((["--layers", "1"], "missing sizes"),
                     ("--layers 1 --d-model 9 --heads 2 --vocab 5 --max-positions 4".split(), "d_model % heads")):
        r = subprocess.run(base + bad, capture_output=True, text=True)
        check(r.returncode == 2 and "error" in r.stderr, f"write CLI with {why}: exit {r.returncode}, expected 2")


def test_reader_refuses(tmp):
    def file(entries, data_size, tail=b"", n_override=None):
        header = {"__metadata__": {"format": "pt"}}
        header.update(entries)
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        n = len(text) if n_override is None else n_override
        path = os.path.join(tmp, f"bad{len(os.listdir(tmp))}.safetensors")
        pathlib.Path(path).write_bytes(struct.pack("<Q", n) + text + bytes(data_size) + tail)
        return path
    e = lambda dt, shape, b, e: {"dtype": dt, "shape": shape, "data_offsets": [b, e]}
    good = file({"a": e("F32", [2], 0, 8), "b": e("F16", [3], 8, 14)}, 14)
    check(g.SafeTensors(good).names() == ["a", "b"], "reader: a good hand-made file")
    raises(lambda: g.SafeTensors(file({"a": e("F32", [2], 0, 8), "b": e("F16", [3], 10, 16)}, 16)), "reader: a gap")
    raises(lambda: g.SafeTensors(file({"a": e("F32", [2], 0, 8), "b": e("F16", [3], 6, 12)}, 12)),
           "reader: an overlap")
    raises(lambda: g.SafeTensors(file({"a": e("F32", [2], 0, 8)}, 4)), "reader: a truncated file")
    raises(lambda: g.SafeTensors(file({"a": e("F32", [2], 0, 8)}, 8, b"xx")), "reader: bytes past the tensors")
    raises(lambda: g.SafeTensors(file({"a": e("F32", [3], 0, 8)}, 8)), "reader: shape and range disagree")
    raises(lambda: g.SafeTensors(file({"a": e("Q7", [2], 0, 8)}, 8)), "reader: unknown dtype")
    raises(lambda: g.SafeTensors(file({"a": e("F32", [2], 0, 8)}, 8, n_override=1 << 40)), "reader: huge header")
    short = os.path.join(tmp, "short.safetensors")
    pathlib.Path(short).write_bytes(b"\x01\x00")
    raises(lambda: g.SafeTensors(short), "reader: a 2-byte file")
    raises(lambda: g.SafeTensors(os.path.join(tmp, "nope.safetensors")), "reader: a missing file")
    # Unknown tensors (lm_head, old masked_bias buffers) are ignored; a missing one is an error.
    L, d, V, P = 1, 4, 5, 3
    tensors = [(n, "F32", v) for n, _, v in g.gpt2_arrays(L, d, V, P)]
    extra = tensors + [("lm_head.weight", "F32", np.zeros((V, d), np.float32)),
                       ("h.0.attn.masked_bias", "F32", np.array(-1e4, np.float32))]
    path = os.path.join(tmp, "extra.safetensors")
    g.write_safetensors(path, extra)
    w, dims = g.load_gpt2(path)
    check(dims == (L, d, V, P) and "lm_head.weight" not in w, "load_gpt2 with unknown tensors")
    check(g.SafeTensors(path).raw("h.0.attn.masked_bias").shape == (), "a 0-d tensor")
    path = os.path.join(tmp, "missing.safetensors")
    g.write_safetensors(path, [t for t in tensors if t[0] != "h.0.mlp.c_fc.bias"])
    raises(lambda: g.load_gpt2(path), "load_gpt2 with h.0.mlp.c_fc.bias missing")


# -------------------------------------------------------------------------------------------------------- the comparison
def test_compare():
    rng = np.random.default_rng(2)
    G, B, V = 5, 3, 9
    want = rng.standard_normal((G, B, V))
    atol, rtol = 1e-3, 1e-3
    r = g.compare(want.astype(np.float32), want, atol, rtol)
    check(r["ok"] and all(q["diverged"] is None for q in r["seqs"]) and r["compared"] == G * B * V,
          f"compare: float32 of the same logits: {r}")
    # A near tie at step 2 of sequence 1: attnbench picks the other token; later steps are another path.
    tied = want.copy()
    top = np.argsort(tied[2, 1])
    tied[2, 1, top[-2]] = tied[2, 1, top[-1]] - 1e-4
    got = tied.copy()
    got[2, 1, top[-2]] += 2e-4  # within the tolerance, and now the argmax
    got[3:, 1] = rng.standard_normal((G - 3, V)) * 10
    r = g.compare(got, tied, atol, rtol)
    q = r["seqs"][1]
    check(r["ok"] and q["diverged"] == 2 and abs(q["margin"] - 1e-4) < 1e-9 and r["compared"] == G * V * 2 + 3 * V,
          f"compare: a near-tie divergence is not a failure: {r}")
    # A real difference: the same swap where PyTorch's margin is large.
    got = want.copy()
    top = np.argsort(want[1, 2])
    got[1, 2, top[-2]] = want[1, 2, top[-1]] + 1
    r = g.compare(got, want, atol, rtol)
    check(not r["ok"] and r["seqs"][2]["diverged"] == 1 and any("by a margin" in w for w in r["why"]),
          f"compare: a real divergence fails, saying PyTorch's margin: {r}")
    # Values outside the tolerance without any divergence.
    got = want.copy()
    got[4, 0, top[0]] += 0.5
    r = g.compare(got, want, atol, rtol)
    check(not r["ok"] and r["bad"] == 1 and abs(r["max_err"] - 0.5) < 1e-12, f"compare: one logit off: {r}")
    # NaN, and a wrong shape.
    got = want.copy()
    got[0, 0, 0] = np.nan
    r = g.compare(got, want, atol, rtol)
    check(not r["ok"] and r["nonfinite"] == 1, f"compare: NaN fails: {r}")
    r = g.compare(want[:, :2], want, atol, rtol)
    check(not r["ok"], "compare: a wrong shape fails")
    # Ties: the lowest id wins on both sides.
    flat = np.zeros((1, 1, 4))
    r = g.compare(flat, flat, atol, rtol)
    check(r["ok"] and r["seqs"][0]["diverged"] is None, "compare: an exact tie")


def test_prompts(tmp):
    d = pathlib.Path(tmp) / "prompts"
    d.mkdir()
    m = {"shape": {"batch": 3, "prompt": [5, 6, 7], "prompt_len": 3}, "inputs": {}}
    p = g.prompts_of(d, m)
    check(p.shape == (3, 3) and (p == [5, 6, 7]).all() and p.dtype == np.int64, f"prompts_of a prompt list: {p}")
    ids = np.array([[1, 2, 3, 0, 0], [4, 5, 6, 0, 0], [7, 8, 9, 0, 0]], dtype=np.float32)
    np.save(d / "tokens.npy", ids)
    m = {"shape": {"batch": 3, "prompt": [], "prompt_len": 3}, "inputs": {"tokens": {"file": "tokens.npy"}}}
    p = g.prompts_of(d, m)
    check(p.tolist() == [[1, 2, 3], [4, 5, 6], [7, 8, 9]], f"prompts_of dumped tokens: {p}")
    raises(lambda: g.prompts_of(d, {"shape": {"batch": 1, "prompt_len": 3}, "inputs": {}}), "prompts_of with no ids")


# -------------------------------------------------------------------------------------------------------- with torch
def test_forward(files, tmp):
    torch = g.torch
    L, d, heads, V, P = DIMS["layers"], DIMS["d"], DIMS["heads"], DIMS["vocab"], DIMS["positions"]
    w, _ = g.load_gpt2(files["F32", True, ""], "fp32")
    model = g.GPT2(w, heads, torch.float64, "cpu")
    fused = g.GPT2(w, heads, torch.float64, "cpu", fused=True)
    prompts = torch.tensor([[1, 2], [3, 10]])
    G = P - 2 + 1  # up to the last position
    with torch.inference_mode():
        a, ta = g.greedy(model, prompts, G, cached=True)
        b, tb = g.greedy(model, prompts, G, cached=False)
        c, tc = g.greedy(fused, prompts, G, cached=True)
        full = model.forward(torch.cat([prompts, ta[:-1].T], 1), 0, None, last_only=False)  # [B, P+G-1, V]
    check(torch.equal(ta, tb), f"greedy: cached tokens {ta.tolist()} != recomputed {tb.tolist()}")
    check(torch.allclose(a, b, rtol=0, atol=1e-12), f"greedy: cached logits differ from recomputed by "
                                                    f"{(a - b).abs().max():.3g}")
    check(torch.equal(ta, tc) and torch.allclose(a, c, rtol=0, atol=1e-12),
          f"the fused forward differs from the written-out one by {(a - c).abs().max():.3g}")
    check(torch.allclose(full[:, 1:].transpose(0, 1), a, rtol=0, atol=1e-12),
          "one forward over the generated sequence gives each step's logits")
    check(tuple(a.shape) == (G, 2, V) and tuple(ta.shape) == (G, 2), f"greedy shapes {a.shape} {ta.shape}")
    raises(lambda: g.greedy(model, prompts, G + 1), "greedy past max_positions")
    # Every sequence of a batch is its own: batch 2 == each alone.
    with torch.inference_mode():
        one, _ = g.greedy(model, prompts[1:], G)
    check(torch.allclose(one[:, 0], a[:, 1], rtol=0, atol=1e-12), "a sequence alone == in a batch")
    # bench --compile's static-shape decode step (the whole cache under a mask, the position a tensor) gives the
    # logits of the eager step, with rows past the position holding garbage.
    with torch.inference_mode():
        cache = fused.new_cache(2, P)
        for kc, vc in cache:
            kc.fill_(7.0)
            vc.fill_(-3.0)
        fused.forward(prompts, 0, cache)
        eager_cache = [(k.clone(), v.clone()) for k, v in cache]
        token = ta[0][:, None]
        for pos in range(2, P):
            got = fused.step_at(token, torch.tensor([pos]), cache)
            want = fused.forward(token, pos, eager_cache)
            check(torch.allclose(got, want, rtol=0, atol=1e-12),
                  f"step_at at position {pos} differs from forward by {(got - want).abs().max():.3g}")
            token = torch.argmax(want, dim=-1, keepdim=True)
    # A pure numpy forward of the last position of sequence 0's prompt, independently of GPT2.
    def ln(x, gm, bt):
        return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * gm + bt
    W = {k: v.astype(np.float64) for k, v in w.items()}
    ids = [1, 2]
    x = W["wte.weight"][ids] + W["wpe.weight"][:2]
    hd = d // heads
    for i in range(L):
        p = f"h.{i}."
        qkv = ln(x, W[p + "ln_1.weight"], W[p + "ln_1.bias"]) @ W[p + "attn.c_attn.weight"] + W[p + "attn.c_attn.bias"]
        out = np.zeros((2, d))
        for h in range(heads):
            q, k, v = (qkv[:, j * d + h * hd: j * d + (h + 1) * hd] for j in range(3))
            s = q @ k.T / math.sqrt(hd) + np.triu(np.full((2, 2), -np.inf), 1)
            e = np.exp(s - s.max(1, keepdims=True))
            out[:, h * hd:(h + 1) * hd] = (e / e.sum(1, keepdims=True)) @ v
        x = x + out @ W[p + "attn.c_proj.weight"] + W[p + "attn.c_proj.bias"]
        u = ln(x, W[p + "ln_2.weight"], W[p + "ln_2.bias"]) @ W[p + "mlp.c_fc.weight"] + W[p + "mlp.c_fc.bias"]
        u = 0.5 * u * (1 + np.tanh(math.sqrt(2 / math.pi) * (u + 0.044715 * u ** 3)))
        x = x + u @ W[p + "mlp.c_proj.weight"] + W[p + "mlp.c_proj.bias"]
    want = ln(x[-1], W["ln_f.weight"], W["ln_f.bias"]) @ W["wte.weight"].T
    check(np.allclose(a[0, 0].numpy(), want, rtol=0, atol=1e-12), "GPT2 != a numpy forward of the same weights")


def make_dump(root, weights, logits, variants, dtype="fp32", tol=(1e-4, 1e-4), prompt=(1, 2), batch=2, generate=4,
              tokens=None):
    d = pathlib.Path(root) / "gpt2-tiny" / "default" / "seed1"
    d.mkdir(parents=True)
    shape = dict(preset="", layers=DIMS["layers"], d_model=DIMS["d"], heads=DIMS["heads"], vocab=DIMS["vocab"],
                 max_positions=DIMS["positions"], batch=batch, prompt=list(prompt), prompt_len=len(prompt),
                 generate=generate, weights=str(weights))
    m = dict(case="gpt2-tiny", point="", op="model", dtype=dtype, seed=1, case_seed=1, shape=shape, inputs={},
             outputs={}, tolerance=dict(atol=tol[0], rtol=tol[1], rule="|got - ref| <= atol + rtol * |ref|"))
    if tokens is not None:
        shape["prompt"] = []
        np.save(d / "tokens.npy", tokens.astype(np.float32))
        m["inputs"]["tokens"] = dict(file="tokens.npy", shape=list(tokens.shape), storage="fp32")
    for name, f in variants.items():
        np.save(d / f"out_{name}.npy", f(logits).astype(np.float32))
        m["outputs"][name] = dict(file=f"out_{name}.npy", shape=list(logits.shape), storage="fp32")
    (d / "manifest.json").write_text(json.dumps(m, indent=1))
    return d


def test_check(files, tmp):
    torch = g.torch
    w, _ = g.load_gpt2(files["BF16", True, ""], "bf16")
    model = g.GPT2(w, DIMS["heads"], torch.float64, "cpu")
    with torch.inference_mode():
        want, _ = g.greedy(model, torch.tensor([[1, 2], [1, 2]]), 4)
    want = want.numpy()
    weights = files["F32", True, ""]  # rounded to bf16 by check, as attnbench stores it

    def bad(x):
        x = x.copy()
        x[0, 1, 3] += 1
        return x
    cases = [
        ("agree", dict(good=lambda x: x), [], 0, "1 agree, 0 disagree"),
        ("disagree", dict(good=lambda x: x, bad=bad), [], 1, "1 agree, 1 disagree"),
        ("tokens", dict(good=lambda x: x), [], 0, "1 agree"),
        ("no-weights", dict(good=lambda x: x), [], 2, "no weights"),
        ("given-weights", dict(good=lambda x: x), ["--weights", weights], 0, "1 agree"),
        ("wrong-layers", dict(good=lambda x: x), [], 2, "layers"),
    ]
    for name, variants, extra, code, text in cases:
        root = os.path.join(tmp, "dump-" + name)
        d = make_dump(root, "" if name in ("no-weights", "given-weights") else weights, want, variants, "bf16",
                      tokens=np.array([[1, 2, 0], [1, 2, 0]]) if name == "tokens" else None)
        if name == "wrong-layers":
            m = json.loads((d / "manifest.json").read_text())
            m["shape"]["layers"] = 3
            (d / "manifest.json").write_text(json.dumps(m))
        r, out = quiet(g.main, ["check", root, "--device", "cpu"] + extra)
        check(r == code and text in out, f"check {name}: exit {r} (expected {code}), output:\n{out}")
    r, out = quiet(g.main, ["check", os.path.join(tmp, "empty-dump"), "--device", "cpu"])
    check(r == 2, f"check of an empty directory: exit {r}, expected 2")


def test_stats():
    """bench's summary of its samples: tools/peers.py's interpolated quantile (run 278 found the import broken
    once peers.py had moved to tools/: only a GPU run reached it)."""
    st = g.stats([4.0, 1.0, 3.0, 2.0])
    check(st["mean"] == 2.5 and st["min"] == 1.0 and st["max"] == 4.0, f"stats mean/min/max {st}")
    check(abs(st["p50"] - 2.5) < 1e-12, f"stats p50 interpolates between 2 and 3: {st['p50']}")
    check(abs(st["p99"] - 3.97) < 1e-12, f"stats p99 interpolates between 3 and 4: {st['p99']}")
    check(st["samples"] == [4.0, 1.0, 3.0, 2.0], "stats keeps the samples in their order")
    check(g.stats([])["p50"] is None and g.stats([])["mean"] is None, "stats of no samples: None")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_bf16()
        test_stats()
        files = test_writer(tmp)
        test_init_scale(tmp)
        test_cli_write(tmp)
        os.makedirs(os.path.join(tmp, "bad"))
        test_reader_refuses(os.path.join(tmp, "bad"))
        test_compare()
        test_prompts(tmp)
        torch_ran = g.torch is not None
        if torch_ran:
            test_forward(files, tmp)
            test_check(files, tmp)
    for f in failures:
        print(f"FAIL {f}")
    if failures:
        print(f"{len(failures)} checks failed")
        return 1
    if not torch_ran:
        # The forward and `check` run on the GPU machine, in the gpu_model_pytorch tests.
        print("passed without torch: the writer, reader, bf16 rounding and comparison (the forward and check "
              "were not run)")
        return 0
    print("all gpt2_check tests passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
