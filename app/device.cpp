#include "app/device.hpp"

#include <cublasLt.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "app/errors.hpp"
#include "app/stats.hpp"
#include "reference/parallel.hpp"
#include "kernels/harness/ceilings.hpp"
#include "kernels/harness/inputs.hpp"

namespace attnbench {

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes > 0) check_cuda(cudaMalloc(&ptr_, bytes), "cudaMalloc");
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
  o.ptr_ = nullptr;
  o.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  std::swap(ptr_, o.ptr_);
  std::swap(bytes_, o.bytes_);
  return *this;
}

namespace {

// Large copies go through a pinned buffer: the DMA then runs at full speed and the host
// side is copied on all cores, where a pageable cudaMemcpy stages through one thread at
// a few GB/s (verify all moves tens of gigabytes of inputs and outputs).
constexpr std::size_t kStageBytes = std::size_t{64} << 20;

uint8_t* staging() {
  struct Pinned {
    void* p = nullptr;
    ~Pinned() {
      if (p) cudaFreeHost(p);
    }
  };
  static Pinned buf;
  if (!buf.p) check_cuda(cudaMallocHost(&buf.p, kStageBytes), "cudaMallocHost (staging)");
  return static_cast<uint8_t*>(buf.p);
}

void parallel_memcpy(void* dst, const void* src, std::size_t n) {
  constexpr std::size_t kPart = std::size_t{4} << 20;
  const auto parts = static_cast<int64_t>((n + kPart - 1) / kPart);
  parallel_for(parts, static_cast<double>(n), [&](int64_t i) {
    const std::size_t at = static_cast<std::size_t>(i) * kPart;
    std::memcpy(static_cast<uint8_t*>(dst) + at, static_cast<const uint8_t*>(src) + at, std::min(kPart, n - at));
  });
}

}  // namespace

void DeviceBuffer::upload(const void* host, std::size_t bytes) {
  bytes = std::min(bytes, bytes_);
  if (bytes < kStageBytes / 4) {
    check_cuda(cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice), "upload");
  } else {
    for (std::size_t at = 0; at < bytes; at += kStageBytes) {
      const std::size_t n = std::min(kStageBytes, bytes - at);
      parallel_memcpy(staging(), static_cast<const uint8_t*>(host) + at, n);
      check_cuda(cudaMemcpy(static_cast<uint8_t*>(ptr_) + at, staging(), n, cudaMemcpyHostToDevice), "upload");
    }
  }
  // From pageable memory cudaMemcpy may return before its DMA lands, and it runs on the legacy
  // stream, which our non-blocking stream does not wait for: the next kernel could read the
  // old bytes. Wait for the copy here (uploads are never timed). Under load (`verify all` as
  // 16 processes, bench notes run 36) the first variant after new inputs read stale ones.
  check_cuda(cudaStreamSynchronize(cudaStreamLegacy), "upload");
}

void DeviceBuffer::download(void* host, std::size_t bytes) const {
  bytes = std::min(bytes, bytes_);
  if (bytes < kStageBytes / 4) {
    check_cuda(cudaMemcpy(host, ptr_, bytes, cudaMemcpyDeviceToHost), "download");
    return;
  }
  for (std::size_t at = 0; at < bytes; at += kStageBytes) {
    const std::size_t n = std::min(kStageBytes, bytes - at);
    check_cuda(cudaMemcpy(staging(), static_cast<const uint8_t*>(ptr_) + at, n, cudaMemcpyDeviceToHost), "download");
    parallel_memcpy(static_cast<uint8_t*>(host) + at, staging(), n);
  }
}

std::string cuda_version_string(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

int device_count_or_throw() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaErrorNoDevice || (e == cudaSuccess && n == 0))
    throw NoDevice("no CUDA device found: attnbench needs an NVIDIA GPU to run kernels");
  if (e == cudaErrorInsufficientDriver)
    throw NoDevice("no usable CUDA device: the NVIDIA driver is not installed, or is older than the CUDA " +
                   cuda_version_string(CUDART_VERSION) + " runtime attnbench was built with");
  if (e != cudaSuccess) throw NoDevice(std::string("no usable CUDA device: ") + cudaGetErrorString(e));
  return n;
}

