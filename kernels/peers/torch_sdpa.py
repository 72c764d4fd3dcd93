# Peers: PyTorch's scaled_dot_product_attention as attnbench attention variants, one per
# backend (torch_sdpa_flash, torch_sdpa_cudnn, torch_sdpa_efficient, torch_sdpa_math), so that
# they are verified against the fp64 reference and timed by attnbench's own loop:
#   attnbench run cases/perf --plugin kernels/peers/torch_sdpa.py -k 'torch_sdpa_*'
#
# What each row runs: SDPA under sdpa_kernel(that backend) on attnbench's q, k, v seen as
# [batch, heads, seq, head_dim] (transposed views, no copy), GQA through enable_gqa, then one
# copy of the result into attnbench's o (SDPA has no out=; the copy is in the time, as it is in
# any caller's). Causal attention with seq_q == seq_k is SDPA's is_causal (the two alignments
# are then one mask). With seq_q != seq_k, SDPA's is_causal is top-left and attnbench's default
# bottom-right (q_offset = seq_k - seq_q): the flash row calls the FlashAttention-2 op itself,
# whose causal flag is bottom-right (as torch.nn.attention.bias.causal_lower_right does), and
# refuses top-left there (SDPA's flash backend takes no non-square is_causal); the other rows
# read an additive mask of either alignment, built once per shape. supports() refuses every
# option SDPA does not compute exactly as attnbench defines it (window, ALiBi, soft-capping,
# sinks, RoPE, block-sparse, fp8, a query that sees no key), and asks torch's own backend
# check (torch.backends.cuda.can_use_*) whether the backend takes the point's dtype,
# head_dim, heads and mask, so a row that runs is one the backend really runs.
#
# No decode variants: a dense decode cache holds NaN past each sequence's context, and SDPA
# reads every row it is given, masked or not (0 * NaN is NaN), while slicing the cache to each
# sequence's length needs the lengths on the host (decode's are on the device only).
# tools/do_bench_check.py imports sdpa_forward() from here to time the same work with
# triton.testing.do_bench.
import attnbench
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "math": SDPBackend.MATH,
}
NOTES = {
    "flash": "PyTorch SDPA, FLASH_ATTENTION backend (FlashAttention-2); bottom-right causal via the FA2 op",
    "cudnn": "PyTorch SDPA, CUDNN_ATTENTION backend (cuDNN's fused attention)",
    "efficient": "PyTorch SDPA, EFFICIENT_ATTENTION backend (xFormers' memory-efficient kernel)",
    "math": "PyTorch SDPA, MATH backend (unfused: the score matrix in memory, fp32 softmax)",
}
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def _device():
    return torch.device("cuda", attnbench._device)


# ---- which point each backend computes exactly --------------------------------------------


def _options_refused(p):
    """The attnbench options SDPA has no exact form of, or None."""
    if p.dtype not in DTYPES:
        return "SDPA here takes fp32, fp16 or bf16 inputs, not %s" % p.dtype
    if p.window:
        return "SDPA has no sliding window"
    if p.score.alibi:
        return "SDPA has no ALiBi bias"
    if p.score.softcap:
        return "SDPA has no soft-capping"
    if p.score.sinks:
        return "SDPA has no attention sinks"
    if p.rope.style != "none":
        return "SDPA takes no RoPE"
    if p.sparse_block:
        return "SDPA has no block-sparse mask"
    if p.causal and p.q_offset < 0:
        # Bottom-right with seq_q > seq_k: the first queries see no key. attnbench defines their
        # output as 0; SDPA's backends do not all promise that.
        return "seq_q > seq_k bottom-right leaves queries without a key, which SDPA does not define as 0"
    return None


def _mask_kind(p, backend):
    """How the launch gives the causal mask: None (not causal), "is_causal" (SDPA's own:
    top-left, which is also bottom-right when seq_q == seq_k), "fa2_bottom_right" (the flash
    op's causal flag) or "explicit" (an additive mask built once per shape)."""
    if not p.causal:
        return None
    if p.seq_q == p.seq_k:
        return "is_causal"
    if backend == "flash":
        return "fa2_bottom_right" if p.q_offset == p.seq_k - p.seq_q else None
    return "explicit"


_probed = {}  # (backend, heads, kv_heads, head_dim, dtype, mask) -> None or a reason


def _backend_refuses(backend, p, mask):
    """What torch's own check for `backend` says of inputs with the point's dtype, heads,
    kv_heads, head_dim and layout (small tensors of 16 tokens), or None when it takes them.
    This is the check SDPA's dispatcher runs, so it knows this torch's limits (GQA, head_dim,
    masks) better than a table here could."""
    if backend == "math" or not torch.cuda.is_available():
        return None  # math takes everything; without a GPU (a dry run) there is nothing to ask
    key = (backend, p.heads, p.kv_heads, p.head_dim, p.dtype, mask)
    if key not in _probed:
        dev, dt, n = _device(), DTYPES[p.dtype], 16
        # attnbench's layout: [batch, seq, heads, head_dim] memory seen as [batch, heads, seq, d].
        q = torch.empty(1, n, p.heads, p.head_dim, dtype=dt, device=dev).transpose(1, 2)
        k = torch.empty(1, n, p.kv_heads, p.head_dim, dtype=dt, device=dev).transpose(1, 2)
        v = torch.empty_like(k)
        m = torch.zeros(n, n, dtype=dt, device=dev) if mask == "explicit" else None
        causal = mask in ("is_causal", "fa2_bottom_right")
        params = torch.backends.cuda.SDPAParams(q, k, v, m, 0.0, causal, p.heads != p.kv_heads)
        check = {"flash": torch.backends.cuda.can_use_flash_attention,
                 "cudnn": torch.backends.cuda.can_use_cudnn_attention,
                 "efficient": torch.backends.cuda.can_use_efficient_attention}[backend]
        ok = check(params, False)
        _probed[key] = None if ok else (
            "torch %s's %s backend does not take %s, head_dim %d, %d heads over %d kv heads%s (its own check)" %
            (torch.__version__, backend, p.dtype, p.head_dim, p.heads, p.kv_heads,
             ", an attn_mask" if m is not None else ""))
    return _probed[key]


