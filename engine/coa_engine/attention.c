/* Decode-step attention on a CPU in fp32, each row over exactly its own positions (attention.py builds
 * this with the machine's C compiler and loads it; its `attend_rows_torch` is the same arithmetic in
 * torch ops, and the fallback).
 *
 * Why: torch 1.13 runs a decode step's attention as one small GEMM per row and head (a few query rows
 * against ~1,000 positions), where OpenBLAS reaches a fraction of the core, plus an unvectorized exp
 * and the ops between them. Here one call per layer does, per row and head: the scores of its T new
 * queries against its keys, a softmax that never reads the positions a query may not see, and the
 * values weighted by it, all in registers and the core's caches.
 *
 * Layouts (model.py's KVCache): queries [B, H, T, D] contiguous; keys [rows, H, positions, D] and
 * values [rows, H, D, positions] (positions last), each with its own row and head strides; out
 * [B, H, T, D]. Row b's T queries are its last T positions (ends[b] - T ...): query t sees the first
 * ends[b] - T + t + 1. */
#if !defined(__AVX2__) || !defined(__FMA__)
#error "the fused attention needs AVX2 and FMA; the engine uses torch's ops instead"
#endif
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Queries per pass over the values: 2 x GROUP accumulators and the values' vector fit AVX2's 16
 * registers. */
#define GROUP 6

/* [sum(a0), ..., sum(a7)] of eight vectors. */
static inline __m256 sums8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5, __m256 a6, __m256 a7) {
  __m256 h0 = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  __m256 h1 = _mm256_hadd_ps(_mm256_hadd_ps(a4, a5), _mm256_hadd_ps(a6, a7));
  return _mm256_add_ps(_mm256_permute2f128_ps(h0, h1, 0x20), _mm256_permute2f128_ps(h0, h1, 0x31));
}

