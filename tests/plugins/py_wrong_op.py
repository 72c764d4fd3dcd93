# A variant of an op that takes no plugins: exit 2 with the ops that do.
import attnbench


@attnbench.variant("sofmax")
def typo(t, p, stream):
    pass
