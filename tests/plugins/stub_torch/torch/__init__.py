# A stand-in for PyTorch on a machine without it, for the CPU tests of the peer plugins
# (tests/CMakeLists.txt puts this folder on PYTHONPATH): just enough for kernels/peers/torch_sdpa.py
# to import and declare its variants, and for its supports() to take the path of a dry run
# (torch.cuda.is_available() is False, so nothing asks a card). Launching anything raises.
__version__ = "0.0+stub"
float32, float16, bfloat16, int64 = "float32", "float16", "bfloat16", "int64"


class _Cuda:
    @staticmethod
    def is_available():
        return False


cuda = _Cuda()


def __getattr__(name):
    raise RuntimeError("torch stub (tests/plugins/stub_torch): torch.%s is not here; this is a CPU test" % name)