Gpu::Gpu(int index) {
  const int n = device_count_or_throw();
  if (index < 0 || index >= n)
    throw NoDevice("no CUDA device " + std::to_string(index) + " (this machine has " + std::to_string(n) + ")");
  check_cuda(cudaSetDevice(index), "cudaSetDevice");
  cudaDeviceProp p{};
  check_cuda(cudaGetDeviceProperties(&p, index), "cudaGetDeviceProperties");
  info_.index = index;
  info_.name = p.name;
  info_.caps.sm_count = p.multiProcessorCount;
  info_.caps.cc_major = p.major;
  info_.caps.cc_minor = p.minor;
  info_.caps.smem_per_block_optin = p.sharedMemPerBlockOptin;
  info_.caps.l2_bytes = static_cast<std::size_t>(p.l2CacheSize);
  info_.total_memory = p.totalGlobalMem;
  info_.caps.total_memory = p.totalGlobalMem;
  info_.memory_bus_bits = p.memoryBusWidth;
  check_cuda(cudaDriverGetVersion(&info_.driver_version), "cudaDriverGetVersion");
  check_cuda(cudaRuntimeGetVersion(&info_.runtime_version), "cudaRuntimeGetVersion");
  char bus[32] = {};
  check_cuda(cudaDeviceGetPCIBusId(bus, sizeof bus, index), "cudaDeviceGetPCIBusId");
  info_.pci_bus_id = bus;
  clock_ = std::make_unique<SmClock>(info_.pci_bus_id);
  info_.nvml = clock_->active();
  int khz = 0;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, index) != cudaSuccess) cudaGetLastError();
  info_.sm_clock_max_mhz = clock_->active() ? clock_->max_mhz() : khz / 1000.0;
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  check_cublas(cublasCreate(&cublas_), "cublasCreate");
  check_cublas(cublasSetStream(cublas_, stream_), "cublasSetStream");
  // Twice the L2, so that nothing an earlier launch touched survives a flush.
  flush_ = DeviceBuffer(std::max<std::size_t>(2 * info_.caps.l2_bytes, 64u << 20));
  flush_sink_ = DeviceBuffer(sizeof(float));
  check_cuda(cudaMemsetAsync(flush_.get(), 0, flush_.bytes(), stream_), "L2 flush buffer");
}

Gpu::~Gpu() {
  if (cublas_) cublasDestroy(cublas_);
  if (stream_) cudaStreamDestroy(stream_);
}

std::size_t Gpu::free_memory() const {
  std::size_t free = 0, total = 0;
  check_cuda(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return free;
}

// A read pass, not a memset: a memset leaves the L2 full of dirty lines, and their write-back
// lands in the timed kernel. Reading twice the L2 writes back whatever is dirty (the flush
// buffer, the previous launch's outputs) before the start event.
void Gpu::flush_l2() {
  if (flush_writes_) {
    check_cuda(cudaMemsetAsync(flush_.get(), 0, flush_.bytes(), stream_), "L2 flush");
    return;
  }
  launch_l2_flush(flush_.get(), flush_.bytes(), static_cast<float*>(flush_sink_.get()), info_.caps, stream_);
}

void Gpu::reset_persisting_l2() {
  cudaStreamAttrValue window{};
  window.accessPolicyWindow.num_bytes = 0;
  window.accessPolicyWindow.hitProp = cudaAccessPropertyNormal;
  window.accessPolicyWindow.missProp = cudaAccessPropertyNormal;
  check_cuda(cudaStreamSetAttribute(stream_, cudaStreamAttributeAccessPolicyWindow, &window),
             "clearing the stream's access-policy window");
  // Cards without persisting L2 (before sm_80) say so; that is the state wanted.
  for (const cudaError_t e : {cudaCtxResetPersistingL2Cache(), cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0)})
    if (e != cudaSuccess && e != cudaErrorUnsupportedLimit && e != cudaErrorNotSupported)
      check_cuda(e, "resetting the persisting L2 cache");
  cudaGetLastError();
}

