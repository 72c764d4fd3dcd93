"""attnbench's Python plugin interface (docs/plugins.md, "Python kernels").

A plugin file declares variants of attnbench's ops with the `variant` decorator:

    import attnbench, torch

    @attnbench.variant("softmax", note="torch.softmax")
    def torch_softmax(t, p, stream):
        with attnbench.on_stream(stream):
            torch.softmax(torch.from_dlpack(t.x), dim=-1, out=torch.from_dlpack(t.y))

attnbench imports this module into the Python it embeds (app/python/bridge.cpp) and calls
the decorated function once per launch with
  t       the op's tensors: zero-copy views (DLPack) of attnbench's own device buffers,
          named as the fields of the op's struct in attnbench/plugin.h (t.x, t.y for
          softmax; t.q, t.k_cache, t.block_tables ... for paged; t.d_o, t.lse, t.dq ...
          for attention_backward; t.q, t.cache, t.o ... for mla), None where the struct's
          pointer is null; t.workspace (uint8) when the variant asked for one;
  p       the struct's other fields (p.rows, p.heads, p.score.scale, p.rope.style ...),
          storage types as names ("bfloat16"; "float8_e4m3fn" for an fp8 cache);
  stream  the CUDA stream to launch on, as an int (cudaStream_t): attnbench times,
          captures and checks what is queued there.
Nothing here imports torch: a file may use Triton, CuPy or anything that takes DLPack.
"""
import os
import sys
import traceback
import types

# The ops that take plugins (attnbench/plugin.h's ATTNBENCH_OP_*).
OPS = {
    "softmax": 1,
    "gemm": 2,
    "attention": 3,
    "decode": 4,
    "paged": 5,
    "cache_append": 6,
    "reshape_and_cache": 7,
    "ragged": 8,
    "attention_backward": 9,
    "mla": 10,
}

# DLPack's type codes and widths per storage type (DLPack 1.1: kDLFloat8_e4m3fn is 10).
_DLPACK = {
    "float32": (2, 32),
    "float16": (2, 16),
    "bfloat16": (4, 16),
    "float8_e4m3fn": (10, 8),
    "int32": (0, 32),
    "int64": (0, 64),
    "uint8": (1, 8),
}
_BYTES = {name: bits // 8 for name, (_, bits) in _DLPACK.items()}

_bridge = None  # the bridge's module (capsule()), set by the bridge before any plugin loads
_device = 0  # the CUDA device attnbench runs on


class Variant:
    """One declared variant: what `@variant` recorded."""

    def __init__(self, op, name, note, launch, supports, workspace):
        self.op, self.name, self.note = op, name, note
        self.launch, self.supports, self.workspace = launch, supports, workspace


_declared = []  # the variants of the file being loaded


def variant(op, note="", name=None, supports=None, workspace=None):
    """Declares the decorated function `launch(t, p, stream)` a variant of `op`.

    name       the row's name (default: the function's); letters, digits and _
    note       one line for `attnbench list kernels`
    supports   supports(p, device) -> None when it runs these params on this card, else a
               short reason (the row says `skipped: reason`); device has sm_count,
               cc_major, cc_minor, smem_per_block_optin, l2_bytes, total_memory
    workspace  workspace(p) -> scratch bytes the launch needs (then t.workspace)
    """
    if op not in OPS:
        raise ValueError("op %r is not one attnbench takes plugins for: %s" % (op, ", ".join(OPS)))

    def declare(launch):
        _declared.append(Variant(op, name or launch.__name__, note, launch, supports, workspace))
        return launch

    return declare


class Tensor:
    """A view of one of attnbench's device buffers, handed over by DLPack.

    torch.from_dlpack(t), cupy.from_dlpack(t) and jax.dlpack.from_dlpack(t) give a tensor on
    the same memory, no copy. shape and strides are in elements, as torch's are.
    """

    __slots__ = ("data_ptr", "dtype", "shape", "strides", "device")

    def __init__(self, data_ptr, dtype, shape, strides, device):
        self.data_ptr, self.dtype, self.shape, self.strides, self.device = data_ptr, dtype, shape, strides, device

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        # The consumer's stream needs no event: attnbench hands the same stream to the launch.
        code, bits = _DLPACK[self.dtype]
        return _bridge.capsule(self.data_ptr, code, bits, self.shape, self.strides, self.device)

    def __dlpack_device__(self):
        return (2, self.device)  # kDLCUDA

    @property
    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self):
        return self.numel * _BYTES[self.dtype]

    def __repr__(self):
        return "attnbench.Tensor(%s, shape=%s, strides=%s, data_ptr=0x%x)" % (
            self.dtype, self.shape, self.strides, self.data_ptr)


