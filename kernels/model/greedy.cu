// The greedy step: each sequence's argmax over the vocabulary, written where the next decode
// step reads its input token, and the positions advanced on the device, so that the steps of a
// generation need nothing from the host.
#include <cfloat>
#include <climits>

#include "kernels/common/reduce.cuh"
#include "kernels/model/model.hpp"
#include "kernels/model/model.cuh"

namespace attnbench {
namespace {

constexpr int kThreads = 1024;

// The better of two candidates: the larger logit, the lower id on a tie. NaN never wins (a
// NaN logit fails the check of the logits themselves).
__device__ __forceinline__ void keep_best(float& v, int& id, float v2, int id2) {
  if (v2 > v || (v2 == v && id2 < id)) {
    v = v2;
    id = id2;
  }
}

// One block a sequence.
__global__ void __launch_bounds__(kThreads) greedy_kernel(GreedyStep p) {
  __shared__ float best_v[kThreads / 32];
  __shared__ int best_id[kThreads / 32];
  const int64_t b = blockIdx.x;
  const int64_t step = step_of(p.seq, b), vocab = p.seq.vocab;
  if (step < 0) return;
  const float* row = p.logits + b * vocab;
  float* out = p.out + (step * p.seq.batch + b) * vocab;
  float v = -FLT_MAX;
  int id = INT_MAX;
  for (int64_t c = threadIdx.x; c < vocab; c += kThreads) {
    const float x = row[c];
    out[c] = x;
    keep_best(v, id, x, static_cast<int>(c));
  }
  allreduce_pair<32>(v, id, [](float& v, int& id, float v2, int id2) { keep_best(v, id, v2, id2); });
  if (threadIdx.x % 32 == 0) {
    best_v[threadIdx.x / 32] = v;
    best_id[threadIdx.x / 32] = id;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int w = 1; w < kThreads / 32; ++w) keep_best(v, id, best_v[w], best_id[w]);
  // An all-NaN row keeps id INT_MAX: token 0 keeps the next step's reads in bounds.
  advance(p.seq, b, id < vocab ? id : 0);
}

}  // namespace

void greedy_step(const GreedyStep& p, cudaStream_t stream) {
  greedy_kernel<<<static_cast<unsigned>(p.seq.batch), kThreads, 0, stream>>>(p);
  check_launch("model/greedy_step");
}

}  // namespace attnbench
