// Times llama.cpp's released library (node-llama-cpp's prebuilt ggml-org/llama.cpp build, every
// CPU variant, the best one chosen at load) the way llama-bench does: pp = one llama_decode of
// N random tokens on an empty cache, tg = N single-token decodes from an empty cache; a warm-up
// of each first. The context-params layout is found from the library's own defaults.
// Built by scripts/bench/llamacpp_release.sh outside the tree, beside the library it times.
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
typedef struct {
  int32_t n_tokens;
  int32_t *token;
  float *embd;
  int32_t *pos;
  int32_t *n_seq_id;
  int32_t **seq_id;
  int8_t *logits;
} batch_t;
typedef struct {
  unsigned char b[1024];
} blob_t;
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
#define SYM(lib, name)                 \
  void *p_##name = dlsym(lib, #name);  \
  if (!p_##name) {                     \
    fprintf(stderr, "no %s\n", #name); \
    return 1;                          \
  }
int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: rel_bench DIR MODEL THREADS PP TG [REPS]\n");
    return 2;
  }
  const char *dir = argv[1], *model_path = argv[2];
  int threads = atoi(argv[3]), pp = atoi(argv[4]), tg = atoi(argv[5]),
      reps = argc > 6 ? atoi(argv[6]) : 3;
  char path[4096];
  snprintf(path, sizeof path, "%s/libggml.so", dir);  // links made by llamacpp_release.sh
  void *gg = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  snprintf(path, sizeof path, "%s/libllama.so", dir);
  void *ll = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (!gg || !ll) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  SYM(gg, ggml_backend_load_all_from_path)
  SYM(ll, llama_backend_init) SYM(ll, llama_model_default_params)
      SYM(ll, llama_context_default_params) SYM(ll, llama_model_load_from_file)
          SYM(ll, llama_init_from_model) SYM(ll, llama_decode) SYM(ll, llama_get_memory)
              SYM(ll, llama_memory_clear) SYM(ll, llama_model_get_vocab)
                  SYM(ll, llama_vocab_n_tokens) SYM(ll, llama_synchronize)
                      SYM(ll, llama_print_system_info)(
                          (void (*)(const char *))p_ggml_backend_load_all_from_path)(dir);
  ((void (*)(void))p_llama_backend_init)();
  blob_t mp = ((blob_t(*)(void))p_llama_model_default_params)();
  blob_t cp = ((blob_t(*)(void))p_llama_context_default_params)();
  uint32_t *u = (uint32_t *)cp.b;
  int at = -1;
  for (int i = 0; i < 8; i++)
    if (u[i] == 512 && u[i + 1] == 2048 && u[i + 2] == 512 && u[i + 3] == 1) {
      at = i;
      break;
    }
  if (at != 0) {
    fprintf(stderr, "context params layout not recognised\n");
    return 1;
  }
  int th = -1;  // n_threads: the first of two equal default thread counts after n_seq_max
  for (int i = 4; i < 10; i++)
    if (u[i] == u[i + 1] && u[i] >= 1 && u[i] <= 512) {
      th = i;
      break;
    }
  fprintf(stderr, "context defaults:");
  for (int i = 0; i < 12; i++) fprintf(stderr, " %u", u[i]);
  fprintf(stderr, " (threads at %d)\n", th);
  if (th < 0) return 1;
  u[0] = pp + tg;
  u[1] = pp > 0 ? pp : 1;
  u[2] = u[1] < 512 ? u[1] : 512;
  u[th] = threads;
  u[th + 1] = threads;
  double t0 = now();
  void *model = ((void *(*)(const char *, blob_t))p_llama_model_load_from_file)(model_path, mp);
  if (!model) {
    fprintf(stderr, "load failed\n");
    return 1;
  }
  void *ctx = ((void *(*)(void *, blob_t))p_llama_init_from_model)(model, cp);
  if (!ctx) {
    fprintf(stderr, "context failed\n");
    return 1;
  }
  fprintf(stderr, "loaded in %.1f s; %s\n", now() - t0,
          ((const char *(*)(void))p_llama_print_system_info)());
  int n_vocab = ((int (*)(const void *))p_llama_vocab_n_tokens)(
      ((void *(*)(void *))p_llama_model_get_vocab)(model));
  int (*decode)(void *, batch_t) = (int (*)(void *, batch_t))p_llama_decode;
  void *mem = ((void *(*)(void *))p_llama_get_memory)(ctx);
  void (*clear)(void *, int) = (void (*)(void *, int))p_llama_memory_clear;
  void (*sync)(void *) = (void (*)(void *))p_llama_synchronize;
  int n = pp > tg ? pp : tg;
  int32_t *tok = malloc(sizeof(int32_t) * (n > 0 ? n : 1));
  srand(1);
  for (int i = 0; i < n; i++) tok[i] = rand() % n_vocab;
  for (int test = 0; test < 2; test++) {
    int count = test == 0 ? pp : tg;
    if (count == 0) continue;
    double sum = 0, sum2 = 0;
    for (int r = -1; r < reps; r++) {  // r = -1: the warm-up
      clear(mem, 1);
      double s = now();
      if (test == 0) {
        batch_t b = {count, tok, 0, 0, 0, 0, 0};
        if (decode(ctx, b)) {
          fprintf(stderr, "decode failed\n");
          return 1;
        }
      } else {
        for (int i = 0; i < (r < 0 ? 1 : count); i++) {
          batch_t b = {1, tok + i, 0, 0, 0, 0, 0};
          if (decode(ctx, b)) {
            fprintf(stderr, "decode failed\n");
            return 1;
          }
        }
      }
      sync(ctx);
      double rate = count / (now() - s);
      if (r >= 0) {
        sum += rate;
        sum2 += rate * rate;
      }
    }
    double mean = sum / reps, sd = reps > 1 ? sqrt((sum2 - reps * mean * mean) / (reps - 1)) : 0;
    printf("llama.cpp-release %s %s%d t=%d: %.2f ± %.2f t/s\n", model_path, test == 0 ? "pp" : "tg",
           count, threads, mean, sd);
    fflush(stdout);
  }
  return 0;
}
