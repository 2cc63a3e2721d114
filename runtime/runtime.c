/* The runtime front end: owns the KV cache and the chosen backend, checks each
 * forward call (room in the cache, token ids in the vocabulary) and splits long
 * inputs into chunks of max_batch tokens for the backend. */
#include "runtime/runtime.h"

#include <assert.h>
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_thread.h"
#ifdef OBC_HAVE_CUDA
#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>
#endif

struct Runtime {
  const Model *model;
  const RuntimeBackend *backend;
  void *state;
  RuntimeCache cache;
  size_t max_batch;
  RuntimeProfile profile;
};

float *runtime_cache_k(const RuntimeCache *cache, size_t layer, size_t kv_head) {
  assert(layer < cache->n_layers && kv_head < cache->n_kv_heads);
  return cache->k + ((layer * cache->n_kv_heads + kv_head) * cache->max_context) * cache->head_dim;
}

float *runtime_cache_v(const RuntimeCache *cache, size_t layer, size_t kv_head) {
  assert(layer < cache->n_layers && kv_head < cache->n_kv_heads);
  return cache->v + ((layer * cache->n_kv_heads + kv_head) * cache->max_context) * cache->head_dim;
}

#ifdef OBC_HAVE_CUDA
/* The CUDA backends (runtime/cuda/) live in libobcache_cuda.so, loaded the
 * first time a runtime asks for one, so that CPU runs neither need the CUDA
 * runtime and cuBLAS nor pay for loading them. Looked for: in the process
 * already (a program linked with it), beside the executable, in its parent
 * folder and in ../lib (the GPU kit), then on the loader's search path. */
static void *cuda_library(char *why, size_t size) {
  static void *handle;
  if (handle) return handle;
  char exe[PATH_MAX], path[PATH_MAX + 64];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = '\0';
  char *slash = strrchr(exe, '/');
  if (slash) *slash = '\0';
  static const char *const places[] = {"%s/libobcache_cuda.so", "%s/../libobcache_cuda.so",
                                       "%s/../lib/libobcache_cuda.so"};
  for (size_t i = 0; !handle && slash && i < sizeof places / sizeof *places; i++) {
    snprintf(path, sizeof path, places[i], exe);
    if (access(path, F_OK) == 0 && !(handle = dlopen(path, RTLD_NOW | RTLD_GLOBAL)))
      snprintf(why, size, "%s", dlerror());
  }
  if (!handle && !*why && !(handle = dlopen("libobcache_cuda.so", RTLD_NOW | RTLD_GLOBAL)))
    snprintf(why, size, "%s", dlerror());
  return handle;
}

static const RuntimeBackend *cuda_backend(const char *name) {
  const char *symbol = !strcmp(name, "cuda") ? "runtime_backend_cuda" : "runtime_backend_cuda_bf16";
  const RuntimeBackend *backend = dlsym(RTLD_DEFAULT, symbol);
  char why[1024] = "";
  void *library = backend ? NULL : cuda_library(why, sizeof why);
  if (library) backend = dlsym(library, symbol);
  if (!backend)
    obc_fail(OBC_EUNSUPPORTED, "--device %s: cannot load the CUDA backend (libobcache_cuda.so): %s",
             name, *why ? why : "not found beside obcache or on the library path");
  return backend;
}
#endif

/* The backend named name; NULL after obc_fail when there is none. */
static const RuntimeBackend *find_backend(const char *name) {
  if (!name || !strcmp(name, runtime_backend_cpu.name)) return &runtime_backend_cpu;
  if (strcmp(name, "cuda") && strcmp(name, "cuda-bf16")) {
    obc_fail(OBC_EUNSUPPORTED, "runtime: unknown backend '%s' (expected cpu, cuda or cuda-bf16)",
             name);
    return NULL;
  }
#ifdef OBC_HAVE_CUDA
  return cuda_backend(name);
#else
  obc_fail(OBC_EUNSUPPORTED,
           "--device %s: this build has no CUDA support (rebuild where nvcc is installed, with "
           "-DOBC_CUDA=ON)",
           name);
  return NULL;
#endif
}

