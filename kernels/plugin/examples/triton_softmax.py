# An example Python plugin: row-wise softmax in Triton, one program per row. The whole row is
# loaded into registers once (BLOCK = the next power of two of cols, the lanes past cols
# masked to -inf), its max and sum of exponentials taken in fp32, and the row written once:
# two reductions over registers, one read and one write of memory, which is all a softmax
# whose row fits on one SM needs. Rows longer than MAX_COLS are refused: past that the row no
# longer fits in registers, and a kernel that loops over chunks (online max and sum, as
# kernels/softmax/3_warp_online.cu does) is the right design there, not a bigger block.
#   attnbench verify smoke/softmax --plugin kernels/plugin/examples/triton_softmax.py -k triton_softmax
import attnbench
import torch
import triton
import triton.language as tl

MAX_COLS = 16384


@triton.jit
def softmax_rows(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    # int64 row offset: rows * cols may pass 2^31 even when each tensor index does not.
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    inside = offs < cols
    # Lanes past the row hold -inf: they never win the max and their exp is 0.
    x = tl.load(x_ptr + row * cols + offs, mask=inside, other=-float("inf")).to(tl.float32)
    # The max first, so that no exp overflows (fp16/bf16 inputs reach 65504 and 3e38).
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * cols + offs, y.to(y_ptr.dtype.element_ty), mask=inside)


def softmax(x, y):
    """y = softmax(x) along the last dim, x and y [rows, cols] contiguous, on torch's current
    stream. Also usable outside attnbench."""
    rows, cols = x.shape
    block = max(16, triton.next_power_of_2(cols))
    # More warps for longer rows, so each thread holds at most 32 elements of the row.
    warps = 4 if block <= 2048 else 8 if block <= 8192 else 16
    softmax_rows[(rows,)](x, y, cols, BLOCK=block, num_warps=warps)


def supports(p, device):
    if p.dtype not in ("float32", "float16", "bfloat16"):
        return "fp32, fp16 or bf16"
    if p.cols > MAX_COLS:
        return "one program holds a row in registers: at most %d columns" % MAX_COLS
    if p.dtype == "bfloat16" and device.cc_major < 8:
        return "bf16 needs sm_80 or newer"
    return None


@attnbench.variant("softmax", supports=supports,
                   note="example Triton plugin: one program per row, the row in registers, fp32 max and sum")
def triton_softmax(t, p, stream):
    x, y = torch.from_dlpack(t.x), torch.from_dlpack(t.y)
    with attnbench.on_stream(stream):  # Triton launches on torch's current stream
        softmax(x, y)
