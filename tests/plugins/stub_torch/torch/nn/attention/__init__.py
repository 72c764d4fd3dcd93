# See torch/__init__.py: the CPU tests' stand-in for PyTorch.
import enum


class SDPBackend(enum.Enum):
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3


def sdpa_kernel(backends):
    raise RuntimeError("torch stub: no sdpa_kernel on a CPU test")