def _supports(backend):
    def supports(p, device):
        why = _options_refused(p)
        if why:
            return why
        if backend in ("flash", "cudnn") and p.dtype == "float32":
            return "the %s backend takes fp16/bf16 only" % backend
        mask = _mask_kind(p, backend)
        if p.causal and mask is None:
            # flash, top-left with seq_q != seq_k: SDPA refuses is_causal there, and the FA2
            # op's flag means bottom-right.
            return "flash: top-left causal needs seq_q == seq_k"
        if backend == "cudnn" and p.seq_k == 1:
            return "cuDNN's SDPA takes no key length of 1"
        if backend == "math":
            # The math backend keeps the scores, their softmax and the fp32 copies of a 16-bit
            # input in memory: about three [batch, heads, seq_q, seq_k] fp32 matrices.
            need = 3 * 4 * p.batch * p.heads * p.seq_q * p.seq_k
            if need > device.total_memory // 2:
                return "math keeps the %d x %d score matrices: %.1f GiB" % (p.seq_q, p.seq_k, need / 2**30)
        return _backend_refuses(backend, p, mask)
    return supports


# ---- the work, on torch tensors -------------------------------------------------------------

_masks = {}  # (seq_q, seq_k, q_offset, dtype, device) -> additive mask [seq_q, seq_k]


def _explicit_mask(seq_q, seq_k, q_offset, dtype, device):
    """0 where query i sees key j (j <= i + q_offset), -inf elsewhere: attnbench's causal mask
    at any alignment. Built once per shape and kept, so a launch (and a CUDA graph of it) only
    reads it. Its rows are padded to a multiple of 16 elements, the alignment the
    memory-efficient kernel wants of a bias, so SDPA uses it in place instead of copying."""
    key = (seq_q, seq_k, q_offset, dtype, device)
    if key not in _masks:
        padded = -(-seq_k // 16) * 16
        i = torch.arange(seq_q, device=device)[:, None]
        j = torch.arange(padded, device=device)[None, :]
        mask = torch.zeros(seq_q, padded, dtype=dtype, device=device)
        mask.masked_fill_(j > i + q_offset, float("-inf"))
        _masks[key] = mask[:, :seq_k]
    return _masks[key]


def sdpa_forward(q, k, v, o, backend, causal, q_offset, scale):
    """O = SDPA(q, k, v) on `backend` ("flash", "cudnn", "efficient", "math"), written into o.
    q, o: [batch, seq_q, heads, d]; k, v: [batch, seq_k, kv_heads, d] (attnbench's layouts);
    causal with query i at position i + q_offset. Queues on torch's current stream."""
    seq_q, seq_k, heads, kv_heads = q.shape[1], k.shape[1], q.shape[2], k.shape[2]
    qt, kt, vt, ot = (x.transpose(1, 2) for x in (q, k, v, o))  # [batch, heads, seq, d] views
    gqa = heads != kv_heads
    with torch.no_grad():
        if causal and seq_q != seq_k and backend == "flash":
            # FlashAttention-2's causal flag is bottom-right: the op under SDPA's flash backend,
            # called as torch.nn.attention.bias.CausalBias does for causal_lower_right. It takes
            # k and v with fewer heads as they are (FA2's own GQA).
            if q_offset != seq_k - seq_q:
                raise ValueError("the FA2 op's causal flag is bottom-right only")
            out = torch.ops.aten._scaled_dot_product_flash_attention(qt, kt, vt, 0.0, True, False, scale=scale)[0]
        else:
            mask = None
            if causal and seq_q != seq_k:
                mask = _explicit_mask(seq_q, seq_k, q_offset, q.dtype, q.device)
            with sdpa_kernel([BACKENDS[backend]]):
                out = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, is_causal=causal and mask is None,
                                                     scale=scale, enable_gqa=gqa)
        ot.copy_(out)


def _launch(backend):
    def launch(t, p, stream):
        q, k, v, o = (torch.from_dlpack(x) for x in (t.q, t.k, t.v, t.o))
        with attnbench.on_stream(stream):
            sdpa_forward(q, k, v, o, backend, bool(p.causal), p.q_offset, p.score.scale)
    return launch


for _name in BACKENDS:
    attnbench.variant("attention", name="torch_sdpa_" + _name, note=NOTES[_name],
                      supports=_supports(_name))(_launch(_name))
