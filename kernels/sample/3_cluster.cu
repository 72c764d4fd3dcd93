// sample rung 3, cluster: rung 2's pivot search with each row split over a thread-block cluster
// (sm_90) of up to 8 blocks. Rung 2 gives a row one block, so at batch 1-16 one SM per row does
// all the work while the others idle, and a pass over 128256 logits costs each thread ~125
// logits of key, exp and 8 pivot compares. Here a row's blocks each take a contiguous part of
// it: every pass's statistics (the max, each pivot's count and mass) are a block's sums, then
// the cluster's, each block reading its peers' in rank order from distributed shared memory
// (so every block holds the same sums and takes the same branch); the draw scans each part
// with the mass of the parts before it as its carry, and the first block to hold the token
// wins. The split is picked from the batch: the largest power of two from 2 to 8 that keeps
// batch · split within one block (of 512 threads, ~90 registers each) per SM, so batch 1-16
// gets 8 blocks a row and batch 64 two. Same rules, same sum depth contract
// (a block's part is at most vocab / 2 logits, a thread's run at most vocab / 1024; the
// cluster adds at most 7 additions in rank order).
// Not yet timed on a GPU (written for issue 52; compiled for sm_90a).
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "kernels/common/cluster_launch.hpp"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/philox.hpp"
#include "kernels/sample/pivot.cuh"
#include "kernels/sample/rungs.hpp"