void Gpu::synchronize() const { check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

namespace {

// Median time in ms of `reps` runs of `fn`, after two warm-up runs.
template <class Fn>
double median_ms(cudaStream_t stream, int reps, Fn fn) {
  cudaEvent_t a, b;
  check_cuda(cudaEventCreate(&a), "cudaEventCreate");
  check_cuda(cudaEventCreate(&b), "cudaEventCreate");
  fn();
  fn();
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    check_cuda(cudaEventRecord(a, stream), "cudaEventRecord");
    fn();
    check_cuda(cudaEventRecord(b, stream), "cudaEventRecord");
    check_cuda(cudaEventSynchronize(b), "cudaEventSynchronize");
    float t = 0;
    check_cuda(cudaEventElapsedTime(&t, a, b), "cudaEventElapsedTime");
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return summarize(ms).median;
}

// tf32: fp32 data multiplied on the TF32 tensor cores, the rate an fp32 kernel that allows them can reach.
double gemm_tflops(cublasHandle_t h, cudaStream_t stream, DType t, bool tf32 = false) {
  const int n = 8192;
  const cudaDataType_t type = t == DType::fp32 ? CUDA_R_32F : t == DType::fp16 ? CUDA_R_16F : CUDA_R_16BF;
  const std::size_t bytes = static_cast<std::size_t>(n) * n * dtype_bytes(t);
  DeviceBuffer a(bytes), b(bytes), c(bytes);
  launch_fill_random(a.get(), int64_t{n} * n, t, 1, 0, 1.f, false, stream);  // GEMM rates on random data, never zeros
  launch_fill_random(b.get(), int64_t{n} * n, t, 2, 0, 1.f, false, stream);
  // True fp32 for the fp32 ceiling: TF32 is another one.
  check_cublas(cublasSetMathMode(h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
  const cublasComputeType_t compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const float one = 1.f, zero = 0.f;
  const double ms = median_ms(stream, t == DType::fp32 ? 5 : 20, [&] {
    check_cublas(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, b.get(), type, n, a.get(), type, n, &zero,
                              c.get(), type, n, compute, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  });
  check_cublas(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  return 2.0 * n * n * static_cast<double>(n) / (ms * 1e9);
}

// fp8 e4m3 through cuBLASLt (cublasGemmEx has no fp8): D = A^T B in bf16, fp32 accumulate, the
// layout Hopper's fp8 tensor cores take (A transposed, B not). 0 where cuBLASLt has no algorithm
// for it (before sm_89): the fp8 floor is then derived from bf16's (app/row.cpp).
double fp8_gemm_tflops(cudaStream_t stream) {
  const int n = 8192;
  const std::size_t bytes = static_cast<std::size_t>(n) * n;
  DeviceBuffer a(bytes), b(bytes), d(2 * bytes), workspace(std::size_t{32} << 20);
  launch_fill_random(a.get(), int64_t{n} * n, DType::fp8_e4m3, 1, 0, 1.f, false, stream);
  launch_fill_random(b.get(), int64_t{n} * n, DType::fp8_e4m3, 2, 0, 1.f, false, stream);
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  double tflops = 0;
  const auto ok = [](cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS; };
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  const std::size_t ws = workspace.bytes();
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  if (ok(cublasLtCreate(&lt)) && ok(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F)) &&
      ok(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta)) &&
      ok(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb)) &&
      ok(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, n, n, n)) &&
      ok(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, n, n, n)) &&
      ok(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, n, n, n)) && ok(cublasLtMatmulPreferenceCreate(&pref)) &&
      ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws)) &&
      ok(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 1, &heuristic, &found)) && found > 0) {
    const float one = 1.f, zero = 0.f;
    const auto matmul = [&] {
      return cublasLtMatmul(lt, op, &one, a.get(), la, b.get(), lb, &zero, d.get(), ld, d.get(), ld, &heuristic.algo,
                            workspace.get(), ws, stream);
    };
    // One try first: a cuBLASLt that refuses the call leaves the fp8 ceiling unmeasured (the
    // floor falls back to twice bf16's) rather than failing every run that measures ceilings.
    if (ok(matmul()) && cudaStreamSynchronize(stream) == cudaSuccess) {
      const double ms = median_ms(stream, 20, [&] { check_cublas(matmul(), "cublasLtMatmul (fp8 e4m3)"); });
      tflops = 2.0 * n * n * static_cast<double>(n) / (ms * 1e9);
    }
  }
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (ld) cublasLtMatrixLayoutDestroy(ld);
  if (lb) cublasLtMatrixLayoutDestroy(lb);
  if (la) cublasLtMatrixLayoutDestroy(la);
  if (op) cublasLtMatmulDescDestroy(op);
  if (lt) cublasLtDestroy(lt);
  return tflops;
}

