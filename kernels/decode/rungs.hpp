// The decode ladder's launchers, supports and workspaces, one set per rung file, for the
// variant table (variants.cpp).
#pragma once
#include <cstddef>
#include <string>

#include "kernels/decode/decode.hpp"

namespace attnbench::decode_impl {

void naive(const DecodeParams& p, const LaunchContext& ctx);  // 1_naive.cu
std::string naive_supports(const DecodeParams& p, const DeviceCaps& caps);
std::size_t naive_workspace(const DecodeParams& p);
void flash_decode(const DecodeParams& p, const LaunchContext& ctx);  // 2_flash_decode.cu
std::string fused_supports(const DecodeParams& p, const DeviceCaps& caps);  // flash_decode and split_kv
// Whether their kernel for p stores p.k_new and p.v_new (the tensor-core kernel does).
bool fused_appends(const DecodeParams& p);
void split_kv(const DecodeParams& p, const LaunchContext& ctx);  // 3_split_kv.cu
std::size_t split_workspace(const DecodeParams& p);

}  // namespace attnbench::decode_impl
