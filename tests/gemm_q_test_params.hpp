// What the gemm_q rungs' CPU tests (test_gemm_q_splitk.cpp, test_gemm_q_stream.cpp) ask their
// supports() and plans about: a card of a given compute capability and SM count, and a point.
#pragma once
#include <cstdint>
#include <string>

#include "kernels/gemm_q/gemm_q.hpp"

namespace attnbench::gemm_q_test {

inline DeviceCaps card(int major, int sms = 132) {
  DeviceCaps c;
  c.cc_major = major;
  c.cc_minor = 0;
  c.sm_count = sms;
  c.smem_per_block_optin = 227 * 1024;
  return c;
}

// An fp16 point of m tokens, n channels, k inputs, `bits`-bit codes in groups of `group`.
inline GemmQParams params(int64_t m, int64_t n, int64_t k, int bits = 4, int64_t group = 128) {
  GemmQParams p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.bits = bits;
  p.group = group;
  p.dtype = DType::fp16;
  return p;
}

// Where the variant `name` stands in gemm_q's ladder (the table the runner uses), or -1.
inline int ladder_index(const std::string& name) {
  const auto& table = gemm_q_variants();
  for (int i = 0; i < static_cast<int>(table.size()); ++i)
    if (name == table[static_cast<size_t>(i)].name) return i;
  return -1;
}

}  // namespace attnbench::gemm_q_test
