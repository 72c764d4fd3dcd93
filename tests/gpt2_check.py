#!/usr/bin/env python3
"""GPT-2 outside attnbench: writes GPT-2 checkpoints, checks the `model` op's dumped logits against a plain
PyTorch GPT-2, and times PyTorch eager generation (the peer of attnbench's TBT).

    python3 tests/gpt2_check.py write OUT.safetensors --layers L --d-model D --heads H --vocab V
                                      --max-positions P [--dtype F32|F16|BF16] [--seed S] [--real-shapes]
                                      [--no-mask-buffer] [--prefix transformer.]
    python3 tests/gpt2_check.py check DUMPDIR [--weights FILE.safetensors] [--device auto|cpu|cuda]
                                      [--precision float64|float32]
    python3 tests/gpt2_check.py bench --batch B --prompt P --generate G [--dtype bf16] [--weights FILE |
                                      --layers L --d-model D ...] [--compile] [--json OUT]

write: a checkpoint in Hugging Face's safetensors format (8-byte little-endian header length, a JSON header
{name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {"format": "pt"}} padded with spaces to a
multiple of 8, then the tensors in header order, contiguous), with GPT2Model's names and orientations: wte.weight
[V, D], wpe.weight [P, D], per layer h.{i}.ln_1.{weight,bias} [D], h.{i}.attn.c_attn.weight [D, 3D] (Conv1D:
[in, out], columns q | k | v, each heads x head_dim), .bias [3D], h.{i}.attn.c_proj.weight [D, D], .bias [D],
h.{i}.ln_2.*, h.{i}.mlp.c_fc.weight [D, 4D], .bias [4D], h.{i}.mlp.c_proj.weight [4D, D], .bias [D], ln_f.*, and
the non-parameter buffer h.{i}.attn.bias [1, 1, P, P] (F32 lower-triangular causal mask) that a loader ignores.
Values at GPT-2's init scale: weights N(0, 0.02), wpe N(0, 0.01), both c_proj weights N(0, 0.02/sqrt(2L)),
biases N(0, 0.02) (GPT-2 starts them at 0; random ones exercise the bias paths), LayerNorm weights 1 + N(0, 0.02),
LayerNorm biases N(0, 0.02); drawn in fp32 from --seed, then stored (F16: numpy's round to nearest even; BF16: the
fp32 bits rounded to nearest even here). --real-shapes: GPT-2 124M (L 12, D 768, H 12, V 50257, P 1024).

check: for every manifest.json of op "model" below DUMPDIR (`attnbench run CASE --dump DIR`), reads the weights
(--weights, else the point's `weights`) with the reader below (no safetensors package; F32/F16/BF16; an optional
"transformer." prefix; unknown tensors ignored), rounds them to the point's storage dtype and runs GPT-2 written
out from the math in float64 (token + position embeddings; per block LayerNorm eps 1e-5, fused QKV x @ c_attn +
bias, heads, causal softmax attention scaled 1/sqrt(head_dim), c_proj, residual, LayerNorm, c_fc, GELU's tanh
approximation, c_proj, residual; final LayerNorm; logits h @ wte^T), greedy from the point's prompt (its `prompt`
ids, else the dumped token ids) for `generate` steps with a KV cache. Step 0 is the prefill's last position, step
t >= 1 the decode step that fed step t-1's token; the greedy token is the argmax, the lowest id on ties. Each
out_VARIANT.npy [generate, batch, vocab] is compared per sequence up to and including the first step whose argmax
differs from PyTorch's, with |got - want| <= atol + rtol*max(|want|, the row's RMS) (the manifest's tolerance,
attnbench's rule); later steps follow
another token path and are not compared. A divergence is a failure when PyTorch's top-2 margin there exceeds
2*(atol + rtol*|top1|) (a real difference, not a near-tie). Only weights are rounded as attnbench stores them:
attnbench also rounds activations to fp16/bf16, which the manifest's tolerances allow for.

bench: PyTorch eager GPT-2 (F.layer_norm, addmm, SDPA, F.gelu; the --dtype throughout, residual included) on the
GPU with a preallocated KV cache under torch.inference_mode; the next token stays on the GPU (no host sync per
step). Timed with CUDA events: TTFT (prefill + the first token), then every decode step (TBT) of the G-1 after it;
one warm-up generation, then --repeat (3) timed ones (Python's gc paused while they run). Prints TTFT and TBT
mean/p50/p99 in ms and tokens/s; --json writes them with every sample (its "mode": eager or compile). At small
batches eager decode is bound by the host launching ~13 kernels a layer, which is what a user of eager PyTorch gets.
--compile times the compiled peer instead: the decode step under torch.compile(mode="reduce-overhead", fullgraph),
which captures it in a CUDA graph and replays it, as gpt-fast does. A graph needs the same shapes at every step, so
that step is GPT2.step_at: the position is a device tensor, the new key and value go to their cache row with
index_copy_, and attention reads the whole preallocated cache under a mask of the rows written so far (so each step
reads prompt + generate - 1 rows of K and V, where eager reads only the rows so far); the weights and the cache are
marked static addresses, so a replay copies nothing in. The prefill (TTFT) stays eager in both modes.

Exit status: 0 every point agrees (write, bench: done), 1 a mismatch, 2 nothing to check or bad input.
"""
import argparse
import gc
import json
import math
import os
import pathlib
import struct
import sys

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # write and the comparison need numpy only
    torch = None
    F = None

PRESETS = {  # layers, d_model, heads, vocab, max_positions
    "gpt2": (12, 768, 12, 50257, 1024),
    "gpt2-medium": (24, 1024, 16, 50257, 1024),
    "gpt2-large": (36, 1280, 20, 50257, 1024),
    "gpt2-xl": (48, 1600, 25, 50257, 1024),
}
EPS = 1e-5
PREFIX = "transformer."


class InputError(Exception):
    """Bad input: exit 2."""


