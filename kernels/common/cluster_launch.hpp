// cudaLaunchKernelEx's configuration of a 1-D grid in 1-D thread-block clusters (sm_90): the
// one attribute and the config that points at it, filled once for every rung that launches
// clusters (gemm's wgmma_ws, gemm_q's splitk_gemv, sample's cluster) and for the occupancy
// queries that size them. The config points into the object, so it is neither copied nor moved.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

namespace attnbench {

struct ClusterLaunch {
  cudaLaunchAttribute attr[1] = {};
  cudaLaunchConfig_t cfg = {};

  ClusterLaunch(int cluster, unsigned threads, unsigned blocks, cudaStream_t stream = nullptr,
                std::size_t smem_bytes = 0) {
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = static_cast<unsigned>(cluster);
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3(blocks);
    cfg.blockDim = dim3(threads);
    cfg.dynamicSmemBytes = smem_bytes;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  ClusterLaunch(const ClusterLaunch&) = delete;
  ClusterLaunch& operator=(const ClusterLaunch&) = delete;
};

}  // namespace attnbench
