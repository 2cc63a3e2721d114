/* Process start-up defaults that libraries read before main: OpenBLAS picks
 * its kernels and libgomp its wait policy while the program loads, so the only
 * way to give either a default is to set its variable and run the program
 * again. obc_startup_defaults() does both in one exec; the rest of this header
 * is the pure part of the BLAS choice, kept apart so a test can feed it any
 * processor. */
#ifndef OBC_STARTUP_H
#define OBC_STARTUP_H

#include <stddef.h>

/* What CPUID and XGETBV say of one x86-64 processor and its operating
 * system; every field 0 elsewhere. os_ymm: the OS saves the AVX registers
 * (XCR0 bits 1-2); os_zmm: it saves the AVX-512 state too (XCR0 bits 5-7). */
typedef struct {
  int sse3, avx, fma, avx2;
  int avx512f, avx512bw, avx512dq, avx512vl;
  int os_ymm, os_zmm;
} ObcCpuFeatures;

/* The widest vector tiers OpenBLAS's x86-64 kernel families are written for. */
typedef enum {
  OBC_BLAS_TIER_UNKNOWN = -1, /* a name this table does not list */
  OBC_BLAS_TIER_SSE = 0,      /* Prescott, Core2, Nehalem, Barcelona, ...: generic */
  OBC_BLAS_TIER_AVX = 1,      /* Sandybridge, Bulldozer, ... */
  OBC_BLAS_TIER_AVX2 = 2,     /* Haswell, Zen, Excavator */
  OBC_BLAS_TIER_AVX512 = 3,   /* SkylakeX, Cooperlake, SapphireRapids */
} ObcBlasTier;

/* The variable that marks OPENBLAS_CORETYPE as set by obcache, not by the
 * user; its value is the core OpenBLAS had detected. */
#define OBC_BLAS_CHOSEN_ENV "OBC_BLAS_CHOSEN"
/* For tests on processors OpenBLAS knows: the core to take as OpenBLAS's own
 * detection instead of asking it. */
#define OBC_BLAS_DETECTED_ENV "OBC_BLAS_DETECTED"

void obc_cpu_features(ObcCpuFeatures *features);
/* The tier of an OpenBLAS core name (case-insensitive, as OpenBLAS reads
 * OPENBLAS_CORETYPE). */
ObcBlasTier obc_blas_core_tier(const char *core);
/* The kernel family for a processor, by its features alone: "SkylakeX" with
 * AVX-512 F/BW/DQ/VL and the OS saving its state, "Haswell" with AVX2 and
 * FMA, "Sandybridge" with AVX, NULL below that. Every DYNAMIC_ARCH OpenBLAS
 * for x86-64 since 0.2.20 knows these three names. */
const char *obc_blas_core_for_cpu(const ObcCpuFeatures *features);
/* The core to force when OpenBLAS detected `detected` on this processor, or
 * NULL to keep OpenBLAS's own: only a generic (SSE-tier) core on a processor
 * with AVX or better is replaced. A non-generic choice of OpenBLAS is its
 * own knowledge of the processor and is kept. */
const char *obc_blas_core_choice(const char *detected, const ObcCpuFeatures *features);
/* One phrase on which BLAS kernels run and why, for `obcache version`:
 * "Haswell, detected by OpenBLAS", "SkylakeX, chosen by obcache: ...",
 * "Prescott, set by OPENBLAS_CORETYPE". */
void obc_blas_core_describe(char *out, size_t size);

/* Sets GOMP_SPINCOUNT=1000 unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set,
 * and OPENBLAS_CORETYPE as obc_blas_core_choice says unless it is set, then
 * runs /proc/self/exe with argv again; returns only when nothing needed
 * setting or the exec failed (a warning on stderr). A variable being set is
 * what stops a second exec. */
void obc_startup_defaults(char **argv);

#endif