# ------------------------------------------------------------------------------------------- bf16 and storage rounding
def bf16_bits(x):
    """float32 -> bfloat16 bit patterns (uint16), rounded to nearest even; NaN stays a (quiet) NaN, values past the
    largest bf16 round to infinity."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    if nan.any():
        rounded[nan] = ((u[nan] >> np.uint32(16)) | np.uint32(0x0040)).astype(np.uint16)
    return rounded


def bf16_to_f32(bits):
    """bfloat16 bit patterns (uint16) -> float32, exactly."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def round_to(x, dtype):
    """float32 values stored in attnbench's dtype ("fp32", "fp16", "bf16") and widened back to float32."""
    x = np.asarray(x, dtype=np.float32)
    if dtype == "fp32":
        return x.copy()
    if dtype == "fp16":
        return x.astype(np.float16).astype(np.float32)
    if dtype == "bf16":
        return bf16_to_f32(bf16_bits(x))
    raise InputError(f"unknown storage dtype '{dtype}' (fp32, fp16 or bf16)")


# ----------------------------------------------------------------------------------------------------------- safetensors
ST_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4,
            "U16": 2, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}
ST_NUMPY = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
            "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "u1"}
MAX_HEADER = 100 << 20


def encode(values, dtype):
    """float32 values as the little-endian bytes of a safetensors dtype (F32, F16, BF16)."""
    values = np.asarray(values, dtype=np.float32)
    if dtype == "F32":
        return values.astype("<f4").tobytes()
    if dtype == "F16":
        return values.astype("<f2").tobytes()
    if dtype == "BF16":
        return bf16_bits(values).astype("<u2").tobytes()
    raise InputError(f"cannot write dtype {dtype} (F32, F16 or BF16)")


def header_bytes(entries, metadata=None):
    """The header of tensors `entries` [(name, dtype, shape)] laid out in that order: 8-byte length, then JSON padded
    with spaces to a multiple of 8 (so the data starts 8-aligned)."""
    header, at = {"__metadata__": dict(metadata or {"format": "pt"})}, 0
    for name, dtype, shape in entries:
        n = ST_BYTES[dtype] * math.prod(shape)
        header[name] = {"dtype": dtype, "shape": [int(s) for s in shape], "data_offsets": [at, at + n]}
        at += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text, at


def write_safetensors(path, tensors, metadata=None):
    """tensors: [(name, dtype, array-or-callable)] written in that order; a callable is called when its turn comes
    (so that a large checkpoint is never whole in memory). Returns the data's size in bytes."""
    entries = []
    for name, dtype, value in tensors:
        shape = value[1] if isinstance(value, tuple) else np.shape(value)
        entries.append((name, dtype, shape))
    head, size = header_bytes(entries, metadata)
    with open(path, "wb") as f:
        f.write(head)
        for (name, dtype, value), (_, _, shape) in zip(tensors, entries):
            array = value[0]() if isinstance(value, tuple) else value
            if tuple(np.shape(array)) != tuple(shape):
                raise AssertionError(f"{name}: made {np.shape(array)}, announced {shape}")
            f.write(encode(array, dtype))
    return size


class SafeTensors:
    """A safetensors file read with json and numpy: the whole header is checked when opened (every dtype known, every
    shape's bytes equal to its range, the ranges cover the data exactly, in any order, with no gap or overlap)."""

    def __init__(self, path):
        self.path = str(path)
        try:
            size = os.path.getsize(self.path)
            with open(self.path, "rb") as f:
                first = f.read(8)
                if len(first) < 8:
                    raise InputError(f"{path}: not a safetensors file (shorter than 8 bytes)")
                (n,) = struct.unpack("<Q", first)
                if n > MAX_HEADER or n > size - 8:
                    raise InputError(f"{path}: header length {n} does not fit the file ({size} bytes)")
                text = f.read(n)
        except OSError as e:
            raise InputError(f"{path}: cannot read ({e.strerror or e})") from None
        try:
            header = json.loads(text.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise InputError(f"{path}: the header is not JSON ({e})") from None
        if not isinstance(header, dict):
            raise InputError(f"{path}: the header is not a JSON object")
        self.header_size = n
        self.data_at = 8 + n
        self.data_size = size - 8 - n
        self.metadata = header.pop("__metadata__", {}) or {}
        self.entries = {}
        for name, e in header.items():
            where = f"{path}: tensor {name}"
            if not isinstance(e, dict) or not isinstance(e.get("dtype"), str):
                raise InputError(f"{where}: no dtype")
            if e["dtype"] not in ST_BYTES:
                raise InputError(f"{where}: unknown dtype '{e['dtype']}'")
            shape, offsets = e.get("shape"), e.get("data_offsets")
            if not isinstance(shape, list) or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0
                                                      for s in shape):
                raise InputError(f"{where}: shape must be a list of whole numbers >= 0")
            if (not isinstance(offsets, list) or len(offsets) != 2
                    or not all(isinstance(o, int) and not isinstance(o, bool) and o >= 0 for o in offsets)):
                raise InputError(f"{where}: data_offsets must be [begin, end], whole numbers")
            begin, end = offsets
            want = ST_BYTES[e["dtype"]] * math.prod(shape)
            if end < begin or end - begin != want:
                raise InputError(f"{where}: {e['dtype']} {shape} is {want} bytes, but data_offsets hold "
                                 f"{end - begin}")
            self.entries[name] = (e["dtype"], tuple(shape), begin, end)
        at = 0
        for name, (_, _, begin, end) in sorted(self.entries.items(), key=lambda kv: (kv[1][2], kv[1][3])):
            if begin != at:
                raise InputError(f"{self.path}: tensor {name} begins at byte {begin} of the data, expected {at} "
                                 f"({'a gap' if begin > at else 'an overlap'})")
            at = end
        if at != self.data_size:
            raise InputError(f"{self.path}: the tensors cover {at} bytes, but the file holds {self.data_size} "
                             f"after its header")
        self._map = None

    def names(self):
        return list(self.entries)

    def raw(self, name):
        """The tensor as stored (BF16 as uint16 bit patterns), read-only, from a memory map."""
        dtype, shape, begin, end = self.entries[name]
        if dtype not in ST_NUMPY:
            raise InputError(f"{self.path}: tensor {name}: cannot read dtype {dtype}")
        if end == begin:
            return np.zeros(shape, dtype=ST_NUMPY[dtype])
        if self._map is None:
            self._map = np.memmap(self.path, dtype=np.uint8, mode="r")
        count = math.prod(shape)
        return np.frombuffer(self._map, dtype=ST_NUMPY[dtype], count=count, offset=self.data_at + begin).reshape(shape)

    def array(self, name):
        """The tensor widened to float32 (F32, F16, BF16; a new array)."""
        dtype = self.entries[name][0]
        a = self.raw(name)
        if dtype == "BF16":
            return bf16_to_f32(a).reshape(a.shape)
        if dtype in ("F32", "F16", "F64"):
            return a.astype(np.float32)
        raise InputError(f"{self.path}: tensor {name}: dtype {dtype} is not a float (F32, F16, BF16)")