int runtime_create(const Model *model, const RuntimeOptions *options, Runtime **out) {
  assert(model && out);
  *out = NULL;
  const ModelConfig *c = &model->config;
  int rc = model_config_validate(c, model->path);
  if (rc) return rc;
  RuntimeOptions opts = options ? *options : (RuntimeOptions){0};
  const RuntimeBackend *backend = find_backend(opts.backend);
  if (!backend) return OBC_EUNSUPPORTED;
  if (opts.max_context == 0)
    opts.max_context = c->context_length && c->context_length < RUNTIME_DEFAULT_CONTEXT
                           ? c->context_length
                           : RUNTIME_DEFAULT_CONTEXT;
  if (opts.max_batch == 0) opts.max_batch = 512;
  if (opts.max_batch > opts.max_context) opts.max_batch = opts.max_context;
  if (opts.threads > 0) {
    obc_set_threads(opts.threads);
    openblas_set_num_threads((int)opts.threads);
  }

  Runtime *rt = obc_calloc(1, sizeof(Runtime), "runtime");
  if (!rt) return OBC_ENOMEM;
  rt->model = model;
  rt->backend = backend;
  rt->max_batch = opts.max_batch;
  RuntimeCache *cache = &rt->cache;
  cache->n_layers = c->n_layers;
  cache->n_kv_heads = c->n_kv_heads;
  cache->max_context = opts.max_context;
  cache->head_dim = c->head_dim;
  size_t floats = c->n_layers * c->n_kv_heads * opts.max_context * c->head_dim;
  cache->k = obc_calloc(floats, sizeof(float), "KV cache (keys; try a smaller --context)");
  cache->v = obc_calloc(floats, sizeof(float), "KV cache (values; try a smaller --context)");
  if (!cache->k || !cache->v) {
    runtime_free(rt);
    return OBC_ENOMEM;
  }
  if ((rc = backend->create(model, &opts, cache, &rt->state)) < 0) {
    runtime_free(rt);
    return rc;
  }
  *out = rt;
  return OBC_OK;
}

void runtime_free(Runtime *rt) {
  if (!rt) return;
  if (rt->state) rt->backend->destroy(rt->state);
  free(rt->cache.k);
  free(rt->cache.v);
  free(rt->cache.evicted);
  free(rt);
}

int runtime_forward(Runtime *rt, const int32_t *tokens, size_t n, RuntimeLogits which,
                    float *logits, const RuntimeCapture *capture) {
  assert(rt && (tokens || n == 0) && (logits || which == RUNTIME_LOGITS_NONE));
  const ModelConfig *c = &rt->model->config;
  size_t pos0 = rt->cache.length;
  if (n == 0) return obc_fail(OBC_EINVAL, "runtime: no tokens to run");
  if (n > rt->cache.max_context - pos0)
    return obc_fail(OBC_EINVAL,
                    "runtime: %zu tokens do not fit the context (expected at most %zu more "
                    "after %zu cached, context %zu; hint: raise --context)",
                    n, rt->cache.max_context - pos0, pos0, rt->cache.max_context);
  for (size_t t = 0; t < n; t++)
    if (tokens[t] < 0 || (size_t)tokens[t] >= c->vocab_size)
      return obc_fail(OBC_EINVAL, "runtime: token %zu has id %d (expected 0..%zu)", t,
                      (int)tokens[t], c->vocab_size - 1);
  if (capture)
    for (size_t r = 1; r < capture->n_rows; r++)
      assert(capture->row_positions[r] > capture->row_positions[r - 1]);
  if (capture && capture->sums && !rt->backend->device_sums)
    return obc_fail(OBC_EINVAL,
                    "runtime: the %s backend has no device sums (hint: leave them "
                    "to the capture's on_layer)",
                    rt->backend->name);
  if (capture && capture->sums &&
      (capture->sums->n_prompt > rt->cache.max_context ||
       capture->sums->agnostic_rows > capture->sums->n_prompt))
    return obc_fail(OBC_EINVAL,
                    "runtime: device sums over %zu prompt rows (agnostic %zu) do not fit the "
                    "context of %zu",
                    capture->sums->n_prompt, capture->sums->agnostic_rows, rt->cache.max_context);

  if (rt->cache.evicted) /* positions appended from here on are always kept */
    for (size_t layer = 0; layer < c->n_layers; layer++)
      for (size_t g = 0; g < c->n_kv_heads; g++) {
        unsigned char *marks =
            rt->cache.evicted + (layer * c->n_kv_heads + g) * rt->cache.max_context + pos0;
        for (size_t i = 0; i < n; i++)
          if (marks[i]) { /* a change a backend with its own copy must upload */
            memset(marks, 0, n);
            rt->cache.marks_version++;
            break;
          }
      }
  for (size_t done = 0; done < n;) {
    size_t chunk = n - done < rt->max_batch ? n - done : rt->max_batch;
    int last = done + chunk == n;
    RuntimeLogits chunk_which = which;
    float *chunk_logits = logits;
    if (which == RUNTIME_LOGITS_ALL) chunk_logits = logits + done * c->vocab_size;
    if (which == RUNTIME_LOGITS_LAST && !last) chunk_which = RUNTIME_LOGITS_NONE;
    int rc = rt->backend->forward(rt->state, tokens + done, chunk, chunk_which, chunk_logits,
                                  capture, &rt->profile);
    if (rc) {
      rt->cache.length = pos0;
      return rc;
    }
    done += chunk;
  }
  return OBC_OK;
}

