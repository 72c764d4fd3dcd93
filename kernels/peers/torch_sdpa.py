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
# The backward (op attention_backward, issue 50): torch_sdpa_flash_bwd and torch_sdpa_cudnn_bwd
# run only SDPA's backward kernel of that backend, aten._scaled_dot_product_flash_attention_backward
# (FlashAttention-2's) or aten._scaled_dot_product_cudnn_attention_backward, on attnbench's q, k,
# v, o, d_o and lse seen as [batch, heads, seq, head_dim] (permuted views, no copy), then copy
# their dq, dk, dv into attnbench's buffers (the ops return new tensors: three copies in the time,
# plus FA2's own sum of dK, dV over each GQA group). attnbench's lse is the forward's log-sum-exp
# in natural log, fp32 [batch, heads, seq_q], which is what both ops take; how this torch's
# forward hands it to its backward ([b, h, s_q] or cuDNN's [b, h, s_q, 1]; natural log or log2)
# is asked once of a tiny forward on the card (outside any timing), so that lse goes over as a
# view, or, if a torch ever wanted log2 units, as one multiply in the time. Causal: FA2's flag is
# bottom-right, cuDNN's (set_causal_mask) top-left, so with seq_q != seq_k each takes one
# alignment and refuses the other. Both backward kernels are nondeterministic (FA2 sums dQ with
# fp32 atomics; cuDNN's backward defaults to a nondeterministic algorithm): the plugin API cannot
# declare it, so `[verify] repeat` above 1 fails them; the notes say so. supports() refuses window,
# ALiBi, soft-capping, fp32 and queries that see no key, asks torch's own check with inputs that
# require grad, then runs the backward op once on tiny inputs of the point's heads, kv_heads,
# head_dim, dtype and mask, so a row that runs is one this torch runs.
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


_probed = {}  # (backend, heads, kv_heads, head_dim, dtype, mask, grad) -> None or a reason


def _backend_refuses(backend, p, mask, grad=False):
    """What torch's own check for `backend` says of inputs with the point's dtype, heads,
    kv_heads, head_dim and layout (small tensors of 16 tokens), or None when it takes them.
    This is the check SDPA's dispatcher runs, so it knows this torch's limits (GQA, head_dim,
    masks) better than a table here could. `grad`: inputs that require grad, so that the
    check includes the backward's limits."""
    if backend == "math" or not torch.cuda.is_available():
        return None  # math takes everything; without a GPU (a dry run) there is nothing to ask
    key = (backend, p.heads, p.kv_heads, p.head_dim, p.dtype, mask, grad)
    if key not in _probed:
        dev, dt, n = _device(), DTYPES[p.dtype], 16
        # attnbench's layout: [batch, seq, heads, head_dim] memory seen as [batch, heads, seq, d].
        q = torch.empty(1, n, p.heads, p.head_dim, dtype=dt, device=dev, requires_grad=grad).transpose(1, 2)
        k = torch.empty(1, n, p.kv_heads, p.head_dim, dtype=dt, device=dev, requires_grad=grad).transpose(1, 2)
        v = torch.empty(1, n, p.kv_heads, p.head_dim, dtype=dt, device=dev, requires_grad=grad).transpose(1, 2)
        m = torch.zeros(n, n, dtype=dt, device=dev) if mask == "explicit" else None
        causal = mask in ("is_causal", "fa2_bottom_right")
        params = torch.backends.cuda.SDPAParams(q, k, v, m, 0.0, causal, p.heads != p.kv_heads)
        check = {"flash": torch.backends.cuda.can_use_flash_attention,
                 "cudnn": torch.backends.cuda.can_use_cudnn_attention,
                 "efficient": torch.backends.cuda.can_use_efficient_attention}[backend]
        ok = check(params, False)
        _probed[key] = None if ok else (
            "torch %s's %s backend does not take %s, head_dim %d, %d heads over %d kv heads%s%s (its own check)" %
            (torch.__version__, backend, p.dtype, p.head_dim, p.heads, p.kv_heads,
             ", an attn_mask" if m is not None else "", " with grad" if grad else ""))
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


# ---- the backward: SDPA's FA2 and cuDNN backward kernels alone (op attention_backward) -------

BACKWARD = ("flash", "cudnn")
BACKWARD_NOTES = {
    "flash": "PyTorch's FA2 backward alone (aten._scaled_dot_product_flash_attention_backward) on our o, lse; "
             "dQ by fp32 atomics: nondeterministic; causal bottom-right; dq/dk/dv copies in the time",
    "cudnn": "PyTorch's cuDNN SDPA backward alone (aten._scaled_dot_product_cudnn_attention_backward) on our o, "
             "lse; nondeterministic; causal top-left; dq/dk/dv copies in the time",
}
LOG2E = 1.4426950408889634

