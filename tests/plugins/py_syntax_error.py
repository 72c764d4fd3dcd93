# A Python plugin that does not parse: attnbench says where, exit 2.
import attnbench

@attnbench.variant("softmax")
def broken(t, p, stream)
    pass