# ------------------------------------------------------------------------------------------------------ GPT-2 checkpoints
def layout(layers, d, vocab, positions, mask_buffer=True):
    """[(name, shape, kind)] of a GPT2Model state dict (without prefix), in its order; kind says how write draws it."""
    out = [("wte.weight", (vocab, d), "w"), ("wpe.weight", (positions, d), "wpe")]
    for i in range(layers):
        h = f"h.{i}."
        out += [(h + "ln_1.weight", (d,), "ln_w"), (h + "ln_1.bias", (d,), "b")]
        if mask_buffer:
            out.append((h + "attn.bias", (1, 1, positions, positions), "mask"))
        out += [(h + "attn.c_attn.weight", (d, 3 * d), "w"), (h + "attn.c_attn.bias", (3 * d,), "b"),
                (h + "attn.c_proj.weight", (d, d), "proj"), (h + "attn.c_proj.bias", (d,), "b"),
                (h + "ln_2.weight", (d,), "ln_w"), (h + "ln_2.bias", (d,), "b"),
                (h + "mlp.c_fc.weight", (d, 4 * d), "w"), (h + "mlp.c_fc.bias", (4 * d,), "b"),
                (h + "mlp.c_proj.weight", (4 * d, d), "proj"), (h + "mlp.c_proj.bias", (d,), "b")]
    out += [("ln_f.weight", (d,), "ln_w"), ("ln_f.bias", (d,), "b")]
    return out


def draw(rng, shape, kind, layers):
    """One tensor of `kind` at GPT-2's init scale, float32 (the mask draws nothing)."""
    if kind == "mask":
        n = shape[-1]
        return np.tril(np.ones((n, n), dtype=np.float32)).reshape(shape)
    std = {"w": 0.02, "wpe": 0.01, "proj": 0.02 / math.sqrt(2 * layers), "b": 0.02, "ln_w": 0.02}[kind]
    x = rng.standard_normal(shape, dtype=np.float32) * np.float32(std)
    return x + np.float32(1) if kind == "ln_w" else x


def gpt2_arrays(layers, d, vocab, positions, seed=0, mask_buffer=True):
    """(name, shape, float32 values) of write's checkpoint before storage rounding, in file order. The draws do not
    depend on mask_buffer or the dtype."""
    rng = np.random.default_rng(seed)
    for name, shape, kind in layout(layers, d, vocab, positions, mask_buffer):
        yield name, shape, draw(rng, shape, kind, layers)


def write_gpt2(path, layers, d, heads, vocab, positions, dtype="F32", seed=0, mask_buffer=True, prefix=""):
    """Writes write's checkpoint; returns its tensors' names in order."""
    if d % heads:
        raise InputError(f"--d-model {d} is not a multiple of --heads {heads}")
    rng = np.random.default_rng(seed)
    tensors = []
    for name, shape, kind in layout(layers, d, vocab, positions, mask_buffer):
        make = (lambda shape=shape, kind=kind: draw(rng, shape, kind, layers))
        tensors.append((prefix + name, "F32" if kind == "mask" else dtype, (make, shape)))
    write_safetensors(path, tensors, {"format": "pt"})
    return [t[0] for t in tensors]


def load_gpt2(path, storage="fp32", expect=None):
    """The GPT-2 weights of a checkpoint as float32 numpy arrays rounded to `storage`, keyed without prefix, and
    (layers, d_model, vocab, max_positions). Unknown tensors (the attn.bias masks, lm_head.weight) are ignored.
    expect: a dict of those keys that must match."""
    st = SafeTensors(path)
    names = set(st.names())
    prefix = "" if "wte.weight" in names else PREFIX if PREFIX + "wte.weight" in names else None
    if prefix is None:
        raise InputError(f"{path}: no wte.weight (nor {PREFIX}wte.weight): not a GPT-2 checkpoint")
    if len(st.entries[prefix + "wte.weight"][1]) != 2:
        raise InputError(f"{path}: wte.weight is not [vocab, d_model]")
    vocab, d = st.entries[prefix + "wte.weight"][1]
    if prefix + "wpe.weight" not in names or len(st.entries[prefix + "wpe.weight"][1]) != 2:
        raise InputError(f"{path}: no wpe.weight [max_positions, d_model]")
    positions = st.entries[prefix + "wpe.weight"][1][0]
    layers = 0
    while f"{prefix}h.{layers}.ln_1.weight" in names:
        layers += 1
    got = dict(layers=layers, d_model=d, vocab=vocab, max_positions=positions)
    for key, value in (expect or {}).items():
        if value is not None and got[key] != value:
            raise InputError(f"{path}: the checkpoint has {key} {got[key]}, the point {value}")
    w = {}
    for name, shape, _ in layout(layers, d, vocab, positions, mask_buffer=False):
        if prefix + name not in names:
            raise InputError(f"{path}: no tensor {prefix + name}")
        if st.entries[prefix + name][1] != tuple(shape):
            raise InputError(f"{path}: tensor {prefix + name} is {list(st.entries[prefix + name][1])}, "
                             f"GPT-2 needs {list(shape)}")
        w[name] = round_to(st.array(prefix + name), storage)
    return w, (layers, d, vocab, positions)


# ----------------------------------------------------------------------------------------------------- GPT-2 in PyTorch
def layer_norm(x, g, b):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)  # the biased variance
    return (x - mu) / torch.sqrt(var + EPS) * g + b


def gelu_tanh(u):
    return 0.5 * u * (1 + torch.tanh(math.sqrt(2 / math.pi) * (u + 0.044715 * u * u * u)))