_lse_forms = {}  # backend -> {"ndim", "log2", "seed", "offset"} or a reason


def _first_line(e, width=160):
    """An exception's first line, cut to `width`; its type's name when it says nothing."""
    lines = str(e).strip().splitlines()
    return lines[0][:width] if lines else type(e).__name__


def _forward_op(backend, q, k, v, causal, scale):
    """The backend's own SDPA forward op (q, k, v as [batch, heads, seq, d]): its nine outputs,
    (out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, philox_seed, philox_offset, debug)."""
    if backend == "flash":
        return torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False, scale=scale)
    return torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, causal, False, scale=scale)


def _lse_form(backend):
    """How this torch's `backend` forward hands its log-sum-exp to its backward, asked once of a
    tiny forward on the card (host time, never in a timing): its number of dims (3: [b, h, s_q];
    4: cuDNN's [b, h, s_q, 1] in some versions), whether it is in log2 units (compared with the
    fp32 log-sum-exp of the same scores), and the philox tensors it returned (unused without
    dropout, but the backward takes them). A reason (str) when the forward does not run or its
    log-sum-exp is neither form."""
    if backend in _lse_forms:
        return _lse_forms[backend]
    if not torch.cuda.is_available():
        return {"ndim": 3, "log2": False, "seed": None, "offset": None}  # a dry run launches nothing
    dev, scale = _device(), 0.125
    g = torch.Generator(device=dev)
    g.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 32, 64, generator=g, device=dev, dtype=torch.bfloat16) for _ in range(3))
    what = "torch %s's %s forward (a probe of its log-sum-exp)" % (torch.__version__, backend)
    try:
        with torch.no_grad():
            r = _forward_op(backend, q, k, v, False, scale)
        lse = r[1]
        ref = torch.logsumexp(scale * (q.float() @ k.float().transpose(-1, -2)), dim=-1)  # [1, 2, 32]
        if lse is None or lse.dim() not in (3, 4) or tuple(lse.shape[:3]) != tuple(ref.shape) or \
                (lse.dim() == 4 and lse.shape[3] != 1):
            form = "%s gave a log-sum-exp of shape %s, not [b, h, s_q] or [b, h, s_q, 1]" % (
                what, None if lse is None else tuple(lse.shape))
        else:
            got = lse.float().reshape(ref.shape)
            natural = (got - ref).abs().max().item()
            base2 = (got - ref * LOG2E).abs().max().item()
            if natural < 0.02:
                form = {"ndim": lse.dim(), "log2": False, "seed": r[6], "offset": r[7]}
            elif base2 < 0.02:
                form = {"ndim": lse.dim(), "log2": True, "seed": r[6], "offset": r[7]}
            else:
                form = "%s: its log-sum-exp is off the natural one by %.3g and the log2 one by %.3g" % (
                    what, natural, base2)
    except Exception as e:  # noqa: BLE001: the reason is the row's
        form = "%s raised %s: %s" % (what, type(e).__name__, _first_line(e, 120))
    _lse_forms[backend] = form
    return form


def sdpa_backward(q, k, v, o, d_o, lse, dq, dk, dv, backend, causal, scale):
    """dq, dk, dv = the gradients of SDPA on `backend` ("flash" or "cudnn"), by that backend's
    backward kernel alone, from the forward's o and lse. q, o, d_o, dq: [batch, seq_q, heads, d];
    k, v, dk, dv: [batch, seq_k, kv_heads, d] (attnbench's layouts); lse: fp32 [batch, heads,
    seq_q], natural log. Causal is FA2's bottom-right or cuDNN's top-left. Queues on torch's
    current stream; the backward's outputs are copied into dq, dk, dv."""
    form = _lse_form(backend)
    if isinstance(form, str):
        raise RuntimeError(form)
    qt, kt, vt, ot, dot = (x.permute(0, 2, 1, 3) for x in (q, k, v, o, d_o))  # [b, h, s, d] views
    if form["log2"]:
        lse = lse * LOG2E  # a temporary: one elementwise kernel in the time
    if form["ndim"] == 4:
        lse = lse.unsqueeze(-1)
    seq_q, seq_k = q.shape[1], k.shape[1]
    with torch.no_grad():
        if backend == "flash":
            grads = torch.ops.aten._scaled_dot_product_flash_attention_backward(
                dot, qt, kt, vt, ot, lse, None, None, seq_q, seq_k, 0.0, causal, form["seed"], form["offset"],
                scale=scale)
        else:
            grads = torch.ops.aten._scaled_dot_product_cudnn_attention_backward(
                dot, qt, kt, vt, ot, lse, form["seed"], form["offset"], None, None, None, seq_q, seq_k, 0.0, causal,
                scale=scale)
        for into, grad in zip((dq, dk, dv), grads):
            into.permute(0, 2, 1, 3).copy_(grad)


