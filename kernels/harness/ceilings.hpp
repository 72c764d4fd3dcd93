// Kernels for `attnbench info`'s ceilings, and the stream hold the timing loop
// uses (kernels/harness/ceilings.cu).
#pragma once
#include <cstddef>

#include "kernels/common/kernels.hpp"

namespace attnbench {

// Reads `bytes` (a multiple of 16) of `buf` once; `sink` is a device float never written in practice.
void launch_read_stream(const void* buf, std::size_t bytes, float* sink, const DeviceCaps& caps, cudaStream_t stream);
// Reads `bytes` (a multiple of 16) of `buf` with loads that allocate in L2: with a buffer
// twice the L2 this evicts everything, dirty lines included, and leaves only clean lines.
void launch_l2_flush(const void* buf, std::size_t bytes, float* sink, const DeviceCaps& caps, cudaStream_t stream);
// Writes `bytes` (a multiple of 16) of zeros to `buf`.
void launch_write_stream(void* buf, std::size_t bytes, const DeviceCaps& caps, cudaStream_t stream);

// The dense bf16 tensor-core rate the mma.sync path (m16n8k16, fp32 accumulate)
// reaches from registers alone: no memory traffic, only independent MMAs. Needs
// sm_80 or newer. Returns the FLOPs the launch performs.
double launch_mma_sync_peak(float* sink, const DeviceCaps& caps, cudaStream_t stream);

// The same from wgmma (m64n256k16, A from registers, B from a fixed shared tile), the
// instruction cuBLAS and cuDNN use on Hopper. Only a build for sm_90a has the body: it
// writes 1 to sink[1] when it ran (sink holds 2 floats). Returns the FLOPs of the launch.
double launch_wgmma_peak(float* sink, const DeviceCaps& caps, cudaStream_t stream);

// Holds `stream` until the host writes nonzero to *release (host-mapped memory), so
// that the launches queued behind it start back to back, with no host launch
// latency between the timing events. Gives up after timeout_ms and then writes 1
// to *timed_out, so a host that never releases cannot hang the card.
void launch_stream_hold(const volatile int* release, int* timed_out, double timeout_ms, cudaStream_t stream);

}  // namespace attnbench