std::filesystem::path cache_file() { return cache_dir() / "ceilings.json"; }

}  // namespace

std::filesystem::path cache_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  std::filesystem::path dir = xdg && *xdg ? std::filesystem::path(xdg) : home && *home ? std::filesystem::path(home) / ".cache" : std::filesystem::temp_directory_path();
  return dir / "attnbench";
}

std::optional<Datasheet> datasheet_for(const std::string& name) {
  auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  // Most specific names first: "H100 NVL" and "H100 PCIe" before the SXM "H100".
  if (has("H200 NVL")) return Datasheet{"H200 NVL", 4800, 60, 417.5, 835.5, 835.5};
  if (has("H200")) return Datasheet{"H200 SXM", 4800, 67, 494.7, 989.4, 989.4};
  if (has("H100 NVL")) return Datasheet{"H100 NVL", 3900, 60, 417.5, 835.5, 835.5};
  if (has("H100 PCIe")) return Datasheet{"H100 PCIe", 2000, 51, 378, 756, 756};
  if (has("H100")) return Datasheet{"H100 SXM5", 3350, 67, 494.7, 989.4, 989.4};
  if (has("A100") && has("80GB") && has("PCIe")) return Datasheet{"A100 80GB PCIe", 1935, 19.5, 156, 312, 312};
  if (has("A100") && has("80GB")) return Datasheet{"A100 80GB SXM4", 2039, 19.5, 156, 312, 312};
  if (has("A100")) return Datasheet{"A100 40GB", 1555, 19.5, 156, 312, 312};
  return std::nullopt;
}

