/* Start-up defaults (obc_startup.h): the OpenMP wait policy and the OpenBLAS
 * kernel family, both set through the environment and one exec. */
#include "common/obc_startup.h"

#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

/* ---- the processor ---- */

void obc_cpu_features(ObcCpuFeatures *f) {
  memset(f, 0, sizeof *f);
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return;
  f->sse3 = (c >> 0) & 1;
  f->fma = (c >> 12) & 1;
  f->avx = (c >> 28) & 1;
  if ((c >> 27) & 1) { /* OSXSAVE: XGETBV may be executed */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    f->os_ymm = (lo & 0x6) == 0x6;
    f->os_zmm = f->os_ymm && (lo & 0xe0) == 0xe0;
  }
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f->avx2 = (b >> 5) & 1;
    f->avx512f = (b >> 16) & 1;
    f->avx512dq = (b >> 17) & 1;
    f->avx512bw = (b >> 30) & 1;
    f->avx512vl = (b >> 31) & 1;
  }
#endif
}

/* ---- the kernel family ---- */

/* Every core name an x86-64 DYNAMIC_ARCH OpenBLAS reports, by tier. */
static const struct {
  const char *name;
  ObcBlasTier tier;
} blas_cores[] = {
    {"Katmai", OBC_BLAS_TIER_SSE},
    {"Coppermine", OBC_BLAS_TIER_SSE},
    {"Northwood", OBC_BLAS_TIER_SSE},
    {"Prescott", OBC_BLAS_TIER_SSE},
    {"Banias", OBC_BLAS_TIER_SSE},
    {"Atom", OBC_BLAS_TIER_SSE},
    {"Core2", OBC_BLAS_TIER_SSE},
    {"Penryn", OBC_BLAS_TIER_SSE},
    {"Dunnington", OBC_BLAS_TIER_SSE},
    {"Nehalem", OBC_BLAS_TIER_SSE},
    {"Opteron", OBC_BLAS_TIER_SSE},
    {"Opteron(SSE3)", OBC_BLAS_TIER_SSE},
    {"Barcelona", OBC_BLAS_TIER_SSE},
    {"Nano", OBC_BLAS_TIER_SSE},
    {"Bobcat", OBC_BLAS_TIER_SSE},
    {"Sandybridge", OBC_BLAS_TIER_AVX},
    {"Bulldozer", OBC_BLAS_TIER_AVX},
    {"Piledriver", OBC_BLAS_TIER_AVX},
    {"Steamroller", OBC_BLAS_TIER_AVX},
    {"Excavator", OBC_BLAS_TIER_AVX2},
    {"Haswell", OBC_BLAS_TIER_AVX2},
    {"Zen", OBC_BLAS_TIER_AVX2},
    {"SkylakeX", OBC_BLAS_TIER_AVX512},
    {"Cooperlake", OBC_BLAS_TIER_AVX512},
    {"SapphireRapids", OBC_BLAS_TIER_AVX512},
};

ObcBlasTier obc_blas_core_tier(const char *core) {
  for (size_t i = 0; core && i < sizeof blas_cores / sizeof blas_cores[0]; i++)
    if (!strcasecmp(core, blas_cores[i].name)) return blas_cores[i].tier;
  return OBC_BLAS_TIER_UNKNOWN;
}

const char *obc_blas_core_for_cpu(const ObcCpuFeatures *f) {
  if (!f->avx || !f->os_ymm) return NULL;
  if (f->avx512f && f->avx512bw && f->avx512dq && f->avx512vl && f->os_zmm && f->avx2 && f->fma)
    return "SkylakeX";
  if (f->avx2 && f->fma) return "Haswell";
  return "Sandybridge";
}

const char *obc_blas_core_choice(const char *detected, const ObcCpuFeatures *f) {
  if (obc_blas_core_tier(detected) != OBC_BLAS_TIER_SSE) return NULL;
  return obc_blas_core_for_cpu(f);
}

/* The core OpenBLAS detected, or the one a test says it did. */
static const char *blas_detected_core(void) {
  const char *assumed = getenv(OBC_BLAS_DETECTED_ENV);
  return assumed && assumed[0] ? assumed : openblas_get_corename();
}

