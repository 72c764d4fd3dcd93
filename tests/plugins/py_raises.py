# Exceptions in a Python plugin's functions become the row's ERROR with the traceback's last
# frame, never a crash (tests/CMakeLists.txt: cli_py_supports_raises; gpu_python_plugins).
import attnbench


def supports_that_raises(p, device):
    return {}["no such key"]


@attnbench.variant("softmax", note="supports() raises", supports=supports_that_raises)
def raises_in_supports(t, p, stream):
    pass


@attnbench.variant("softmax", note="launch() raises")
def raises_in_launch(t, p, stream):
    raise ValueError("this launch fails on purpose")