namespace attnbench::sample_impl {
namespace {

namespace cg = cooperative_groups;

constexpr int kPer = 4;        // the draw's consecutive elements a thread
constexpr int kMostSplit = 8;  // blocks a row: the portable cluster size
constexpr int kThreads = 512;  // a block: a part of at most vocab / 2 logits keeps a thread's run
                               // within vocab / 1024 (the depth contract); 64 registers spill

// Thread-block clusters are sm_90's: cluster_supports() refuses older cards, and an sm_80 build
// (README: -DCMAKE_CUDA_ARCHITECTURES=80) compiles the kernel below as a trap.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
// A block's statistics of one pass, as its peers read them.
struct PassSlot {
  int count[kPivots];
  float mass[kMasses];
  unsigned kmin;
};

// The search's sums over the cluster: the block's (block_sums), then every block's in rank
// order, read from each peer's slot; the same values in every thread of every block.
struct ClusterSums {
  __device__ void operator()(int (&count)[kPivots], float (&mass)[kMasses], unsigned& kmin) const {
    __shared__ PassSlot mine, all;
    block_sums<kThreads>(count, mass, kmin);
    cg::cluster_group cluster = cg::this_cluster();
    if (threadIdx.x == 0) {
#pragma unroll
      for (int j = 0; j < kPivots; ++j) mine.count[j] = count[j];
#pragma unroll
      for (int j = 0; j < kMasses; ++j) mine.mass[j] = mass[j];
      mine.kmin = kmin;
    }
    cluster.sync();
    const int blocks = static_cast<int>(cluster.num_blocks()), f = threadIdx.x;
    // Thread f sums field f over the blocks, in rank order.
    if (f < kPivots) {
      int c = 0;
      for (int r = 0; r < blocks; ++r) c += cluster.map_shared_rank(&mine, r)->count[f];
      all.count[f] = c;
    } else if (f < kPivots + kMasses) {
      float s = 0;
      for (int r = 0; r < blocks; ++r) s += cluster.map_shared_rank(&mine, r)->mass[f - kPivots];
      all.mass[f - kPivots] = s;
    } else if (f == kPivots + kMasses) {
      unsigned k = UINT_MAX;
      for (int r = 0; r < blocks; ++r) k = min(k, cluster.map_shared_rank(&mine, r)->kmin);
      all.kmin = k;
    }
    cluster.sync();  // every peer has read `mine` (it is rewritten next pass), and `all` is written
#pragma unroll
    for (int j = 0; j < kPivots; ++j) count[j] = all.count[j];
#pragma unroll
    for (int j = 0; j < kMasses; ++j) mass[j] = all.mass[j];
    kmin = all.kmin;
    __syncthreads();  // `all` is rewritten next pass
  }
};

// Three numbers a block gives its peers: the max and the first index holding it, then the draw's
// part mass, then where the draw found its token and the last kept token.
struct Exchange {
  float value;
  int first, last;
};

// Every block's slot, read in rank order by thread 0 and handed to the block: the cluster's view.
template <class Fold>
__device__ Exchange exchange(Exchange e, Exchange init, Fold fold) {
  __shared__ Exchange mine, all;
  cg::cluster_group cluster = cg::this_cluster();
  if (threadIdx.x == 0) mine = e;
  cluster.sync();
  if (threadIdx.x == 0) {
    Exchange acc = init;
    for (int r = 0; r < static_cast<int>(cluster.num_blocks()); ++r)
      acc = fold(acc, *cluster.map_shared_rank(&mine, r), r);
    all = acc;
  }
  cluster.sync();
  const Exchange out = all;
  __syncthreads();
  return out;
}

template <class T>
__global__ void __launch_bounds__(kThreads, 1) cluster_kernel(SampleParams p) {
  cg::cluster_group cluster = cg::this_cluster();
  const int split = static_cast<int>(cluster.num_blocks()), rank = static_cast<int>(cluster.block_rank());
  const int64_t row = blockIdx.x / split;
  const int n = static_cast<int>(p.vocab), part = (n + split - 1) / split;
  const int begin = min(n, rank * part), count = min(n, begin + part) - begin;
  const T* x = static_cast<const T*>(p.logits) + row * n + begin;  // this block's part
  // The row's max and its first index: the parts' in rank order (ascending indices).
  float pm;
  int parg;
  row_max<kThreads>(x, count, pm, parg);
  const Exchange best = exchange({pm, parg == INT_MAX ? INT_MAX : parg + begin, 0}, {-INFINITY, INT_MAX, 0},
                                 [](Exchange a, Exchange b, int) {
                                   return b.value > a.value ? b : a;  // rank order: the first of equal maxima stays
                                 });
  const float m = best.value;
  if (p.temperature == 0) {
    if (rank == 0 && threadIdx.x == 0) p.tokens[row] = static_cast<int32_t>(best.first);
    cluster.sync();  // no block leaves while a peer may read its shared memory
    return;
  }
  Stat at{};
  const long long lo = kept_threshold<kThreads>(x, count, n, m, p, ClusterSums{}, at);
  const float inv_t = 1.f / p.temperature, min_p = p.min_p;
  auto kept = [&](int i) {
    const float v = logit(x[i]), w = weight(v, m, inv_t);
    return order_key<T>(v) > lo && (min_p <= 0 || w >= min_p) ? w : 0.f;
  };
  // The draw: this part's kept mass, the parts before it as the carry, then the part's scan.
  const float target = sample_uniform(p.seed, static_cast<uint64_t>(row)) * at.mass;
  float part_mass = 0;
  {
    float local = 0;
    for (int i = threadIdx.x; i < count; i += kThreads) local += kept(i);
    using Reduce = cub::BlockReduce<float, kThreads>;
    __shared__ typename Reduce::TempStorage tmp;
    __shared__ float total;
    const float t = Reduce(tmp).Sum(local);
    if (threadIdx.x == 0) total = t;
    __syncthreads();
    part_mass = total;
  }
  const float carry = exchange({part_mass, 0, 0}, {0.f, 0, 0}, [&](Exchange a, Exchange b, int r) {
                        return r < rank ? Exchange{a.value + b.value, 0, 0} : a;
                      }).value;
  const PrefixHit h = first_in_prefix<kPer, kThreads>(
      count, kept, [&](float before, float w) { return w > 0 && carry + before + w > target; });
  const Exchange found =
      exchange({0.f, h.first == INT_MAX ? INT_MAX : begin + h.first, h.last < 0 ? -1 : begin + h.last},
               {0.f, INT_MAX, -1}, [](Exchange a, Exchange b, int) {
                 return Exchange{0.f, min(a.first, b.first), max(a.last, b.last)};
               });
  if (rank == 0 && threadIdx.x == 0)
    p.tokens[row] = static_cast<int32_t>(found.first != INT_MAX ? found.first : found.last);
  cluster.sync();
}
#else
template <class T>
__global__ void __launch_bounds__(kThreads, 1) cluster_kernel(SampleParams) {
  __trap();
}
#endif

}  // namespace

std::string cluster_supports(const SampleParams& p, const DeviceCaps& caps) {
  if (caps.cc_major < 9) return "needs sm_90 (thread-block clusters and distributed shared memory)";
  if (p.batch > INT32_MAX / kMostSplit) return "batch must be < 2^28 (a row's blocks go in gridDim.x)";
  return "";
}

// The largest power of two up to 8 with batch · split within one block an SM (the kernel's ~90
// registers a thread leave room for one block of 512), at least 2: a block's part is then at most
// vocab / 2 logits.
int cluster_split(const SampleParams& p, const DeviceCaps& caps) {
  int split = kMostSplit;
  while (split > 2 && p.batch * split > static_cast<int64_t>(caps.sm_count)) split /= 2;
  return split;
}

void cluster(const SampleParams& p, const LaunchContext& ctx) {
  const int split = cluster_split(p, *ctx.caps);
  with_storage(p.dtype, "sample cluster", [&](auto tag) {
    using T = decltype(tag);
    const ClusterLaunch launch(split, kThreads, static_cast<unsigned>(p.batch * split), ctx.stream);
    check_cuda(cudaLaunchKernelEx(&launch.cfg, cluster_kernel<T>, p), "sample/cluster");
  });
  check_launch("sample/cluster");
}

}  // namespace attnbench::sample_impl