void obc_blas_core_describe(char *out, size_t size) {
  const char *core = openblas_get_corename();
  const char *forced = getenv("OPENBLAS_CORETYPE");
  const char *chosen = getenv(OBC_BLAS_CHOSEN_ENV);
  if (!forced || !forced[0]) {
    snprintf(out, size, "%s, detected by OpenBLAS", core);
  } else if (strcasecmp(forced, core)) {
    /* OpenBLAS prints "Core not found" and detects the processor itself. */
    snprintf(out, size, "%s: OpenBLAS did not take OPENBLAS_CORETYPE=%s", core, forced);
  } else if (chosen && chosen[0]) {
    snprintf(out, size,
             "%s, chosen by obcache: the installed OpenBLAS does not know this CPU and would "
             "run its generic %s kernels",
             core, chosen);
  } else {
    snprintf(out, size, "%s, set by OPENBLAS_CORETYPE", core);
  }
}

/* ---- one exec for both defaults ---- */

/* Idle OpenMP threads that spin (libgomp's default: 300000 spins, about
 * 3 ms, before sleeping) steal the cores the busy threads need when other jobs
 * share the machine: with every core taken by another process, decoding fell
 * from 31 to 0.5 tokens/s. Passive waiting (spin count 0) avoids that but
 * halves decode speed on an idle machine, where each short parallel region of
 * a decode step wakes sleeping threads. A short spin (GOMP_SPINCOUNT=1000:
 * 1000 turns of libgomp's wait loop, microseconds rather than milliseconds)
 * kept the idle speed and most of the passive speed under load (docs/CLI.md,
 * "Threads"), so it is the default. A user's own OMP_WAIT_POLICY or
 * GOMP_SPINCOUNT is kept. Returns whether it set the variable. */
static int startup_short_spin(void) {
  const char *policy = getenv("OMP_WAIT_POLICY");
  if ((policy && policy[0]) || getenv("GOMP_SPINCOUNT")) return 0;
  return setenv("GOMP_SPINCOUNT", "1000", 1) == 0;
}

/* Debian 12's OpenBLAS 0.3.21 detects processors by model number and runs
 * its generic SSE3 (Prescott) kernels on one it does not know, such as an
 * AVX-512 Xeon newer than it: every GEMM 3x slower, silently. A user's own
 * OPENBLAS_CORETYPE always wins (some machines set it on purpose). Returns
 * whether it set the variables. */
static int startup_blas_core(void) {
  const char *forced = getenv("OPENBLAS_CORETYPE");
  if (forced && forced[0]) return 0;
  ObcCpuFeatures features;
  obc_cpu_features(&features);
  const char *detected = blas_detected_core();
  const char *core = obc_blas_core_choice(detected, &features);
  if (!core) return 0;
  if (setenv(OBC_BLAS_CHOSEN_ENV, detected, 1) != 0) return 0;
  if (setenv("OPENBLAS_CORETYPE", core, 1) != 0) {
    unsetenv(OBC_BLAS_CHOSEN_ENV);
    return 0;
  }
  return 1;
}

/* 1 when this process runs through an explicit dynamic loader
 * (`ld-linux-x86-64.so.2 ./obcache`): /proc/self/exe is the loader, which
 * would take the program's first argument for the program. */
static int startup_under_loader(void) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return 0;
  exe[n] = '\0';
  const char *base = strrchr(exe, '/');
  return !strncmp(base ? base + 1 : exe, "ld-", 3);
}

void obc_startup_defaults(char **argv) {
  if (startup_under_loader()) return;
  int spin = startup_short_spin();
  int blas = startup_blas_core();
  if (!spin && !blas) return;
  execv("/proc/self/exe", argv);
  int err = errno;
  /* Not in effect: `version` must not claim them. */
  if (spin) unsetenv("GOMP_SPINCOUNT");
  if (blas) {
    fprintf(stderr,
            "obcache: warning: cannot restart with OPENBLAS_CORETYPE=%s (%s); BLAS runs "
            "OpenBLAS's generic %s kernels\n",
            getenv("OPENBLAS_CORETYPE"), strerror(err), getenv(OBC_BLAS_CHOSEN_ENV));
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv(OBC_BLAS_CHOSEN_ENV);
  }
  if (spin)
    fprintf(stderr,
            "obcache: warning: cannot restart with GOMP_SPINCOUNT=1000 (%s); idle threads may "
            "spin\n",
            strerror(err));
}