static inline float sum8(__m256 a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* scores[t * n + p] = scale * q[t] . k[p] for p < n. d: a multiple of 8. Meanwhile the values v (d
 * rows of n, vd apart) are fetched into the core's L2 in the order `weighted_values` reads them: read
 * from memory there, each of its d rows is a short stream of its own that the hardware prefetcher
 * starts late (a `micro` layer of 25 rows, its data in L3: 3.6 ms without this, 2.3 ms with it). */
static void scores_of(const float *q, const float *k, int64_t n, int t_count, int d, float scale, float *scores,
                      const float *v, int64_t vd) {
  int64_t p = 0;
  for (; p + 8 <= n; p += 8) {
    const float *kp = k + p * d;
    if (p % 16 == 0)
      for (int j = 0; j < d; j++) _mm_prefetch((const char *)(v + j * vd + p), _MM_HINT_T1);
    for (int t = 0; t < t_count; t++) {
      const float *qt = q + (int64_t)t * d;
      __m256 a[8];
      for (int j = 0; j < 8; j++) a[j] = _mm256_setzero_ps();
      for (int c = 0; c < d; c += 8) {
        __m256 qc = _mm256_loadu_ps(qt + c);
        for (int j = 0; j < 8; j++) a[j] = _mm256_fmadd_ps(qc, _mm256_loadu_ps(kp + j * d + c), a[j]);
      }
      __m256 s = sums8(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
      _mm256_storeu_ps(scores + t * n + p, _mm256_mul_ps(s, _mm256_set1_ps(scale)));
    }
  }
  for (; p < n; p++) {
    for (int t = 0; t < t_count; t++) {
      __m256 a = _mm256_setzero_ps();
      for (int c = 0; c < d; c += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(q + (int64_t)t * d + c), _mm256_loadu_ps(k + p * d + c), a);
      scores[t * n + p] = sum8(a) * scale;
    }
  }
}

/* Softmax of scores[0 .. seen) in place, then zeros up to n (positions the query may not see); returns
 * 1 / the sum of the exponentials (the weights are left unnormalized). */
static float softmax_of(float *s, int64_t seen, int64_t n) {
  float top = s[0];  /* seen >= 1: a query sees at least its own position */
  for (int64_t p = 1; p < seen; p++) top = s[p] > top ? s[p] : top;
  float total = 0.0f;
  for (int64_t p = 0; p < seen; p++) {
    s[p] = expf(s[p] - top);
    total += s[p];
  }
  for (int64_t p = seen; p < n; p++) s[p] = 0.0f;
  return 1.0f / total;
}

/* out[t * d + j] = norm[t] * sum_p w[t * n + p] * v[j * vd + p] for T (1..GROUP) queries. Inlined
 * with T a constant (`weighted_values`), so that the accumulators stay in registers. Meanwhile one
 * cache line of `next` (the next job's keys, `lines` long) is fetched into L2 per 16 positions. */
static inline __attribute__((always_inline)) void weighted_group(const float *w, const float *v, int64_t vd, int64_t n,
                                                                 const int T, int d, const float *norm, float *out,
                                                                 const char *next, int64_t lines) {
  int64_t line = 0;
  for (int j = 0; j < d; j++) {
    const float *vj = v + j * vd;
    __m256 a0[GROUP], a1[GROUP];
    for (int t = 0; t < T; t++) a0[t] = a1[t] = _mm256_setzero_ps();
    int64_t p = 0;
    for (; p + 16 <= n; p += 16) {
      __m256 x0 = _mm256_loadu_ps(vj + p), x1 = _mm256_loadu_ps(vj + p + 8);
      if (line < lines) _mm_prefetch(next + 64 * line++, _MM_HINT_T1);
      for (int t = 0; t < T; t++) {
        a0[t] = _mm256_fmadd_ps(_mm256_loadu_ps(w + t * n + p), x0, a0[t]);
        a1[t] = _mm256_fmadd_ps(_mm256_loadu_ps(w + t * n + p + 8), x1, a1[t]);
      }
    }
    for (int t = 0; t < T; t++) {
      float sum = sum8(_mm256_add_ps(a0[t], a1[t]));
      for (int64_t r = p; r < n; r++) sum += w[t * n + r] * vj[r];
      out[t * d + j] = sum * norm[t];
    }
  }
}

static void weighted_values(const float *w, const float *v, int64_t vd, int64_t n, int t_count, int d,
                            const float *norm, float *out, const char *next, int64_t lines) {
  switch (t_count) {
    case 1: weighted_group(w, v, vd, n, 1, d, norm, out, next, lines); break;
    case 2: weighted_group(w, v, vd, n, 2, d, norm, out, next, lines); break;
    case 3: weighted_group(w, v, vd, n, 3, d, norm, out, next, lines); break;
    case 4: weighted_group(w, v, vd, n, 4, d, norm, out, next, lines); break;
    case 5: weighted_group(w, v, vd, n, 5, d, norm, out, next, lines); break;
    default: weighted_group(w, v, vd, n, GROUP, d, norm, out, next, lines); break;
  }
}

/* Returns 0, or -1 if the scores' buffer could not be allocated. */
int coa_attend_rows(const float *q, const float *keys, const float *values, float *out, const int64_t *ends,
                    int64_t rows, int64_t heads, int64_t t_count, int64_t d, int64_t key_row, int64_t key_head,
                    int64_t value_row, int64_t value_head, int64_t value_dim, float scale, int threads) {
  int64_t longest = 0;
  for (int64_t b = 0; b < rows; b++) longest = ends[b] > longest ? ends[b] : longest;
  if (rows * heads == 0) return 0;
  if (threads < 1) threads = 1;
  float *buffer = malloc(sizeof(float) * (size_t)(threads * t_count * longest));
  if (!buffer) return -1;
#pragma omp parallel for num_threads(threads) schedule(dynamic) if (threads > 1)
  for (int64_t job = 0; job < rows * heads; job++) {
#ifdef _OPENMP
    float *scores = buffer + omp_get_thread_num() * t_count * longest;
#else
    float *scores = buffer;
#endif
    int64_t b = job / heads, h = job % heads, n = ends[b];
    const float *k = keys + b * key_row + h * key_head;
    const float *v = values + b * value_row + h * value_head;
    float norm[GROUP];
    scores_of(q + job * t_count * d, k, n, (int)t_count, (int)d, scale, scores, v, value_dim);
    /* The next job's keys (this thread's next, when it runs alone), fetched during the values pass. */
    int64_t after = job + 1 < rows * heads ? job + 1 : job;
    const char *next = (const char *)(keys + (after / heads) * key_row + (after % heads) * key_head);
    int64_t lines = after == job ? 0 : ends[after / heads] * d / 16;
    for (int64_t first = 0; first < t_count; first += GROUP) {
      int group = (int)(t_count - first < GROUP ? t_count - first : GROUP);
      for (int t = 0; t < group; t++) {
        int64_t query = first + t;
        norm[t] = softmax_of(scores + query * n, n - t_count + query + 1, n);
      }
      weighted_values(scores + first * n, v, value_dim, n, group, (int)d, norm, out + (job * t_count + first) * d,
                      next, first == 0 ? lines : 0);
    }
  }
  free(buffer);
  return 0;
}
