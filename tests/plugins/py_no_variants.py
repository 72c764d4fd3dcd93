# A Python plugin that declares nothing: exit 2, saying how to declare a variant.
import attnbench


def launch(t, p, stream):
    pass