def on_stream(stream):
    """`with attnbench.on_stream(stream):` makes attnbench's stream PyTorch's current one
    (and so Triton's, which launches on torch's current stream)."""
    import torch

    return torch.cuda.stream(torch.cuda.ExternalStream(stream, device=torch.device("cuda", _device)))


# ---- what the bridge calls ----------------------------------------------------------------


def _where(e):
    """The exception's type, message and the traceback's last frame outside this file (the
    plugin's line, not the check here that raised), on one line."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename != __file__]
    text = ("%s: %s" % (type(e).__name__, e)).strip().replace("\n", " ")
    if isinstance(e, SyntaxError) and e.filename:
        return "%s (%s:%s)" % (text, os.path.basename(e.filename), e.lineno)
    if frames:
        f = frames[-1]
        return "%s (%s:%d in %s)" % (text, os.path.basename(f.filename), f.lineno, f.name)
    return text


def _load(path):
    """Runs the plugin file; returns its variants as [(Variant, op number)] or a message.

    The file is imported as a module of its own, kept in sys.modules under a name no other
    plugin takes (attnbench_plugin_<stem>, numbered if needed): torch.compile and pickling
    find a function's globals through its module, which runpy's temporary one would not give.
    """
    import importlib.util
    import re

    del _declared[:]
    directory = os.path.dirname(os.path.abspath(path))
    if directory not in sys.path:
        sys.path.insert(0, directory)  # so that a plugin can import the files beside it
    stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    name, n = "attnbench_plugin_" + stem, 1
    while name in sys.modules:
        n += 1
        name = "attnbench_plugin_%s_%d" % (stem, n)
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    except BaseException as e:  # SystemExit and KeyboardInterrupt too: never past the bridge
        sys.modules.pop(name, None)
        return "the plugin raised while loading: " + _where(e)
    if not _declared:
        return ("the plugin declares no variants; decorate a launch function with "
                "@attnbench.variant(\"OP\") (the ops: %s)" % ", ".join(OPS))
    out = [(v, OPS[v.op]) for v in _declared]
    del _declared[:]
    return out


def _namespace(fields):
    return types.SimpleNamespace(**{k: _namespace(v) if isinstance(v, dict) else v for k, v in fields.items()})


def _tensors(specs):
    return types.SimpleNamespace(**{
        k: None if s is None else Tensor(s[0], s[1], s[2], s[3], _device) for k, s in specs.items()})


def _supports(v, params, device):
    """None, a reason (str), or (False, message) for an exception."""
    if v.supports is None:
        return None
    try:
        why = v.supports(_namespace(params), _namespace(device))
    except BaseException as e:
        return (False, "supports() raised " + _where(e))
    if why is None or why == "":
        return None
    if not isinstance(why, str):
        return (False, "supports() returned %r; it returns None or a reason (str)" % (why,))
    return why


def _workspace(v, params):
    """Bytes (int), or a message (str) for an exception or a bad value."""
    if v.workspace is None:
        return 0
    try:
        n = v.workspace(_namespace(params))
    except BaseException as e:
        return "workspace() raised " + _where(e)
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        return "workspace() returned %r; it returns a number of bytes (int >= 0)" % (n,)
    return n


def _launch(v, tensors, params, stream):
    """None, or the message of what the launch raised."""
    try:
        v.launch(_tensors(tensors), _namespace(params), stream)
    except BaseException as e:
        return "launch() raised " + _where(e)
    return None


def _noop(tensors, params, stream):
    """The bridge's overhead probe: the same marshalling as a launch, no work."""
    _tensors(tensors)
    _namespace(params)
    return None