bool runtime_device_sums(const Runtime *rt) { return rt->backend->device_sums; }
size_t runtime_position(const Runtime *rt) { return rt->cache.length; }
size_t runtime_max_context(const Runtime *rt) { return rt->cache.max_context; }
const Model *runtime_model(const Runtime *rt) { return rt->model; }
void runtime_reset(Runtime *rt) {
  rt->cache.length = 0;
  rt->cache.host_written = 0;
  runtime_clear_evictions(rt);
}
RuntimeCache *runtime_cache(Runtime *rt) { return &rt->cache; }

int runtime_set_position(Runtime *rt, size_t position) {
  if (position > rt->cache.max_context)
    return obc_fail(OBC_EINVAL, "runtime: position %zu beyond the context (expected <= %zu)",
                    position, rt->cache.max_context);
  rt->cache.length = position;
  rt->cache.host_written = position;
  return OBC_OK;
}

int runtime_rewind(Runtime *rt, size_t position) {
  if (position > rt->cache.length)
    return obc_fail(OBC_EINVAL, "runtime: cannot rewind to position %zu (expected <= %zu cached)",
                    position, rt->cache.length);
  rt->cache.length = position;
  if (rt->cache.host_written > position) rt->cache.host_written = position;
  return OBC_OK;
}

/* The eviction marks (n_layers, n_kv_heads, max_context), allocated all
 * kept on first use: a run that never evicts has none. */
static int alloc_marks(RuntimeCache *cache) {
  if (cache->evicted) return OBC_OK;
  cache->evicted =
      obc_calloc(cache->n_layers * cache->n_kv_heads * cache->max_context, 1, "eviction marks");
  return cache->evicted ? OBC_OK : OBC_ENOMEM;
}

int runtime_evict(Runtime *rt, size_t layer, size_t kv_head, size_t position) {
  RuntimeCache *cache = &rt->cache;
  assert(layer < cache->n_layers && kv_head < cache->n_kv_heads);
  if (position >= cache->length)
    return obc_fail(OBC_EINVAL, "runtime: cannot evict position %zu (expected < %zu cached)",
                    position, cache->length);
  int rc = alloc_marks(cache);
  if (rc) return rc;
  cache->evicted[(layer * cache->n_kv_heads + kv_head) * cache->max_context + position] = 1;
  cache->marks_version++;
  return OBC_OK;
}

int runtime_set_kept(Runtime *rt, size_t layer, size_t kv_head, const unsigned char *keep,
                     size_t n) {
  RuntimeCache *cache = &rt->cache;
  assert(layer < cache->n_layers && kv_head < cache->n_kv_heads);
  if (n > cache->length)
    return obc_fail(OBC_EINVAL,
                    "runtime: cannot set marks of %zu positions (expected <= %zu cached)", n,
                    cache->length);
  size_t dropped = 0;
  for (size_t p = 0; p < n; p++) dropped += !keep[p];
  if (!cache->evicted && dropped == 0) return OBC_OK; /* no marks yet, none needed */
  int rc = alloc_marks(cache);
  if (rc) return rc;
  unsigned char *marks =
      cache->evicted + (layer * cache->n_kv_heads + kv_head) * cache->max_context;
  for (size_t p = 0; p < n; p++) marks[p] = !keep[p];
  cache->marks_version++;
  return OBC_OK;
}

void runtime_clear_evictions(Runtime *rt) {
  RuntimeCache *cache = &rt->cache;
  if (cache->evicted)
    memset(cache->evicted, 0, cache->n_layers * cache->n_kv_heads * cache->max_context);
  cache->marks_version++;
}

const RuntimeProfile *runtime_profile(const Runtime *rt) { return &rt->profile; }
void runtime_profile_reset(Runtime *rt) { memset(&rt->profile, 0, sizeof(rt->profile)); }
