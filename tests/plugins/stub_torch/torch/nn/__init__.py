# See torch/__init__.py: the CPU tests' stand-in for PyTorch.
