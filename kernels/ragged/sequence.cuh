// Which sequence of a ragged batch a packed query row, or a row tile, belongs to: the batch's
// sequences are consecutive in q, so a binary search of a key that grows with the sequence
// index (cu_seqlens_q itself, or the first row tile's number) finds it. Device code of the
// ragged rungs (1_naive.cu, varlen.cuh).
#pragma once
#include <cuda_runtime.h>

namespace attnbench::ragged_impl {

// The last b in [0, batch) with key(b) <= x; key(0) <= x is the caller's to ensure.
template <class Key>
__device__ __forceinline__ int last_at_most(int batch, int x, const Key& key) {
  int lo = 0, hi = batch - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (key(mid) <= x) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

}  // namespace attnbench::ragged_impl
