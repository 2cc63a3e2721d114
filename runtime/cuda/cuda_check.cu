/* The checks behind OBC_CUDA / OBC_CUBLAS / OBC_CUDA_ALLOC (cuda_check.h):
 * one-line messages with file, line, the call and the CUDA or cuBLAS reason,
 * and for out-of-memory what was being allocated and how much was free. */
#include "runtime/cuda/cuda_check.h"

extern "C" {
#include "common/obc_error.h"
}

static const char *base_name(const char *path) {
  const char *slash = path;
  for (const char *p = path; *p; p++)
    if (*p == '/') slash = p + 1;
  return slash;
}

extern "C" int cuda_check_call(cudaError_t status, const char *file, int line, const char *call) {
  if (status == cudaSuccess) return 0;
  int code = status == cudaErrorMemoryAllocation ? OBC_ENOMEM : OBC_EEXTERNAL;
  return obc_fail(code, "%s:%d: %s failed: %s (%s)", base_name(file), line, call,
                  cudaGetErrorString(status), cudaGetErrorName(status));
}

extern "C" int cuda_check_cublas(cublasStatus_t status, const char *file, int line,
                                 const char *call) {
  if (status == CUBLAS_STATUS_SUCCESS) return 0;
  int code = status == CUBLAS_STATUS_ALLOC_FAILED ? OBC_ENOMEM : OBC_EEXTERNAL;
  return obc_fail(code, "%s:%d: %s failed: %s (%s)", base_name(file), line, call,
                  cublasGetStatusString(status), cublasGetStatusName(status));
}

static int out_of_memory(size_t bytes, const char *what, const char *kind, const char *file,
                         int line) {
  size_t free_bytes = 0, total_bytes = 0;
  cudaGetLastError(); /* clear the sticky allocation error */
  cudaMemGetInfo(&free_bytes, &total_bytes);
  const double gib = 1024.0 * 1024.0 * 1024.0;
  return obc_fail(OBC_ENOMEM,
                  "%s:%d: out of %s memory allocating %s (%.2f GiB; %.2f GiB free of %.2f GiB; "
                  "hint: a shorter --context, fewer captured rows (--rows), or bf16 weights "
                  "(--device cuda-bf16))",
                  base_name(file), line, kind, what, (double)bytes / gib, (double)free_bytes / gib,
                  (double)total_bytes / gib);
}

extern "C" int cuda_alloc(void **ptr, size_t bytes, const char *what, const char *file, int line) {
  *ptr = NULL;
  cudaError_t status = cudaMalloc(ptr, bytes ? bytes : 1);
  if (status == cudaErrorMemoryAllocation) return out_of_memory(bytes, what, "GPU", file, line);
  return cuda_check_call(status, file, line, "cudaMalloc");
}

extern "C" int cuda_alloc_host(void **ptr, size_t bytes, const char *what, const char *file,
                               int line) {
  *ptr = NULL;
  cudaError_t status = cudaMallocHost(ptr, bytes ? bytes : 1);
  if (status == cudaErrorMemoryAllocation)
    return out_of_memory(bytes, what, "pinned host", file, line);
  return cuda_check_call(status, file, line, "cudaMallocHost");
}