_backward_probed = {}  # (backend, heads, kv_heads, head_dim, dtype, causal, seq_q vs seq_k) -> None or a reason


def _backward_runs(backend, p):
    """None when the backend's backward op runs on tiny inputs of the point's heads, kv_heads,
    head_dim, dtype, causal flag and seq_q-to-seq_k relation (16 or 32 tokens), else what it
    raised. torch's dispatcher check judges only square causal masks and SDPA's own GQA rules;
    the ops themselves are what the rows call."""
    if not torch.cuda.is_available():
        return None
    rel = (p.seq_q > p.seq_k) - (p.seq_q < p.seq_k)
    key = (backend, p.heads, p.kv_heads, p.head_dim, p.dtype, bool(p.causal), rel)
    if key not in _backward_probed:
        dev, dt = _device(), DTYPES[p.dtype]
        sq, sk = {0: (16, 16), -1: (16, 32), 1: (32, 16)}[rel]
        g = torch.Generator(device=dev)
        g.manual_seed(0)

        def rows(s, h):
            return torch.randn(1, s, h, p.head_dim, generator=g, device=dev, dtype=dt)

        q, o, d_o, dq = (rows(sq, p.heads) for _ in range(4))
        k, v, dk, dv = (rows(sk, p.kv_heads) for _ in range(4))
        lse = torch.full((1, p.heads, sq), 8.0, device=dev, dtype=torch.float32)
        try:
            sdpa_backward(q, k, v, o, d_o, lse, dq, dk, dv, backend, bool(p.causal), p.score.scale)
            torch.cuda.synchronize(dev)
            why = None
        except Exception as e:  # noqa: BLE001: the reason is the row's
            why = "torch %s's %s backward op refused a probe of this point's heads, head_dim and mask: %s" % (
                torch.__version__, backend, _first_line(e))
        _backward_probed[key] = why
    return _backward_probed[key]


def _backward_supports(backend):
    def supports(p, device):
        if p.dtype not in ("float16", "bfloat16"):
            return "the %s backward takes fp16/bf16 only" % backend
        if p.window:
            return "SDPA has no sliding window"
        if p.score.alibi:
            return "SDPA has no ALiBi bias"
        if p.score.softcap:
            return "SDPA has no soft-capping"
        if p.score.sinks:
            return "SDPA has no attention sinks"
        if p.causal and p.q_offset < 0:
            return "seq_q > seq_k bottom-right leaves queries without a key, which SDPA does not define as 0"
        if p.causal and p.seq_q != p.seq_k:
            if backend == "flash" and p.q_offset != p.seq_k - p.seq_q:
                return "FA2's causal flag is bottom-right: top-left needs seq_q == seq_k"
            if backend == "cudnn" and p.q_offset != 0:
                return "cuDNN's is_causal is top-left: bottom-right needs seq_q == seq_k"
        if backend == "cudnn" and p.seq_k == 1:
            return "cuDNN's SDPA takes no key length of 1"
        why = _backend_refuses(backend, p, "is_causal" if p.causal else None, grad=True)
        if why:
            return why
        form = _lse_form(backend)
        return form if isinstance(form, str) else _backward_runs(backend, p)
    return supports


def _backward_launch(backend):
    def launch(t, p, stream):
        q, k, v, o, d_o, lse, dq, dk, dv = (torch.from_dlpack(x) for x in (t.q, t.k, t.v, t.o, t.d_o, t.lse,
                                                                          t.dq, t.dk, t.dv))
        with attnbench.on_stream(stream):
            sdpa_backward(q, k, v, o, d_o, lse, dq, dk, dv, backend, bool(p.causal), p.score.scale)
    return launch


for _name in BACKWARD:
    attnbench.variant("attention_backward", name="torch_sdpa_%s_bwd" % _name, note=BACKWARD_NOTES[_name],
                      supports=_backward_supports(_name))(_backward_launch(_name))
