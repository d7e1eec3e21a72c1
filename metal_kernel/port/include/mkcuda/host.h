// The CUDA runtime's host API for a whole CUDA program run on the CPU
// (port/program.py): device memory is host memory, copies are memcpy, and
// a launch `k<<<grid, block, smem>>>(args)` (rewritten by port/emit.py to
// host_launch) runs the kernel through the runtime's scheduler (fibers),
// with the same headers and semantics as load_cuda. cuBLAS's GEMMs (Sgemm,
// GemmEx and their strided-batched forms, fp32/fp16/bf16) are a plain loop;
// cuBLASLt is not there.
#pragma once
#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "mk/abi.h"
#ifdef MKCUDA_CAPTURE
#include "mkcuda/capture.h"
#define MKCUDA_NOTE_KERNEL() ::mk::cuda::capture::note(__PRETTY_FUNCTION__)
#else
#define MKCUDA_NOTE_KERNEL() ((void)0)
#endif

extern "C" {
int mkrt_dispatch(mk::EntryFn entry, const mk::Launch* launch, void* error, uint32_t flags, uint64_t timeout_ms);
const mk::RuntimeApi* mkrt_api();
}

namespace mk {
namespace cuda {

inline const RuntimeApi* runtime_api() { return mkrt_api(); }

struct HostError {  // mirrors ErrorInfo in src/mkrt.cpp
  int32_t kind, signal;
  uint64_t address;
  uint32_t thread[3], group[3];
  char message[512];
};

template <class Call>
void host_entry(Run* r) {
  run_threads(r, [](Run* r, const ThreadIds&) { (*static_cast<const Call*>(r->launch->buffers[0]))(); });
}

template <class Kernel, class... A>
void host_launch(const char* name, dim3 grid, dim3 block, size_t smem, Kernel kernel, A... args) {
#ifdef MKCUDA_CAPTURE
  FILE* record;
  if (!capture::begin(name, grid.x, grid.y, grid.z, block.x, block.y, block.z, smem, &record, args...)) return;
#else
  (void)name;
#endif
  auto call = [&]() { kernel(args...); };
  void* buffers[1] = {static_cast<void*>(&call)};
  uint64_t sizes[1] = {0};
  uint32_t tg[1] = {uint32_t(smem)};
  Launch l{buffers, sizes, 1, {grid.x * block.x, grid.y * block.y, grid.z * block.z}, {block.x, block.y, block.z},
           {grid.x, grid.y, grid.z}, 1, tg};
  HostError err;
  if (mkrt_dispatch(&host_entry<decltype(call)>, &l, &err, MK_DISPATCH_CUDA, 0) != 0) {
    fprintf(stderr, "[metal-kernel] kernel failed: %s in thread (%u, %u, %u) of block (%u, %u, %u)\n", err.message,
            err.thread[0] - err.group[0] * block.x, err.thread[1] - err.group[1] * block.y,
            err.thread[2] - err.group[2] * block.z, err.group[0], err.group[1], err.group[2]);
    exit(70);
  }
#ifdef MKCUDA_CAPTURE
  capture::end(record);
#endif
}

}  // namespace cuda
}  // namespace mk

extern "C" inline void __mk_cuda_assert_fail_host(const char* expr, const char* file, unsigned int line) {
  fprintf(stderr, "%s:%u: Assertion `%s` failed.\n", file, line, expr);
  abort();
}