class GPT2:
    """GPT-2 over weights `w` (load_gpt2's names) in `dtype` on `device`. fused=False: every step written out from the
    math (check's reference); fused=True: what a user writes for speed (F.layer_norm, addmm, SDPA, F.gelu)."""

    def __init__(self, w, heads, dtype, device, fused=False):
        to = lambda a: (a if torch.is_tensor(a) else torch.from_numpy(np.ascontiguousarray(a))).to(device=device,
                                                                                                    dtype=dtype)
        self.wte, self.wpe = to(w["wte.weight"]), to(w["wpe.weight"])
        self.vocab, self.d = self.wte.shape
        self.positions = self.wpe.shape[0]
        if self.d % heads:
            raise InputError(f"d_model {self.d} is not a multiple of heads {heads}")
        self.heads, self.head_dim = heads, self.d // heads
        self.layers = []
        i = 0
        while f"h.{i}.ln_1.weight" in w:
            p = f"h.{i}."
            self.layers.append({k: to(w[p + n]) for k, n in [
                ("ln1_g", "ln_1.weight"), ("ln1_b", "ln_1.bias"), ("qkv_w", "attn.c_attn.weight"),
                ("qkv_b", "attn.c_attn.bias"), ("proj_w", "attn.c_proj.weight"), ("proj_b", "attn.c_proj.bias"),
                ("ln2_g", "ln_2.weight"), ("ln2_b", "ln_2.bias"), ("fc_w", "mlp.c_fc.weight"),
                ("fc_b", "mlp.c_fc.bias"), ("out_w", "mlp.c_proj.weight"), ("out_b", "mlp.c_proj.bias")]})
            i += 1
        self.lnf_g, self.lnf_b = to(w["ln_f.weight"]), to(w["ln_f.bias"])
        self.dtype, self.device, self.fused = dtype, device, fused

    def new_cache(self, batch, length):
        """A KV cache for `length` positions: per layer (k, v) [batch, heads, length, head_dim]."""
        shape = (batch, self.heads, length, self.head_dim)
        return [(torch.zeros(shape, dtype=self.dtype, device=self.device),
                 torch.zeros(shape, dtype=self.dtype, device=self.device)) for _ in self.layers]

    def forward(self, tokens, start=0, cache=None, last_only=True):
        """Logits [batch, vocab] of the last position (all positions [batch, n, vocab] with last_only=False) for
        tokens [batch, n] at positions start..start+n-1; with a cache, the keys and values of those positions are
        written to it and attention reads positions 0..start+n-1 from it; without one, start must be 0."""
        B, n = tokens.shape
        if cache is None and start != 0:
            raise ValueError("without a cache the tokens must start at position 0")
        if start + n > self.positions:
            raise InputError(f"position {start + n - 1} is past max_positions {self.positions}")
        D, H, hd = self.d, self.heads, self.head_dim
        x = self.embed(tokens, start)  # [B, n, D]
        for i, L in enumerate(self.layers):
            h = self.norm(x, L["ln1_g"], L["ln1_b"])
            qkv = torch.addmm(L["qkv_b"], h.reshape(B * n, D), L["qkv_w"]).view(B, n, 3, H, hd)
            q, k, v = (qkv[:, :, j].transpose(1, 2) for j in range(3))  # [B, H, n, hd]
            if cache is not None:
                kc, vc = cache[i]
                kc[:, :, start:start + n] = k
                vc[:, :, start:start + n] = v
                k, v = kc[:, :, :start + n], vc[:, :, :start + n]
            a = self.attend(q, k, v, start)  # [B, H, n, hd]
            a = a.transpose(1, 2).reshape(B * n, D)
            x = x + torch.addmm(L["proj_b"], a, L["proj_w"]).view(B, n, D)
            h = self.norm(x, L["ln2_g"], L["ln2_b"]).reshape(B * n, D)
            f = torch.addmm(L["fc_b"], h, L["fc_w"])
            f = F.gelu(f, approximate="tanh") if self.fused else gelu_tanh(f)
            x = x + torch.addmm(L["out_b"], f, L["out_w"]).view(B, n, D)
        if last_only:
            x = x[:, -1]
        return self.norm(x, self.lnf_g, self.lnf_b) @ self.wte.T

    def embed(self, tokens, start):
        n = tokens.shape[1]
        if self.fused:
            return F.embedding(tokens, self.wte) + self.wpe[start:start + n]
        return self.wte[tokens] + self.wpe[start:start + n][None]

    def norm(self, x, g, b):
        return F.layer_norm(x, (self.d,), g, b, EPS) if self.fused else layer_norm(x, g, b)

    def attend(self, q, k, v, start):
        """Causal attention of queries at start..start+n-1 over keys 0..T-1 (T = start + n)."""
        n, T = q.shape[2], k.shape[2]
        if self.fused and (n == 1 or start == 0):
            return F.scaled_dot_product_attention(q, k, v, is_causal=n > 1)
        s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(self.head_dim))  # [B, H, n, T]
        qpos = torch.arange(start, start + n, device=q.device)[:, None]
        kpos = torch.arange(T, device=q.device)[None, :]
        s = s.masked_fill(kpos > qpos, float("-inf"))
        s = s - s.amax(-1, keepdim=True)
        p = torch.exp(s)
        p = p / p.sum(-1, keepdim=True)
        return p @ v

    def step_at(self, token, pos, cache):
        """One decode step with the same shapes at every position, for torch.compile's CUDA graphs (bench
        --compile): token [batch, 1] at position pos, a 1-element int64 tensor on the device (a Python int would
        make every position its own graph). Its key and value go to cache row pos (index_copy_), and attention
        reads the whole cache [batch, heads, length, head_dim] under a mask of the rows <= pos, whose other rows
        may hold anything finite. Returns the logits [batch, vocab], as forward(token, pos, cache) does."""
        B = token.shape[0]
        D, H, hd = self.d, self.heads, self.head_dim
        T = cache[0][0].shape[2]
        x = F.embedding(token, self.wte) + F.embedding(pos, self.wpe)  # [B, 1, D] + [1, D]
        seen = (torch.arange(T, device=token.device) <= pos).view(1, 1, 1, T)
        for i, L in enumerate(self.layers):
            h = self.norm(x, L["ln1_g"], L["ln1_b"])
            qkv = torch.addmm(L["qkv_b"], h.reshape(B, D), L["qkv_w"]).view(B, 1, 3, H, hd)
            q, k, v = (qkv[:, :, j].transpose(1, 2) for j in range(3))  # [B, H, 1, hd]
            kc, vc = cache[i]
            kc.index_copy_(2, pos, k)
            vc.index_copy_(2, pos, v)
            a = F.scaled_dot_product_attention(q, kc, vc, attn_mask=seen)  # [B, H, 1, hd]
            x = x + torch.addmm(L["proj_b"], a.transpose(1, 2).reshape(B, D), L["proj_w"]).view(B, 1, D)
            h = self.norm(x, L["ln2_g"], L["ln2_b"]).reshape(B, D)
            f = torch.addmm(L["fc_b"], h, L["fc_w"])
            f = F.gelu(f, approximate="tanh") if self.fused else gelu_tanh(f)
            x = x + torch.addmm(L["out_b"], f, L["out_w"]).view(B, 1, D)
        return self.norm(x[:, -1], self.lnf_g, self.lnf_b) @ self.wte.T

    def tensors(self):
        """Every weight tensor."""
        return [self.wte, self.wpe, self.lnf_g, self.lnf_b] + [t for L in self.layers for t in L.values()]


