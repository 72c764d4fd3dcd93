#include "app/footprint.hpp"

#include <cuda.h>  // types only: the driver's functions are looked up through the runtime
#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace attnbench {
namespace {

// The driver functions the runtime does not wrap for a node's CUfunction (a library's
// kernels have no runtime stub), found at run time so that the binary does not link
// libcuda: without a driver it must still start and say so.
struct Driver {
  CUresult (*node_params)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS*) = nullptr;
  CUresult (*kernel_function)(CUfunction*, CUkernel) = nullptr;
  CUresult (*attribute)(int*, CUfunction_attribute, CUfunction) = nullptr;
  CUresult (*occupancy)(int*, CUfunction, int, size_t) = nullptr;
  CUresult (*name)(const char**, CUfunction) = nullptr;
  bool ok() const { return node_params && attribute && occupancy; }
};

template <class Fn>
void find(const char* symbol, Fn*& fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult status{};
  // The version this runtime was built for: cuFuncGetName, for one, appeared in 12.3.
  if (cudaGetDriverEntryPointByVersion(symbol, &p, CUDART_VERSION, cudaEnableDefault, &status) == cudaSuccess &&
      status == cudaDriverEntryPointSuccess)
    fn = reinterpret_cast<Fn*>(p);
  cudaGetLastError();
}

const Driver& driver() {
  static const Driver d = [] {
    Driver x;
    find("cuGraphKernelNodeGetParams", x.node_params);
    find("cuKernelGetFunction", x.kernel_function);
    find("cuFuncGetAttribute", x.attribute);
    find("cuOccupancyMaxActiveBlocksPerMultiprocessor", x.occupancy);
    find("cuFuncGetName", x.name);
    return x;
  }();
  return d;
}

std::string demangle(const char* name) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(name, nullptr, nullptr, &status), std::free);
  return status == 0 && out ? std::string(out.get()) : std::string(name);
}

KernelFootprint read_kernel(CUgraphNode node) {
  const Driver& d = driver();
  KernelFootprint k;
  CUDA_KERNEL_NODE_PARAMS p{};
  if (d.node_params(node, &p) != CUDA_SUCCESS) return k;
  k.blocks = int64_t{p.gridDimX} * p.gridDimY * p.gridDimZ;
  k.threads = static_cast<int>(p.blockDimX * p.blockDimY * p.blockDimZ);
  k.dynamic_smem = p.sharedMemBytes;
  CUfunction f = p.func;
  if (!f && p.kern && d.kernel_function) d.kernel_function(&f, p.kern);
  if (!f) return k;
  const char* name = nullptr;
  if (d.name && d.name(&name, f) == CUDA_SUCCESS && name) k.name = short_kernel_name(demangle(name));
  int v = 0;
  if (d.attribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f) == CUDA_SUCCESS) k.registers = v;
  if (d.attribute(&v, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f) == CUDA_SUCCESS) k.static_smem = v;
  if (d.attribute(&v, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, f) == CUDA_SUCCESS) k.local_bytes = v;
  if (d.occupancy(&v, f, k.threads, static_cast<size_t>(k.dynamic_smem)) == CUDA_SUCCESS) k.blocks_per_sm = v;
  return k;
}

}  // namespace

std::string short_kernel_name(const std::string& demangled) {
  // Cut at the first '<' or '(' after the leading return type: the name is the last word
  // before it ("void ns::kernel<...>(...)" -> "ns::kernel" -> "kernel"). An anonymous
  // namespace's parentheses are no parameter list: dropped first.
  std::string full = demangled;
  static const std::string kAnonymous = "(anonymous namespace)::";
  for (size_t p; (p = full.find(kAnonymous)) != std::string::npos;) full.erase(p, kAnonymous.size());
  const size_t cut = full.find_first_of("<(");
  std::string s = full.substr(0, cut);
  const size_t space = s.rfind(' ');
  if (space != std::string::npos) s = s.substr(space + 1);
  const size_t scope = s.rfind("::");
  if (scope != std::string::npos) s = s.substr(scope + 2);
  return s.empty() ? demangled : s;
}

Footprint capture_footprint(cudaStream_t stream, int sm_count, const std::function<void()>& launch) {
  Footprint f;
  f.sm_count = sm_count;
  if (!driver().ok()) {
    f.error = "the driver's graph and occupancy functions could not be found";
    return f;
  }
  if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    f.error = std::string("cudaStreamBeginCapture: ") + cudaGetErrorString(cudaGetLastError());
    return f;
  }
  cudaGraph_t graph = nullptr;
  try {
    launch();
  } catch (const std::exception& e) {
    f.error = std::string("its launch cannot be captured: ") + e.what();
  }
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  cudaGetLastError();  // an invalidated capture is not a sticky error: clear it
  if (f.error.empty() && (end != cudaSuccess || !graph))
    f.error = std::string("its launch cannot be captured: ") + cudaGetErrorString(end);
  if (graph && f.error.empty()) {
    size_t n = 0;
    cudaGraphGetNodes(graph, nullptr, &n);
    std::vector<cudaGraphNode_t> nodes(n);
    if (n) cudaGraphGetNodes(graph, nodes.data(), &n);
    for (cudaGraphNode_t node : nodes) {
      cudaGraphNodeType type{};
      if (cudaGraphNodeGetType(node, &type) == cudaSuccess && type == cudaGraphNodeTypeKernel)
        f.kernels.push_back(read_kernel(reinterpret_cast<CUgraphNode>(node)));
    }
  }
  if (graph) cudaGraphDestroy(graph);
  cudaGetLastError();
  return f;
}

}  // namespace attnbench