// --------------------------------------------------------------- memory --
enum cudaMemcpyKind { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                      cudaMemcpyDeviceToDevice, cudaMemcpyDefault };
inline cudaError_t cudaMalloc(void** p, size_t n) {
  *p = aligned_alloc(256, (n + 255) & ~size_t(255));
#ifdef MKCUDA_CAPTURE
  ::mk::cuda::capture::on_malloc(*p, n);
#endif
  return *p || !n ? cudaSuccess : cudaErrorMemoryAllocation;
}
template <class T> inline cudaError_t cudaMalloc(T** p, size_t n) { return cudaMalloc((void**)p, n); }
inline cudaError_t cudaMallocHost(void** p, size_t n) { return cudaMalloc(p, n); }
template <class T> inline cudaError_t cudaMallocHost(T** p, size_t n) { return cudaMalloc((void**)p, n); }
inline cudaError_t cudaFree(void* p) {
#ifdef MKCUDA_CAPTURE
  ::mk::cuda::capture::on_free(p);
#endif
  free(p);
  return cudaSuccess;
}
inline cudaError_t cudaFreeHost(void* p) { free(p); return cudaSuccess; }
inline cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) { memmove(d, s, n); return cudaSuccess; }
inline cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind k, cudaStream_t = nullptr) {
  return cudaMemcpy(d, s, n, k);
}
inline cudaError_t cudaMemcpy2D(void* d, size_t dpitch, const void* s, size_t spitch, size_t width, size_t height,
                                cudaMemcpyKind) {
  for (size_t r = 0; r < height; ++r)
    memmove(static_cast<char*>(d) + r * dpitch, static_cast<const char*>(s) + r * spitch, width);
  return cudaSuccess;
}
inline cudaError_t cudaMemset(void* p, int v, size_t n) { memset(p, v, n); return cudaSuccess; }
inline cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t = nullptr) { return cudaMemset(p, v, n); }
template <class T>
inline cudaError_t cudaMemcpyToSymbol(T& symbol, const void* s, size_t n, size_t offset = 0,
                                      cudaMemcpyKind = cudaMemcpyHostToDevice) {
  memcpy(reinterpret_cast<char*>(&symbol) + offset, s, n);
  return cudaSuccess;
}
template <class T>
inline cudaError_t cudaMemcpyFromSymbol(void* d, const T& symbol, size_t n, size_t offset = 0,
                                        cudaMemcpyKind = cudaMemcpyDeviceToHost) {
  memcpy(d, reinterpret_cast<const char*>(&symbol) + offset, n);
  return cudaSuccess;
}

// ------------------------------------------------------ device, streams --
struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem, sharedMemPerBlock, sharedMemPerMultiprocessor, sharedMemPerBlockOptin;
  int regsPerBlock, warpSize, maxThreadsPerBlock, maxThreadsDim[3], maxGridSize[3], major, minor,
      multiProcessorCount, maxThreadsPerMultiProcessor, l2CacheSize, clockRate, memoryClockRate, memoryBusWidth;
};
// The number of SMs the device reports: an H200's 132 unless MK_CUDA_SM_COUNT
// says otherwise (a program that sizes its grid from the SM count and then
// asserts the grid is small, as llm.c's global_norm.cu does, runs on a
// smaller device's figure; capture.py records which launches needed it).
inline int mk_cuda_sm_count() {
  const char* e = getenv("MK_CUDA_SM_COUNT");
  int n = e ? atoi(e) : 0;
  return n > 0 ? n : 132;
}
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
  memset(p, 0, sizeof *p);
  strcpy(p->name, "metal-kernel CPU (CUDA semantics of an H200)");
  p->totalGlobalMem = size_t(1) << 36;
  p->sharedMemPerBlock = 49152;
  p->sharedMemPerMultiprocessor = p->sharedMemPerBlockOptin = MK_MAX_CUDA_SHARED_MEMORY;
  p->regsPerBlock = 65536;
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
  p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 2147483647;
  p->maxGridSize[1] = p->maxGridSize[2] = 65535;
  p->major = 9;
  p->minor = 0;
  p->multiProcessorCount = mk_cuda_sm_count();
  p->maxThreadsPerMultiProcessor = 2048;
  p->l2CacheSize = 50 << 20;
  return cudaSuccess;
}
enum cudaDeviceAttr { cudaDevAttrMaxSharedMemoryPerBlock = 8, cudaDevAttrMultiProcessorCount = 16,
                      cudaDevAttrMaxThreadsPerMultiProcessor = 39, cudaDevAttrMaxSharedMemoryPerBlockOptin = 97 };
inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int) {
  *v = a == cudaDevAttrMultiProcessorCount ? mk_cuda_sm_count()
       : a == cudaDevAttrMaxThreadsPerMultiProcessor ? 2048
       : a == cudaDevAttrMaxSharedMemoryPerBlock ? 49152
                                                 : MK_MAX_CUDA_SHARED_MEMORY;
  return cudaSuccess;
}
inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
inline cudaError_t cudaGetDevice(int* d) { *d = 0; return cudaSuccess; }
inline cudaError_t cudaGetDeviceCount(int* n) { *n = 1; return cudaSuccess; }
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
inline cudaError_t cudaDeviceReset() { return cudaSuccess; }
inline cudaError_t cudaStreamCreate(cudaStream_t* s) { *s = nullptr; return cudaSuccess; }
inline cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8, cudaFuncAttributePreferredSharedMemoryCarveout = 9 };
template <class F> inline cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int) { return cudaSuccess; }
struct CUevent_st {
  double seconds;
};
inline double mk_now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
inline cudaError_t cudaEventCreate(cudaEvent_t* e) {
  *e = static_cast<cudaEvent_t>(calloc(1, sizeof(CUevent_st)));
  return cudaSuccess;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t e) { free(e); return cudaSuccess; }
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t = nullptr) { e->seconds = mk_now(); return cudaSuccess; }
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  *ms = float((b->seconds - a->seconds) * 1e3);
  return cudaSuccess;
}

// ---------------------------------------------------------------- cuBLAS --
enum cublasStatus_t { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_SUPPORTED = 15 };
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 };
enum cublasMath_t { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TENSOR_OP_MATH = 1, CUBLAS_TF32_TENSOR_OP_MATH = 3 };
enum cublasComputeType_t { CUBLAS_COMPUTE_16F = 64, CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77 };
enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 };
typedef struct cublasContext* cublasHandle_t;
typedef struct cublasLtContext* cublasLtHandle_t;
inline cublasStatus_t cublasCreate(cublasHandle_t* h) { *h = nullptr; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasDestroy(cublasHandle_t) { return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) { *h = nullptr; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasLtDestroy(cublasLtHandle_t) { return CUBLAS_STATUS_SUCCESS; }
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1, CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99 };

namespace mk {
namespace cuda {
inline float gemm_load(const void* p, long long i, cudaDataType_t t) {
  if (t == CUDA_R_16F) return float(static_cast<const __half*>(p)[i]);
  if (t == CUDA_R_16BF) return float(static_cast<const __nv_bfloat16*>(p)[i]);
  return static_cast<const float*>(p)[i];
}
inline void gemm_store(void* p, long long i, cudaDataType_t t, float v) {
  if (t == CUDA_R_16F) static_cast<__half*>(p)[i] = __half(v);
  else if (t == CUDA_R_16BF) static_cast<__nv_bfloat16*>(p)[i] = __nv_bfloat16(v);
  else static_cast<float*>(p)[i] = v;
}
// C = alpha op(A) op(B) + beta C, column-major, batched by strides,
// accumulated in double.
inline cublasStatus_t gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                           const void* A, cudaDataType_t at, int lda, long long sa, const void* B,
                           cudaDataType_t bt, int ldb, long long sb, float beta, void* C, cudaDataType_t ct,
                           int ldc, long long sc, int batches) {
  for (int p = 0; p < batches; ++p)
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        double acc = 0;
        for (int l = 0; l < k; ++l) {
          const long long ia = p * sa + (ta == CUBLAS_OP_N ? i + l * (long long)lda : l + i * (long long)lda);
          const long long ib = p * sb + (tb == CUBLAS_OP_N ? l + j * (long long)ldb : j + l * (long long)ldb);
          acc += double(gemm_load(A, ia, at)) * gemm_load(B, ib, bt);
        }
        const long long ic = p * sc + i + j * (long long)ldc;
        const double old = beta == 0.0f ? 0.0 : double(beta) * gemm_load(C, ic, ct);
        gemm_store(C, ic, ct, float(double(alpha) * acc + old));
      }
  return CUBLAS_STATUS_SUCCESS;
}
}  // namespace cuda
}  // namespace mk