def greedy(model, prompts, generate, cached=True):
    """Greedy generation from prompts [batch, P] (int64 tensor): logits [generate, batch, vocab] (model's dtype) and
    tokens [generate, batch]. Step 0 is the prompt's last position; step t >= 1 feeds step t-1's token at position
    P + t - 1. cached=False recomputes the whole sequence at every step."""
    B, P = prompts.shape
    if P < 1 or generate < 1:
        raise InputError("the prompt and generate must be at least 1")
    if P + generate - 1 > model.positions:
        raise InputError(f"prompt {P} + generate {generate} - 1 is past max_positions {model.positions}")
    seq = torch.empty(B, P + generate, dtype=torch.int64, device=model.device)
    seq[:, :P] = prompts
    logits = torch.empty(generate, B, model.vocab, dtype=model.dtype, device=model.device)
    cache = model.new_cache(B, P + generate - 1) if cached else None
    for t in range(generate):
        if t == 0:
            out = model.forward(seq[:, :P], 0, cache)
        elif cached:
            out = model.forward(seq[:, P + t - 1:P + t], P + t - 1, cache)
        else:
            out = model.forward(seq[:, :P + t], 0, None)
        logits[t] = out
        seq[:, P + t] = torch.argmax(out, dim=-1)  # the first maximum: the lowest id on a tie
    return logits, seq[:, P:].T


# --------------------------------------------------------------------------------------------------------- the comparison
def compare(got, want, atol, rtol):
    """attnbench's logits `got` against PyTorch's `want`, both [generate, batch, vocab]. Per sequence: the first step
    whose argmax differs (`diverged`, None when none), the logits compared at every step up to and including it, and
    at a divergence PyTorch's top-2 margin there against 2*(atol + rtol*|top1|). Returns a dict: ok, max_err,
    bad (elements outside the tolerance), compared, nonfinite, and per sequence (diverged, margin, limit)."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    G, B, V = want.shape
    res = dict(ok=True, max_err=0.0, bad=0, compared=0, nonfinite=int((~np.isfinite(got)).sum()), seqs=[],
               why=[])
    if got.shape != want.shape:
        res.update(ok=False, why=[f"shape {list(got.shape)}, expected {list(want.shape)}"])
        return res
    if res["nonfinite"]:
        res["ok"] = False
        res["why"].append(f"{res['nonfinite']} non-finite logits")
    got_tok = np.argmax(np.where(np.isnan(got), -np.inf, got), axis=2)
    want_tok = np.argmax(want, axis=2)
    for b in range(B):
        differ = np.nonzero(got_tok[:, b] != want_tok[:, b])[0]
        d = int(differ[0]) if differ.size else None
        last = G - 1 if d is None else d
        g, w = got[:last + 1, b], want[:last + 1, b]
        err = np.abs(g - w)
        # attnbench's rule (app/ops/model.cpp): rtol applies to max(|want|, the row's RMS), since an error in
        # the final hidden state moves a whole row of logits at that scale.
        rms = np.sqrt(np.mean(w * w, axis=-1, keepdims=True))
        bad = ~(err <= atol + rtol * np.maximum(np.abs(w), rms))  # NaN is outside
        res["bad"] += int(bad.sum())
        res["compared"] += int(bad.size)
        finite = err[np.isfinite(err)]
        if finite.size:
            res["max_err"] = max(res["max_err"], float(finite.max()))
        if bad.any():
            res["ok"] = False
            step = int(np.nonzero(bad.any(axis=1))[0][0])
            res["why"].append(f"seq {b}: {int(bad.sum())} logits outside the tolerance, the first at step {step}")
        seq = dict(diverged=d, margin=None, limit=None)
        if d is not None:
            top2 = np.partition(want[d, b], V - 2)[V - 2:] if V >= 2 else np.array([want[d, b, 0]] * 2)
            seq["margin"] = float(top2[1] - top2[0])
            seq["limit"] = 2 * (atol + rtol * abs(float(top2[1])))
            if seq["margin"] > seq["limit"]:
                res["ok"] = False
                res["why"].append(f"seq {b}: token {int(got_tok[d, b])} at step {d} where PyTorch's is "
                                  f"{int(want_tok[d, b])} by a margin of {seq['margin']:.3g} > {seq['limit']:.3g}")
        res["seqs"].append(seq)
    return res


# ------------------------------------------------------------------------------------------------------------------ check
def prompts_of(d, m):
    """The point's prompts [batch, P] (int64): its `prompt` ids for every sequence, else the dumped token ids."""
    s = m["shape"]
    batch = int(s["batch"])
    given = s.get("prompt") or []
    if given:
        return np.tile(np.asarray(given, dtype=np.int64), (batch, 1))
    n = int(s.get("prompt_len") or 0)
    inputs = m.get("inputs", {})
    for name in ("tokens", "prompt", "prompt_ids", "input_ids", "ids"):
        if name in inputs:
            a = np.load(d / inputs[name]["file"])
            if not n:
                n = a.shape[-1]
            a = a.reshape(-1, a.shape[-1]) if a.ndim > 1 else a[None]
            if a.shape[0] == 1:
                a = np.tile(a, (batch, 1))
            if a.shape[0] != batch or a.shape[1] < n:
                raise InputError(f"{d}: input {name} is {list(np.shape(a))}, expected [{batch}, >= {n}]")
            ids = a[:, :n]
            if not np.all(ids == np.round(ids)):
                raise InputError(f"{d}: input {name} holds non-integer token ids")
            return ids.astype(np.int64)
    raise InputError(f"{d}: the point gives no prompt ids and the dump has none (inputs: {', '.join(inputs)})")


def resolve_device(name):
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise InputError("--device cuda: no GPU that PyTorch can use")
    return name


