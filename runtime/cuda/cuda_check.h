/* Error checking for every CUDA runtime and cuBLAS call of the CUDA backend.
 * A failing call leaves an obc_fail message with the file, the line and the
 * call as written, and its return code becomes a negative OBC_E* code; out of
 * memory gets what was being allocated and a hint. Library code never exits. */
#ifndef OBC_CUDA_CHECK_H
#define OBC_CUDA_CHECK_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 0 for cudaSuccess, else obc_fail(...) naming file:line and the call. */
int cuda_check_call(cudaError_t status, const char *file, int line, const char *call);
int cuda_check_cublas(cublasStatus_t status, const char *file, int line, const char *call);
/* cudaMalloc of bytes for `what`; out of memory names it, the free memory and
 * a hint (shorter --context, fewer captured rows, bf16 weights). */
int cuda_alloc(void **ptr, size_t bytes, const char *what, const char *file, int line);
/* cudaMallocHost (pinned host memory), same reporting. */
int cuda_alloc_host(void **ptr, size_t bytes, const char *what, const char *file, int line);

#ifdef __cplusplus
}
#endif

/* rc = OBC_CUDA(cudaMemcpy(...)); also for kernel launches: OBC_CUDA_LAUNCH(). */
#define OBC_CUDA(call) cuda_check_call((call), __FILE__, __LINE__, #call)
#define OBC_CUBLAS(call) cuda_check_cublas((call), __FILE__, __LINE__, #call)
#define OBC_CUDA_LAUNCH(name) cuda_check_call(cudaGetLastError(), __FILE__, __LINE__, name)
#define OBC_CUDA_ALLOC(ptr, bytes, what) \
  cuda_alloc((void **)(ptr), (bytes), (what), __FILE__, __LINE__)
#define OBC_CUDA_ALLOC_HOST(ptr, bytes, what) \
  cuda_alloc_host((void **)(ptr), (bytes), (what), __FILE__, __LINE__)
/* Returns from the enclosing int function when the checked call fails. */
#define OBC_CUDA_TRY(expr)           \
  do {                               \
    int obc_rc_ = (expr);            \
    if (obc_rc_ < 0) return obc_rc_; \
  } while (0)

#endif
