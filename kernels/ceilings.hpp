// Bandwidth-ceiling kernels for `attnbench info` (kernels/ceilings.cu).
#pragma once
#include <cstddef>

#include "kernels.hpp"

namespace attnbench {

// Reads `bytes` (a multiple of 16) of `buf` once; `sink` is a device float never written in practice.
void launch_read_stream(const void* buf, std::size_t bytes, float* sink, const DeviceCaps& caps, cudaStream_t stream);
// Fills `count` elements of `buf` (dtype fp32, fp16 or bf16) with uniform values in
// [-1, 1): GEMM rates are measured on random data, never on zeros.
void launch_fill_uniform(void* buf, std::size_t count, DType dtype, unsigned seed, cudaStream_t stream);
// Writes `bytes` (a multiple of 16) of zeros to `buf`.
void launch_write_stream(void* buf, std::size_t bytes, const DeviceCaps& caps, cudaStream_t stream);

}  // namespace attnbench