class Reference:
    """Loads each (weights, storage) once and runs each (prompts, generate) once."""

    def __init__(self, args):
        self.args, self.models, self.runs = args, {}, {}

    def model(self, path, storage, heads, expect):
        key = (str(path), storage, heads)
        if key not in self.models:
            self.models.clear()  # one model in memory at a time
            self.runs.clear()
            w, _ = load_gpt2(path, storage, expect)
            device = resolve_device(self.args.device)
            dtype = {"float64": torch.float64, "float32": torch.float32}[self.args.precision]
            if device.startswith("cuda"):
                torch.backends.cuda.matmul.allow_tf32 = False
                torch.backends.cudnn.allow_tf32 = False
            self.models[key] = GPT2(w, heads, dtype, device)
        return self.models[key]

    def logits(self, model, prompts, generate):
        """PyTorch's logits [generate, batch, vocab] as float64 numpy, each distinct prompt run once."""
        unique, inverse = np.unique(prompts, axis=0, return_inverse=True)
        key = (id(model), unique.tobytes(), unique.shape, generate)
        if key not in self.runs:
            with torch.inference_mode():
                lg, _ = greedy(model, torch.from_numpy(unique).to(model.device), generate)
            self.runs.clear()
            self.runs[key] = lg.to(torch.float64).cpu().numpy()
        return self.runs[key][:, np.asarray(inverse).reshape(-1)]


def point_dims(s):
    """(layers, d_model, heads, vocab, max_positions) the point names, a preset filling what it leaves out."""
    preset = PRESETS.get(s.get("preset") or "", (None,) * 5)
    keys = ("layers", "d_model", "heads", "vocab", "max_positions")
    return [int(s[k]) if s.get(k) else preset[i] for i, k in enumerate(keys)]


def check_point(d, m, args, ref):
    s = m["shape"]
    label = f"{m['case']} [{m.get('point') or '-'}] seed {m.get('seed')}"
    weights = args.weights or s.get("weights") or m.get("weights")
    if not weights:
        raise InputError(f"{label}: the point has no weights file and --weights was not given")
    weights = pathlib.Path(weights)
    if not weights.is_absolute() and not weights.exists() and (d / weights).exists():
        weights = d / weights
    layers, dm, heads, vocab, positions = point_dims(s)
    expect = dict(layers=layers, d_model=dm, vocab=vocab, max_positions=positions)
    storage = m["dtype"]
    if heads is None:
        heads = (dm or 768) // 64  # GPT-2's head_dim is 64 in every size
    model = ref.model(weights, storage, heads, expect)
    prompts = prompts_of(d, m)
    if prompts.min() < 0 or prompts.max() >= model.vocab:
        raise InputError(f"{label}: prompt ids outside [0, {model.vocab})")
    G, B = int(s["generate"]), int(s["batch"])
    want = ref.logits(model, prompts, G)
    atol, rtol = float(m["tolerance"]["atol"]), float(m["tolerance"]["rtol"])
    print(f"point {label}: PyTorch {str(model.dtype).replace('torch.', '')} on {model.device} ({len(model.layers)} "
          f"layers, d_model {model.d}, heads {model.heads}, weights rounded to {storage}), batch {B}, prompt "
          f"{prompts.shape[1]}, generate {G}; tolerance {atol:g} + {rtol:g}*|want|")
    oks = []
    outputs = m.get("outputs", {})
    if not outputs:
        print(f"       {label}: no out_*.npy")
    for name, o in outputs.items():
        got = np.load(d / o["file"])
        if got.size == want.size and got.shape != want.shape:
            got = got.reshape(want.shape)
        r = compare(got, want, atol, rtol)
        agreed = [G if q["diverged"] is None else q["diverged"] for q in r["seqs"]]
        full = sum(a == G for a in agreed)
        line = (f"{'ok  ' if r['ok'] else 'FAIL'} {label} {name}: max abs err {r['max_err']:.3e} "
                f"({r['bad']} of {r['compared']} outside), tokens agreed {min(agreed) if agreed else 0}/{G} steps "
                f"at worst, {full}/{len(agreed)} sequences all {G}")
        print(line)
        for b, q in enumerate(r["seqs"]):
            if q["diverged"] is not None:
                tie = "near-tie" if q["margin"] <= q["limit"] else "REAL DIFFERENCE"
                print(f"       seq {b} diverged at step {q['diverged']}: PyTorch's top-2 margin {q['margin']:.3e} "
                      f"(limit {q['limit']:.3e}, {tie})")
        for why in r["why"][:8]:
            print(f"       {why}")
        oks.append(r["ok"])
    reference_note(d, m, want)
    return oks


def reference_note(d, m, want):
    """Information only: attnbench's own fp64 reference rows beside PyTorch's, where they are rows of
    [generate * batch, vocab] and before the reference's argmax leaves PyTorch's."""
    r = m.get("reference")
    try:
        G, B, V = want.shape
        if not r or list(r.get("output_view", [])) != [G * B, V]:
            return
        ref, rows = np.load(d / r["file"]), np.load(d / r["rows_file"])
    except (OSError, ValueError, KeyError):
        return
    worst, n, gone = 0.0, 0, set()
    for k in np.argsort(rows, kind="stable"):
        t, b = divmod(int(rows[k]), B)
        if b in gone:
            continue
        worst = max(worst, float(np.nanmax(np.abs(ref[k] - want[t, b]))))
        n += 1
        if int(np.argmax(ref[k])) != int(np.argmax(want[t, b])):
            gone.add(b)
    if n:
        print(f"       attnbench's fp64 reference: max abs diff to PyTorch {worst:.3e} over {n} rows")


def cmd_check(args):
    if torch is None:
        print("check needs torch (pip install torch)", file=sys.stderr)
        return 2
    manifests = sorted(pathlib.Path(args.dump).rglob("manifest.json"))
    ref, results = Reference(args), []
    for path in manifests:
        try:
            m = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            print(f"{path}: cannot read the manifest ({e})", file=sys.stderr)
            return 2
        if m.get("op") != "model":
            print(f"skip {m.get('case')}: op {m.get('op')} (only model)")
            continue
        results += check_point(path.parent, m, args, ref)
    if not results:
        print(f"{args.dump}: no model dumps (out_*.npy of op model) found", file=sys.stderr)
        return 2
    print(f"{results.count(True)} agree, {results.count(False)} disagree")
    return 0 if all(results) else 1


