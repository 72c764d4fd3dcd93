# Peers: PyTorch's own GEMM and softmax as attnbench variants, so the yardsticks of the gemm
# and softmax tables are verified and timed by attnbench's loop, writing into its buffers:
#   attnbench run cases/perf --plugin kernels/peers/torch_ops.py -k torch_matmul -k torch_softmax
#
# torch_matmul (op gemm): torch.matmul(a, b^T) for layout nt, (a, b) for nn, batched, with
#   out=c: one cuBLAS strided-batched GEMM straight into attnbench's c (b^T is a transposed
#   view, which cuBLAS reads as a transposed operand: no copy).
# torch_softmax (op softmax): aten's _softmax.out over the last dim, into attnbench's y; fp16
#   and bf16 rows are reduced in fp32 (half_to_float=False only keeps the output's dtype).
import attnbench
import torch

# attnbench's gemm accumulates in fp32 (plugin.h), and so must a peer that is verified
# against it: PyTorch lets cuBLAS reduce split-K partial sums of fp16/bf16 GEMMs in the
# inputs' precision unless told not to. This process only; attnbench has no other PyTorch.
torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False

DTYPES = ("float32", "float16", "bfloat16")


def matmul_supports(p, device):
    if p.dtype not in DTYPES:
        return "fp32, fp16 or bf16"
    if p.dtype == "float32" and torch.get_float32_matmul_precision() != "highest":
        # TF32 (or bf16x3) would round the inputs: not the fp32 GEMM attnbench verifies.
        return "torch.set_float32_matmul_precision is %r: fp32 GEMMs would not be fp32" % (
            torch.get_float32_matmul_precision())
    return None


@attnbench.variant("gemm", supports=matmul_supports,
                   note="torch.matmul(out=c): cuBLAS strided-batched GEMM, fp32 accumulation, no TF32")
def torch_matmul(t, p, stream):
    a, b, c = torch.from_dlpack(t.a), torch.from_dlpack(t.b), torch.from_dlpack(t.c)
    with attnbench.on_stream(stream):
        torch.matmul(a, b.transpose(-1, -2) if p.layout == "nt" else b, out=c)


def softmax_supports(p, device):
    return None if p.dtype in DTYPES else "fp32, fp16 or bf16"


@attnbench.variant("softmax", supports=softmax_supports,
                   note="torch.softmax over the last dim (aten _softmax.out into y)")
def torch_softmax(t, p, stream):
    x, y = torch.from_dlpack(t.x), torch.from_dlpack(t.y)
    with attnbench.on_stream(stream):
        torch.ops.aten._softmax.out(x, -1, False, out=y)