Ceilings Gpu::measure_ceilings() {
  Ceilings c;
  const std::size_t bytes = std::size_t{1} << 30;
  DeviceBuffer src(bytes), dst(bytes), sink(2 * sizeof(float));
  launch_fill_random(src.get(), static_cast<int64_t>(bytes / 4), DType::fp32, 3, 0, 1.f, false, stream_);
  const double copy_ms = median_ms(stream_, 20, [&] {
    check_cuda(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, stream_), "copy");
  });
  c.copy_gbps = 2.0 * bytes / (copy_ms * 1e6);
  const double read_ms = median_ms(stream_, 20, [&] {
    launch_read_stream(src.get(), bytes, static_cast<float*>(sink.get()), info_.caps, stream_);
  });
  c.read_gbps = bytes / (read_ms * 1e6);
  const double write_ms = median_ms(stream_, 20, [&] { launch_write_stream(dst.get(), bytes, info_.caps, stream_); });
  c.write_gbps = bytes / (write_ms * 1e6);
  c.fp32_tflops = gemm_tflops(cublas_, stream_, DType::fp32);
  c.fp16_tflops = gemm_tflops(cublas_, stream_, DType::fp16);
  c.bf16_tflops = gemm_tflops(cublas_, stream_, DType::bf16);
  c.tf32_tflops = gemm_tflops(cublas_, stream_, DType::fp32, true);
  if (info_.caps.arch() >= 89) c.fp8_tflops = fp8_gemm_tflops(stream_);
  if (info_.caps.arch() >= 80) {
    double flops = 0;
    const double ms = median_ms(stream_, 10, [&] {
      flops = launch_mma_sync_peak(static_cast<float*>(sink.get()), info_.caps, stream_);
    });
    c.mma_sync_bf16_tflops = flops / (ms * 1e9);
  }
  if (info_.caps.arch() == 90) {
    // sink[1] turns 1 only where the binary holds the sm_90a body (wgmma is not in plain sm_90).
    check_cuda(cudaMemsetAsync(sink.get(), 0, 2 * sizeof(float), stream_), "wgmma peak: clear");
    double flops = 0;
    const double ms = median_ms(stream_, 10, [&] {
      flops = launch_wgmma_peak(static_cast<float*>(sink.get()), info_.caps, stream_);
    });
    float ran[2] = {0, 0};
    sink.download(ran, sizeof(ran));
    if (ran[1] == 1.f) c.wgmma_bf16_tflops = flops / (ms * 1e9);
  }
  c.source = "measured";
  return c;
}

const Ceilings& Gpu::ceilings(bool remeasure) {
  if (have_ceilings_ && !remeasure) return ceilings_;
  // "ceilings 4": entries written before fp8 (3: tf32, mma.sync and wgmma) was measured are measured again.
  const std::string key = info_.name + " | driver " + cuda_version_string(info_.driver_version) + " | attnbench " +
                          ATTNBENCH_VERSION + " | ceilings 4";
  const auto path = cache_file();
  nlohmann::json cache = nlohmann::json::object();
  {
    std::ifstream in(path);
    if (in) cache = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!cache.is_object()) cache = nlohmann::json::object();
  }
  if (!remeasure && cache.contains(key)) {
    const auto& j = cache[key];
    ceilings_ = {j.value("copy_gbps", 0.0),   j.value("read_gbps", 0.0),   j.value("write_gbps", 0.0),
                 j.value("fp32_tflops", 0.0), j.value("fp16_tflops", 0.0), j.value("bf16_tflops", 0.0),
                 j.value("tf32_tflops", 0.0), j.value("mma_sync_bf16_tflops", 0.0), j.value("wgmma_bf16_tflops", 0.0),
                 j.value("fp8_tflops", 0.0), path.string()};
  } else {
    ceilings_ = measure_ceilings();
    cache[key] = {{"copy_gbps", ceilings_.copy_gbps},     {"read_gbps", ceilings_.read_gbps},
                  {"write_gbps", ceilings_.write_gbps},   {"fp32_tflops", ceilings_.fp32_tflops},
                  {"fp16_tflops", ceilings_.fp16_tflops}, {"bf16_tflops", ceilings_.bf16_tflops},
                  {"tf32_tflops", ceilings_.tf32_tflops}, {"mma_sync_bf16_tflops", ceilings_.mma_sync_bf16_tflops},
                  {"wgmma_bf16_tflops", ceilings_.wgmma_bf16_tflops}, {"fp8_tflops", ceilings_.fp8_tflops}};
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    // Written whole under a name of this process's, then renamed: --devices workers measuring
    // their cards at once each leave a whole file. A read-only home only costs a re-measure.
    const std::string partial = path.string() + ".partial." + std::to_string(getpid());
    std::ofstream out(partial);
    if (out) out << cache.dump(1) << "\n";
    out.close();
    std::filesystem::rename(partial, path, ec);
    if (ec) std::filesystem::remove(partial, ec);
  }
  have_ceilings_ = true;
  return ceilings_;
}

}  // namespace attnbench