# ------------------------------------------------------------------------------------------------------------------ write
def cmd_write(args):
    dims = dict(layers=args.layers, d_model=args.d_model, heads=args.heads, vocab=args.vocab,
                max_positions=args.max_positions)
    if args.real_shapes:
        for k, v in zip(dims, PRESETS["gpt2"]):
            dims[k] = v if dims[k] is None else dims[k]
    missing = [k for k, v in dims.items() if v is None]
    if missing:
        raise InputError("write: give --" + ", --".join(k.replace("_", "-") for k in missing) + " (or --real-shapes)")
    if any(v < 1 for v in dims.values()):
        raise InputError("write: every size must be at least 1")
    names = write_gpt2(args.out, dims["layers"], dims["d_model"], dims["heads"], dims["vocab"],
                       dims["max_positions"], args.dtype, args.seed, not args.no_mask_buffer, args.prefix)
    print(f"{args.out}: GPT-2 {' '.join(f'{k} {v}' for k, v in dims.items())}, {args.dtype}, seed {args.seed}, "
          f"{len(names)} tensors, {os.path.getsize(args.out)} bytes")
    return 0


# ------------------------------------------------------------------------------------------------------------------ bench
def quantile(xs, q):
    """Of sorted xs, interpolated, as app/stats.cpp's quantile() (peers.py's); None when empty."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tools"))
    from peers import quantile as interpolated
    return interpolated(xs, q) if xs else None


def stats(samples):
    xs = sorted(samples)
    return dict(mean=sum(xs) / len(xs) if xs else None, p50=quantile(xs, 0.5), p99=quantile(xs, 0.99),
                min=xs[0] if xs else None, max=xs[-1] if xs else None, samples=list(samples))


def random_weights(layers, d, vocab, positions, dtype, device, seed):
    """write's init scales, drawn by torch on the device (fast for any size), in `dtype`."""
    g = torch.Generator(device=device).manual_seed(seed)
    w = {}
    for name, shape, kind in layout(layers, d, vocab, positions, mask_buffer=False):
        std = {"w": 0.02, "wpe": 0.01, "proj": 0.02 / math.sqrt(2 * layers), "b": 0.02, "ln_w": 0.02}[kind]
        x = torch.randn(shape, generator=g, device=device, dtype=torch.float32) * std
        w[name] = (x + 1 if kind == "ln_w" else x).to(dtype)
    return w


class CompiledDecode:
    """bench --compile's decode step: GPT2.step_at and the greedy argmax under torch.compile(mode="reduce-overhead",
    fullgraph=True), over one cache of `length` positions that every generation reuses (a new cache would be a new
    address, and a new CUDA graph). The weights, the cache and the step's two inputs (the token and the position,
    copied in before each step) are marked static addresses: the graph reads them in place."""

    def __init__(self, model, batch, length):
        self.model = model
        self.cache = model.new_cache(batch, length)
        self.token = torch.zeros(batch, 1, dtype=torch.int64, device=model.device)
        self.pos = torch.zeros(1, dtype=torch.int64, device=model.device)
        for t in [self.token, self.pos, *(x for kv in self.cache for x in kv), *model.tensors()]:
            torch._dynamo.mark_static_address(t)
        self.step = torch.compile(self._step, mode="reduce-overhead", fullgraph=True, dynamic=False)

    def _step(self, token, pos):
        return torch.argmax(self.model.step_at(token, pos, self.cache), dim=-1, keepdim=True)

    def __call__(self, token, position):
        """The next token [batch, 1] after token [batch, 1] at `position`; valid until the next call."""
        self.token.copy_(token)
        self.pos.fill_(position)
        torch.compiler.cudagraph_mark_step_begin()  # the last step's output is consumed: its memory may be reused
        return self.step(self.token, self.pos)


def timed_generation(model, prompts, generate, decode=None):
    """One greedy generation with CUDA events around the prefill + first token and around every decode step (the
    compiled step when `decode` is a CompiledDecode, whose cache it then uses). Returns (ttft_ms, [tbt_ms],
    tokens [generate, batch] on the GPU); one synchronize, at the end."""
    B, P = prompts.shape
    cache = decode.cache if decode is not None else model.new_cache(B, P + generate - 1)
    tokens = torch.empty(generate, B, 1, dtype=torch.int64, device=model.device)
    events = [torch.cuda.Event(enable_timing=True) for _ in range(generate + 1)]
    events[0].record()
    logits = model.forward(prompts, 0, cache)
    torch.argmax(logits, dim=-1, keepdim=True, out=tokens[0])
    events[1].record()
    for t in range(1, generate):
        if decode is not None:
            tokens[t].copy_(decode(tokens[t - 1], P + t - 1))
        else:
            logits = model.forward(tokens[t - 1], P + t - 1, cache)
            torch.argmax(logits, dim=-1, keepdim=True, out=tokens[t])
        events[t + 1].record()
    torch.cuda.synchronize()
    times = [events[i].elapsed_time(events[i + 1]) for i in range(generate)]
    return times[0], times[1:], tokens[:, :, 0]


