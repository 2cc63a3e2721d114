/* The CUDA backends of the runtime (runtime/runtime.h), built when CMake finds
 * nvcc (OBC_HAVE_CUDA): "cuda" keeps the weights in fp32 on the device (the
 * CPU's numerics, fp32 cuBLAS GEMMs), "cuda-bf16" uploads them in bf16 and
 * runs the GEMMs on bf16 inputs with fp32 accumulation. Activations, the KV
 * cache and attention stay fp32 in both. */
#ifndef OBC_BACKEND_CUDA_H
#define OBC_BACKEND_CUDA_H

#ifdef __cplusplus
extern "C" { /* runtime.h and model.h are C declarations */
#endif

#include "runtime/runtime.h"

extern const RuntimeBackend runtime_backend_cuda;      /* fp32 weights */
extern const RuntimeBackend runtime_backend_cuda_bf16; /* bf16 weights */

/* 0 when a CUDA device can be used, else the one-line "--device cuda: no
 * CUDA device found (...)" failure. */
int cuda_backend_probe(void);

#ifdef __cplusplus
}
#endif

#endif