inline cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m,
                                                int n, int k, const float* alpha, const float* A, int lda,
                                                long long sa, const float* B, int ldb, long long sb, const float* beta,
                                                float* C, int ldc, long long sc, int batches) {
  return ::mk::cuda::gemm(ta, tb, m, n, k, *alpha, A, CUDA_R_32F, lda, sa, B, CUDA_R_32F, ldb, sb, *beta, C,
                          CUDA_R_32F, ldc, sc, batches);
}
inline cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                  const float* alpha, const float* A, int lda, const float* B, int ldb,
                                  const float* beta, float* C, int ldc) {
  return cublasSgemmStridedBatched(h, ta, tb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}
inline cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m,
                                                 int n, int k, const void* alpha, const void* A, cudaDataType_t at,
                                                 int lda, long long sa, const void* B, cudaDataType_t bt, int ldb,
                                                 long long sb, const void* beta, void* C, cudaDataType_t ct, int ldc,
                                                 long long sc, int batches, cublasComputeType_t, cublasGemmAlgo_t) {
  return ::mk::cuda::gemm(ta, tb, m, n, k, *static_cast<const float*>(alpha), A, at, lda, sa, B, bt, ldb, sb,
                          *static_cast<const float*>(beta), C, ct, ldc, sc, batches);
}
inline cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                   const void* alpha, const void* A, cudaDataType_t at, int lda, const void* B,
                                   cudaDataType_t bt, int ldb, const void* beta, void* C, cudaDataType_t ct, int ldc,
                                   cublasComputeType_t compute, cublasGemmAlgo_t algo) {
  return cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, A, at, lda, 0, B, bt, ldb, 0, beta, C, ct, ldc, 0, 1,
                                    compute, algo);
}

// ------------------------------------------------------------- cuBLASLt --
// Declared so that programs using it build; its matmul reports
// CUBLAS_STATUS_NOT_SUPPORTED (the program's own error check then stops it).
typedef struct cublasLtMatmulDescOpaque* cublasLtMatmulDesc_t;
typedef struct cublasLtMatrixLayoutOpaque* cublasLtMatrixLayout_t;
typedef struct cublasLtMatmulPreferenceOpaque* cublasLtMatmulPreference_t;
struct cublasLtMatmulAlgo_t {
  uint64_t data[8];
};
struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};
enum cublasLtEpilogue_t { CUBLASLT_EPILOGUE_DEFAULT = 1, CUBLASLT_EPILOGUE_RELU = 2, CUBLASLT_EPILOGUE_BIAS = 4,
                          CUBLASLT_EPILOGUE_GELU = 32, CUBLASLT_EPILOGUE_GELU_BIAS = 36 };
enum cublasLtMatmulDescAttributes_t { CUBLASLT_MATMUL_DESC_TRANSA = 3, CUBLASLT_MATMUL_DESC_TRANSB = 4,
                                      CUBLASLT_MATMUL_DESC_EPILOGUE = 7, CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8 };
enum cublasLtMatmulPreferenceAttributes_t { CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1 };
#define MKCUDA_LT_ACCEPT(NAME) \
  template <class... A>        \
  inline cublasStatus_t NAME(A...) { return CUBLAS_STATUS_SUCCESS; }
MKCUDA_LT_ACCEPT(cublasLtMatmulDescCreate)
MKCUDA_LT_ACCEPT(cublasLtMatmulDescDestroy)
MKCUDA_LT_ACCEPT(cublasLtMatmulDescSetAttribute)
MKCUDA_LT_ACCEPT(cublasLtMatrixLayoutCreate)
MKCUDA_LT_ACCEPT(cublasLtMatrixLayoutDestroy)
MKCUDA_LT_ACCEPT(cublasLtMatmulPreferenceCreate)
MKCUDA_LT_ACCEPT(cublasLtMatmulPreferenceDestroy)
MKCUDA_LT_ACCEPT(cublasLtMatmulPreferenceSetAttribute)
#undef MKCUDA_LT_ACCEPT
template <class... A>
inline cublasStatus_t cublasLtMatmulAlgoGetHeuristic(A...) { return CUBLAS_STATUS_NOT_SUPPORTED; }
template <class... A>
inline cublasStatus_t cublasLtMatmul(A...) { return CUBLAS_STATUS_NOT_SUPPORTED; }
