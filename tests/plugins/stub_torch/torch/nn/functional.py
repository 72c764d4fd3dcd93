# See torch/__init__.py: the CPU tests' stand-in for PyTorch.
def scaled_dot_product_attention(*args, **kwargs):
    raise RuntimeError("torch stub: no scaled_dot_product_attention on a CPU test")
