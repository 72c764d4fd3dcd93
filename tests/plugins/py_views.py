# The tensors and params a Python variant is handed, written out through the one channel a
# CPU test can read without a GPU: the launch's exception message (tests/test_python_plugin.cpp
# calls the launch with a hand-made params struct over host memory; nothing is dereferenced).
import ctypes

import attnbench


def describe(t, p):
    out = []
    for name in sorted(vars(t)):
        x = getattr(t, name)
        if x is None:
            out.append("%s=None" % name)
            continue
        capsule = x.__dlpack__()
        valid = ctypes.pythonapi.PyCapsule_IsValid
        valid.restype, valid.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]
        out.append("%s=%s%s%s@%d%s" % (name, x.dtype, list(x.shape), list(x.strides), x.data_ptr,
                                        "" if valid(capsule, b"dltensor") else "!capsule"))
    scalars = {k: v for k, v in sorted(vars(p).items()) if not hasattr(v, "__dict__")}
    out.append("params=%s" % scalars)
    for nested in ("score", "rope"):
        if hasattr(p, nested):
            out.append("%s=%s" % (nested, dict(sorted(vars(getattr(p, nested)).items()))))
    return " ".join(out)


for op in attnbench.OPS:
    def launch(t, p, stream, op=op):
        raise RuntimeError("VIEWS %s stream=%d %s" % (op, stream, describe(t, p)))

    attnbench.variant(op, name="views_" + op, note="reports its views")(launch)