def cmd_bench(args):
    if torch is None or not torch.cuda.is_available():
        print("bench needs torch and a CUDA GPU", file=sys.stderr)
        return 2
    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    device = "cuda"
    if args.weights:
        w, (layers, d, vocab, positions) = load_gpt2(args.weights, "fp32")
        w = {k: torch.from_numpy(v) for k, v in w.items()}
        heads = args.heads or d // 64  # GPT-2's head_dim is 64 in every size
    else:
        pl, pd, ph, pv, pp = PRESETS[args.preset]
        layers, d = args.layers or pl, args.d_model or pd
        vocab, positions = args.vocab or pv, args.max_positions or pp
        heads = args.heads or (ph if d == pd else d // 64)
        if min(layers, d, heads, vocab, positions) < 1 or d % heads:
            raise InputError(f"bench: d_model {d} must be a multiple of heads {heads}, every size at least 1")
        w = random_weights(layers, d, vocab, positions, dtype, device, args.seed)
    if min(args.prompt, args.generate, args.batch, args.repeat) < 1 or d % heads:
        raise InputError("bench: --batch, --prompt, --generate and --repeat must be at least 1, d_model a multiple "
                         "of heads")
    if args.prompt + args.generate - 1 > positions:
        raise InputError(f"bench: --prompt {args.prompt} + --generate {args.generate} - 1 is past max_positions "
                         f"{positions}")
    model = GPT2(w, heads, dtype, device, fused=True)
    del w
    g = torch.Generator(device=device).manual_seed(args.seed + 1)
    prompts = torch.randint(0, vocab, (args.batch, args.prompt), generator=g, device=device)
    ttft, tbt = [], []
    with torch.inference_mode():
        decode = CompiledDecode(model, args.batch, args.prompt + args.generate - 1) if args.compile else None
        if decode is not None:
            # Compile, then let the CUDA graph tree warm up and record (its first calls run eagerly), so every
            # timed step is a replay however short --generate is. The cache rows written here are rewritten
            # (prompt) or masked (the rest) by every generation.
            for _ in range(3):
                decode(prompts[:, -1:], args.prompt - 1)
        timed_generation(model, prompts, args.generate, decode)  # warm-up: cuBLAS plans, SDPA's kernels, the allocator
        gc.collect()
        gc.disable()  # no collection pause inside a timed step (a serving loop would tune or freeze gc as well)
        try:
            for _ in range(args.repeat):
                first, steps, tokens = timed_generation(model, prompts, args.generate, decode)
                ttft.append(first)
                tbt += steps
        finally:
            gc.enable()
    name = torch.cuda.get_device_name()
    T, S = stats(ttft), stats(tbt)
    decode_tps = args.batch * 1e3 / S["mean"] if tbt else None
    total_ms = sum(ttft) + sum(tbt)
    e2e_tps = args.batch * args.generate * args.repeat * 1e3 / total_ms
    how = 'eager prefill, torch.compile(mode="reduce-overhead") decode:' if args.compile else "eager"
    print(f"PyTorch {torch.__version__} {how} GPT-2 on {name}: {args.dtype}, layers {layers}, d_model {d}, heads "
          f"{heads}, vocab {vocab}; batch {args.batch}, prompt {args.prompt}, generate {args.generate}, "
          f"{args.repeat} runs after a warm-up")
    print(f"TTFT ms: mean {T['mean']:.3f}  p50 {T['p50']:.3f}  p99 {T['p99']:.3f}")
    if tbt:
        print(f"TBT  ms: mean {S['mean']:.4f}  p50 {S['p50']:.4f}  p99 {S['p99']:.4f}  "
              f"({len(tbt)} decode steps)")
        print(f"decode tokens/s: {decode_tps:.1f} (batch / mean TBT); end to end {e2e_tps:.1f}")
    print(f"greedy tokens of sequence 0: {tokens[:16, 0].tolist()}{' ...' if args.generate > 16 else ''}")
    # With --compile, whether Inductor kept the step in a CUDA graph (it falls back to plain launches, with a warning,
    # where it cannot): the timing means "reduce-overhead" only when this is 0.
    skips = torch._dynamo.utils.counters["inductor"]["cudagraph_skips"] if args.compile else None
    if skips:
        print(f"warning: Inductor skipped CUDA graphs {skips} time(s): the compiled steps ran without a graph")
    if args.json:
        mode = "compile" if args.compile else "eager"
        script = "tests/gpt2_check.py bench" + (" --compile" if args.compile else "")
        doc = dict(peer="pytorch_" + mode, mode=mode, script=script, device=name, torch=torch.__version__,
                   dtype=args.dtype, weights=args.weights or None, layers=layers, d_model=d, heads=heads,
                   vocab=vocab, max_positions=positions, batch=args.batch, prompt=args.prompt,
                   generate=args.generate, repeat=args.repeat, ttft_ms=T, tbt_ms=S if tbt else None,
                   decode_tokens_per_s=decode_tps, end_to_end_tokens_per_s=e2e_tps,
                   tokens_seq0=tokens[:, 0].tolist(), cudagraph_skips=skips)
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    return 0


# ------------------------------------------------------------------------------------------------------------------- main
def parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="write a GPT-2 checkpoint (safetensors) with random weights")
    w.add_argument("out", help="the .safetensors file to write")
    w.add_argument("--layers", type=int)
    w.add_argument("--d-model", type=int)
    w.add_argument("--heads", type=int)
    w.add_argument("--vocab", type=int)
    w.add_argument("--max-positions", type=int)
    w.add_argument("--dtype", choices=["F32", "F16", "BF16"], default="F32")
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--real-shapes", action="store_true", help="GPT-2 124M: L 12, D 768, H 12, V 50257, P 1024")
    w.add_argument("--no-mask-buffer", action="store_true", help="leave out the h.{i}.attn.bias buffers")
    w.add_argument("--prefix", default="", help='prefix every name (e.g. "transformer.")')
    c = sub.add_parser("check", help="check a model --dump against PyTorch")
    c.add_argument("dump", help="a --dump directory (searched for manifest.json files)")
    c.add_argument("--weights", help="the checkpoint (default: each point's weights)")
    c.add_argument("--device", default="auto", help="auto (cuda when PyTorch has a GPU, else cpu), cpu or cuda")
    c.add_argument("--precision", choices=["float64", "float32"], default="float64",
                   help="the reference's compute dtype (float32 turns TF32 off)")
    b = sub.add_parser("bench", help="time PyTorch eager greedy generation (the TBT peer)")
    b.add_argument("--batch", type=int, required=True)
    b.add_argument("--prompt", type=int, required=True, help="prompt length (random ids)")
    b.add_argument("--generate", type=int, required=True)
    b.add_argument("--dtype", choices=["fp32", "fp16", "bf16"], default="bf16")
    b.add_argument("--weights", help="a GPT-2 checkpoint (default: random weights)")
    b.add_argument("--preset", choices=sorted(PRESETS), default="gpt2", help="random weights' shapes (gpt2)")
    b.add_argument("--layers", type=int)
    b.add_argument("--d-model", type=int)
    b.add_argument("--heads", type=int, help="default: the preset's, or d_model / 64")
    b.add_argument("--vocab", type=int)
    b.add_argument("--max-positions", type=int)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--repeat", type=int, default=3)
    b.add_argument("--compile", action="store_true",
                   help='the decode step under torch.compile(mode="reduce-overhead"): the compiled peer')
    b.add_argument("--json", help="write the timings here")
    return ap


def main(argv=None):
    args = parser().parse_args(argv)
    try:
        return {"write": cmd_write, "check": cmd_check, "bench": cmd_bench}[args.command](args)
    except InputError as e:
        print(f"gpt2_check {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
