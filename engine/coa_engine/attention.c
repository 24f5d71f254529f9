/* Decode-step attention on a CPU, each row over exactly its own positions, with an fp32 or a bf16 cache
 * (attention.py builds this with the machine's C compiler and loads it; its `attend_rows_torch` is the
 * same arithmetic in torch ops, and the fallback).
 *
 * Why: torch 1.13 runs a decode step's attention as one small GEMM per row and head (a few query rows
 * against ~1,000 positions), where OpenBLAS reaches a fraction of the core, plus an unvectorized exp
 * and the ops between them. Here one call per layer does, per row and head: the scores of its T new
 * queries against its keys, a softmax that never reads the positions a query may not see, and the
 * values weighted by it, all in registers and the core's caches.
 *
 * Layouts: queries [N, H, D] fp32, the new positions of every row in turn (row b's counts[b] of them,
 * its last: query t sees its first ends[b] - counts[b] + t + 1 positions), with their own position and
 * head strides; keys and values [rows, H, positions, D] (model.py's KVCache), both fp32 or both bf16,
 * each with its own row and head strides; out [N, H, D] fp32, contiguous. Rows may feed different
 * numbers of new positions (a speculative step's drafts).
 *
 * With a bf16 cache (a bf16 engine: a CPU with AMX or AVX-512 BF16) the arithmetic is that of torch's
 * bf16 attention, the trainer's (model.py's `_attend`): products summed in fp32, the scaled scores
 * rounded to bf16, the softmax computed in fp32 from them and its weights rounded to bf16, the weighted
 * sums in fp32 (the caller rounds them to bf16). Widening bf16 to fp32 is a shift, so AVX2 suffices,
 * and a step bound by reading the cache reads half the bytes. */
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

#include "bf16.h"

/* Queries per pass over a row's values: their accumulators, a few vectors of columns each, stay in
 * AVX2's 16 registers (`weighted_values`). */
#define GROUP 6

/* The helpers below take the cache's element type as a constant `bf16` (0: fp32) and are inlined into
 * one job function per type (`job_fp32`, `job_bf16`), so that each type's loops are branch-free; the
 * element helpers (`load8`, `round_bf16`, ...) are in bf16.h. */

/* [sum(a0), ..., sum(a7)] of eight vectors. */
INLINE __m256 sums8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5, __m256 a6, __m256 a7) {
  __m256 h0 = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  __m256 h1 = _mm256_hadd_ps(_mm256_hadd_ps(a4, a5), _mm256_hadd_ps(a6, a7));
  return _mm256_add_ps(_mm256_permute2f128_ps(h0, h1, 0x20), _mm256_permute2f128_ps(h0, h1, 0x31));
}

INLINE float sum8(__m256 a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* out[0 .. 8) = scale * q . k[p + j] for j < 8 (rounded to bf16 with a bf16 cache): one query, each key's
 * products summed across the lanes at the end. */
INLINE void scores8(const float *q, const void *k, int64_t p, int d, __m256 scale8, float *out, const int bf16) {
  __m256 a[8];
  for (int j = 0; j < 8; j++) a[j] = _mm256_setzero_ps();
  for (int c = 0; c < d; c += 8) {
    __m256 qc = _mm256_loadu_ps(q + c);
    for (int j = 0; j < 8; j++) a[j] = _mm256_fmadd_ps(qc, load8(k, (p + j) * d + c, bf16), a[j]);
  }
  __m256 s = _mm256_mul_ps(sums8(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]), scale8);
  _mm256_storeu_ps(out, bf16 ? round_bf16(s) : s);
}

/* Queries whose scores are held at once: with ~100 new queries a row (an extend), all of them over
 * ~700 positions were ~550 KB, past a core's L2 by the time the softmax and the values read them back;
 * a chunk's are ~130 KB, beside the row's keys and values. Each chunk also computes only the positions
 * its last query sees. A multiple of GROUP. */
#define CHUNK 48

/* Queries and keys per block of `scores_of`'s many-query path. */
#define BLOCK_QUERIES 4
#define BLOCK_KEYS 16
/* Queries a row needs for that path: its keys are transposed once per row and head (`attend_job`), and
 * a call whose rows have this many holds room for them (`coa_attend_rows`). */
#define TRANSPOSED_FROM (2 * BLOCK_QUERIES)

/* The scores of BLOCK_QUERIES queries (qs apart) against BLOCK_KEYS keys given transposed (kt[c * 16 +
 * j]: key j's column c, `transposed_keys`), to out[t * n + j]: a small GEMM with its 4 x 2 accumulators
 * in registers, one key column and four query elements loaded per step. */
INLINE void scores_block(const float *q, int64_t qs, const float *kt, int d, __m256 scale8, float *out, int64_t n,
                         const int bf16) {
  __m256 a[BLOCK_QUERIES][2];
  for (int t = 0; t < BLOCK_QUERIES; t++) a[t][0] = a[t][1] = _mm256_setzero_ps();
  for (int c = 0; c < d; c++) {
    const __m256 k0 = _mm256_loadu_ps(kt + c * BLOCK_KEYS), k1 = _mm256_loadu_ps(kt + c * BLOCK_KEYS + 8);
    for (int t = 0; t < BLOCK_QUERIES; t++) {
      const __m256 qc = _mm256_broadcast_ss(q + t * qs + c);
      a[t][0] = _mm256_fmadd_ps(qc, k0, a[t][0]);
      a[t][1] = _mm256_fmadd_ps(qc, k1, a[t][1]);
    }
  }
  for (int t = 0; t < BLOCK_QUERIES; t++)
    for (int h = 0; h < 2; h++) {
      __m256 x = _mm256_mul_ps(a[t][h], scale8);
      _mm256_storeu_ps(out + t * n + 8 * h, bf16 ? round_bf16(x) : x);
    }
}

/* A row and head's first n keys in blocks of BLOCK_KEYS, each transposed: kt[(p / 16) * 16 d + c * 16 +
 * p % 16] = k[p][c] (as fp32), for `scores_block`; the first s from `ks` (a shared prefix: `coa_attend_rows`).
 * Once per row and head: every chunk of queries reads them. */
INLINE void transposed_keys(const void *k, const void *ks, int64_t s, int64_t n, int d, float *kt, const int bf16) {
  for (int64_t p = 0; p + BLOCK_KEYS <= n; p += BLOCK_KEYS) {
    const void *kb = p < s ? ks : k;
    for (int j = 0; j < BLOCK_KEYS; j++)
      for (int c = 0; c < d; c++) kt[p * d + c * BLOCK_KEYS + j] = load1(kb, (p + j) * d + c, bf16);
  }
}

/* scores[t * n + p] = scale * q[t] . k[p] for p < n (rounded to bf16 with a bf16 cache), query t at
 * q + t * qs; d a multiple of 8; positions below s (a multiple of BLOCK_KEYS) read from `ks`, laid out as
 * `k` (a shared prefix: `coa_attend_rows`). Meanwhile the values of the same positions (laid out as the keys) are
 * fetched into the core's L2 for `weighted_values`, so that both streams are in flight at once.
 *
 * With `kt` (the keys transposed, `transposed_keys`; for many queries: a prefix-cache extend feeds ~100
 * new ids a row) the whole blocks of 16 keys go through `scores_block`, 4 queries at a time: a product
 * per FMA lane and no sums across lanes, where the one-query path spends about a third of its
 * instructions reducing (docs/engine.md). A decode step's one to five queries take the one-query path. */
INLINE void scores_of(const float *q, int64_t qs, const void *k, const void *ks, int64_t s, const float *kt,
                      int64_t n, int t_count, int d, float scale, float *scores, const void *v, const void *vs,
                      const int bf16) {
  const int shift = bf16 ? 1 : 2; /* bytes per element: 1 << shift */
  const __m256 scale8 = _mm256_set1_ps(scale);
  int64_t p = 0;
  if (kt) {
    for (; p + BLOCK_KEYS <= n; p += BLOCK_KEYS) {
      const void *kb = p < s ? ks : k, *vb = p < s ? vs : v;
      for (int64_t byte = (p * d) << shift, last = ((p + BLOCK_KEYS) * d) << shift; byte < last; byte += 64)
        _mm_prefetch((const char *)vb + byte, _MM_HINT_T1);
      int t = 0;
      for (; t + BLOCK_QUERIES <= t_count; t += BLOCK_QUERIES)
        scores_block(q + t * qs, qs, kt + p * d, d, scale8, scores + t * n + p, n, bf16);
      for (; t < t_count; t++)
        for (int j = 0; j < BLOCK_KEYS; j += 8) scores8(q + t * qs, kb, p + j, d, scale8, scores + t * n + p + j, bf16);
    }
  }
  for (; p + 8 <= n; p += 8) {
    const void *kb = p < s ? ks : k, *vb = p < s ? vs : v;
    for (int64_t byte = (p * d) << shift, last = ((p + 8) * d) << shift; byte < last; byte += 64)
      _mm_prefetch((const char *)vb + byte, _MM_HINT_T1);
    for (int t = 0; t < t_count; t++) scores8(q + t * qs, kb, p, d, scale8, scores + t * n + p, bf16);
  }
  for (; p < n; p++) {
    for (int t = 0; t < t_count; t++) {
      __m256 a = _mm256_setzero_ps();
      for (int c = 0; c < d; c += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(q + t * qs + c), load8(k, p * d + c, bf16), a);
      float s = sum8(a) * scale;
      scores[t * n + p] = bf16 ? round1_bf16(s) : s;
    }
  }
}

/* Softmax of scores[0 .. seen) in place, then zeros up to n (positions the query may not see). Returns
 * the factor that normalizes the weights: 1 / the sum of the exponentials in fp32, whose weights are left
 * unnormalized; 1 with bf16, whose weights are normalized and rounded here, as torch's bf16 softmax
 * returns them. */
INLINE float softmax_of(float *s, int64_t seen, int64_t n, const int bf16) {
  float top = s[0]; /* seen >= 1: a query sees at least its own position */
  for (int64_t p = 1; p < seen; p++) top = s[p] > top ? s[p] : top;
  float total = 0.0f;
  for (int64_t p = 0; p < seen; p++) {
    s[p] = expf(s[p] - top);
    total += s[p];
  }
  for (int64_t p = seen; p < n; p++) s[p] = 0.0f;
  if (!bf16) return 1.0f / total;
  const float norm = 1.0f / total;
  int64_t p = 0;
  for (; p + 8 <= seen; p += 8) _mm256_storeu_ps(s + p, round_bf16(_mm256_mul_ps(_mm256_loadu_ps(s + p), _mm256_set1_ps(norm))));
  for (; p < seen; p++) s[p] = round1_bf16(s[p] * norm);
  return 1.0f;
}

/* out[t * os + c + i] = norm[t] * sum_p w[t * n + p] * v[p * d + c + i] for T (1..GROUP) queries and
 * the 8 W columns i from c, T and W constants at each call (`weighted_values`), so that the T x W
 * accumulators stay in registers while the positions stream past. Meanwhile one cache line of `next`
 * (the next job's keys, `lines` long) is fetched into L2 per 8 positions. */
INLINE void weighted_columns(const float *w, const void *v, const void *vs, int64_t s, int64_t n, const int T,
                             const int W, int d, int c, const float *norm, float *out, int64_t os, const char *next,
                             int64_t lines, const int bf16) {
  __m256 a[GROUP][8];
  for (int t = 0; t < T; t++)
    for (int i = 0; i < W; i++) a[t][i] = _mm256_setzero_ps();
  int64_t line = 0;
  /* Positions in order, the first s from `vs` (a shared prefix): the same sums as from one array. */
  for (int part = 0; part < 2; part++) {
    const void *vb = part ? v : vs;
    for (int64_t p = part ? s : 0, end = part ? n : s; p < end; p++) {
      if (p % 8 == 0 && line < lines) _mm_prefetch(next + 64 * line++, _MM_HINT_T1);
      __m256 x[8];
      for (int i = 0; i < W; i++) x[i] = load8(vb, p * d + c + 8 * i, bf16);
      for (int t = 0; t < T; t++) {
        const __m256 wt = _mm256_broadcast_ss(w + t * n + p);
        for (int i = 0; i < W; i++) a[t][i] = _mm256_fmadd_ps(wt, x[i], a[t][i]);
      }
    }
  }
  for (int t = 0; t < T; t++)
    for (int i = 0; i < W; i++)
      _mm256_storeu_ps(out + t * os + c + 8 * i, _mm256_mul_ps(a[t][i], _mm256_set1_ps(norm[t])));
}

/* Every column of T queries, in chunks of at most MOST vectors, fewer for the last columns (d is a
 * multiple of 8); only the first chunk fetches the next job's keys. */
#define COLUMNS(T, MOST)                                                                 \
  for (int c = 0, width = MOST; c < d; c += 8 * width) {                                \
    while (c + 8 * width > d) width /= 2;                                               \
    const int64_t fetch = c ? 0 : lines;                                                \
    switch (width) {                                                                    \
      case 8: weighted_columns(w, v, vs, s, n, T, 8 < MOST ? 8 : MOST, d, c, norm, out, os, next, fetch, bf16); break; \
      case 4: weighted_columns(w, v, vs, s, n, T, 4 < MOST ? 4 : MOST, d, c, norm, out, os, next, fetch, bf16); break; \
      case 2: weighted_columns(w, v, vs, s, n, T, 2 < MOST ? 2 : MOST, d, c, norm, out, os, next, fetch, bf16); break; \
      default: weighted_columns(w, v, vs, s, n, T, 1, d, c, norm, out, os, next, fetch, bf16); break;             \
    }                                                                                   \
  }

/* The values weighted by T = t_count queries' weights: a single query's 8 vectors of columns at once (8
 * accumulators, the FMA latency covered), 2 queries 4 each, more queries 2 each (at most 12). */
INLINE void weighted_values(const float *w, const void *v, const void *vs, int64_t s, int64_t n, int t_count, int d,
                            const float *norm, float *out, int64_t os, const char *next, int64_t lines,
                            const int bf16) {
  switch (t_count) {
    case 1: COLUMNS(1, 8) break;
    case 2: COLUMNS(2, 4) break;
    case 3: COLUMNS(3, 2) break;
    case 4: COLUMNS(4, 2) break;
    case 5: COLUMNS(5, 2) break;
    default: COLUMNS(GROUP, 2) break;
  }
}

/* What every job reads: the arguments of `coa_attend_rows`, and where each row's queries start. */
typedef struct {
  const float *q;
  const void *keys, *values;
  float *out;
  const int64_t *ends, *counts, *firsts;
  int64_t rows, heads, d, q_position, q_head, key_row, key_head, value_row, value_head;
  /* A prefix shared by rows (`coa_attend_rows`): [heads, positions, d] keys and values, `shared_head` apart, and
   * each row's count of positions read from it (NULL: none). */
  const void *shared_keys, *shared_values;
  const int64_t *shared;
  int64_t shared_head;
  float scale;
  int64_t scratch; /* floats of scores in a job's buffer; the transposed keys follow them */
} attention_args;

/* One row and head (`job`): its queries' scores, softmax and weighted values, `scores` its buffer. */
INLINE void attend_job(const attention_args *a, int64_t job, float *scores, const int bf16) {
  const int shift = bf16 ? 1 : 2;
  int64_t b = job / a->heads, h = job % a->heads, n = a->ends[b], t_count = a->counts[b], d = a->d;
  const char *k = (const char *)a->keys + ((b * a->key_row + h * a->key_head) << shift);
  const char *v = (const char *)a->values + ((b * a->value_row + h * a->value_head) << shift);
  const float *q = a->q + a->firsts[b] * a->q_position + h * a->q_head;
  float *out = a->out + (a->firsts[b] * a->heads + h) * d;
  const int64_t out_stride = a->heads * d;
  float norm[GROUP];
  /* Positions below s from the shared prefix: read by every row that shares it, it stays in the caches. */
  const int64_t s = a->shared ? a->shared[b] : 0;
  const char *ks = s ? (const char *)a->shared_keys + ((h * a->shared_head) << shift) : NULL;
  const char *vs = s ? (const char *)a->shared_values + ((h * a->shared_head) << shift) : NULL;
  /* The next job's keys past its shared prefix (this thread's next, when it runs alone), fetched during
   * the values pass. */
  int64_t after = job + 1 < a->rows * a->heads ? job + 1 : job, skip = a->shared ? a->shared[after / a->heads] : 0;
  const int64_t next_at = (after / a->heads) * a->key_row + (after % a->heads) * a->key_head + skip * d;
  const char *next = (const char *)a->keys + (next_at << shift);
  int64_t lines = after == job ? 0 : ((a->ends[after / a->heads] - skip) * d << shift) / 64;
  float *kt = t_count >= TRANSPOSED_FROM ? scores + a->scratch : NULL;
  if (kt) transposed_keys(k, ks, s, n, (int)d, kt, bf16);
  for (int64_t chunk = 0; chunk < t_count; chunk += CHUNK) {
    /* The chunk's queries and the positions its last one sees (m): its scores, m apart. */
    int64_t size = t_count - chunk < CHUNK ? t_count - chunk : CHUNK, m = n - t_count + chunk + size;
    scores_of(q + chunk * a->q_position, a->q_position, k, ks, s, kt, m, (int)size, (int)d, a->scale, scores, v,
              vs, bf16);
    for (int64_t first = 0; first < size; first += GROUP) {
      int group = (int)(size - first < GROUP ? size - first : GROUP);
      for (int t = 0; t < group; t++) {
        int64_t query = first + t;
        norm[t] = softmax_of(scores + query * m, m - size + query + 1, m, bf16);
      }
      int64_t start = chunk + first;
      weighted_values(scores + first * m, v, vs, s, m, group, (int)d, norm, out + start * out_stride, out_stride,
                      next, start == 0 ? lines : 0, bf16);
    }
  }
}

static void job_fp32(const attention_args *a, int64_t job, float *scores) { attend_job(a, job, scores, 0); }
static void job_bf16(const attention_args *a, int64_t job, float *scores) { attend_job(a, job, scores, 1); }

/* Bytes of keys and values a call reads before it runs on more than one thread. A second thread reads
 * from memory beside the first (28 `micro` rows at 600-1,300 positions, 27 MB a layer: a decode step
 * 8.4 -> 6.5 ms on a 2-core AVX2 EPYC), but waking it between calls, while torch's ops ran, took up to
 * a millisecond on that VM: with less to read (one row, an extend's 4 heads, 32 short `tiny` rows at
 * 7 MB) two threads were as fast or slower (docs/engine.md). */
#define PARALLEL_BYTES (16LL << 20)

/* Returns 0, or -1 if a buffer could not be allocated. `counts[b]` >= 0 new queries for row b, `ends[b]`
 * >= counts[b] its positions; `bf16`: 1 if keys and values are bf16 (as uint16), 0 if fp32. Strides are
 * in elements. With `shared` (else NULL), row b reads its first shared[b] positions (a multiple of
 * BLOCK_KEYS, at most ends[b] - counts[b]) from `shared_keys` and `shared_values` ([heads, positions, d],
 * heads `shared_head` apart) instead of its own: a prefix whose keys and values equal the row's own (the
 * caller's promise), read by many rows from one place. */
int coa_attend_rows(const float *q, const void *keys, const void *values, float *out, const int64_t *ends,
                    const int64_t *counts, int64_t rows, int64_t heads, int64_t d, int64_t q_position, int64_t q_head,
                    int64_t key_row, int64_t key_head, int64_t value_row, int64_t value_head, const void *shared_keys,
                    const void *shared_values, const int64_t *shared, int64_t shared_head, float scale, int threads,
                    int bf16) {
  if (rows * heads == 0) return 0;
  if (threads < 1) threads = 1;
  int64_t longest = 0, most = 0, *firsts = malloc(sizeof(int64_t) * (size_t)rows);
  if (!firsts) return -1;
  int64_t positions = 0;
  for (int64_t b = 0, first = 0; b < rows; first += counts[b++]) {
    firsts[b] = first;
    longest = ends[b] > longest ? ends[b] : longest;
    most = counts[b] > most ? counts[b] : most;
    positions += ends[b];
  }
  if (most == 0) { /* no queries (every row empty) */
    free(firsts);
    return 0;
  }
  /* Keys and values bytes read; below PARALLEL_BYTES one thread. */
  if ((positions * heads * d * 2) << (bf16 ? 1 : 2) < PARALLEL_BYTES) threads = 1;
  /* A job's buffer: the scores of up to CHUNK queries, then, for many queries, the keys transposed. */
  const int64_t scratch = (most < CHUNK ? most : CHUNK) * longest;
  const int64_t per_thread = scratch + (most >= TRANSPOSED_FROM ? longest * d : 0);
  const attention_args a = {q, keys, values, out, ends, counts, firsts, rows, heads, d, q_position, q_head,
                            key_row, key_head, value_row, value_head, shared_keys, shared_values, shared,
                            shared_head, scale, scratch};
  void (*job_of)(const attention_args *, int64_t, float *) = bf16 ? job_bf16 : job_fp32;
  float *buffer = malloc(sizeof(float) * (size_t)(threads * per_thread));
  if (!buffer) {
    free(firsts);
    return -1;
  }
  /* One thread: no region at all. Even an inactive one cost libgomp futex calls, a few a call, and a
   * batch's native step calls this once a row and head (`row_step`). */
  if (threads == 1) {
    for (int64_t job = 0; job < rows * heads; job++) job_of(&a, job, buffer);
  } else {
#pragma omp parallel for num_threads(threads) schedule(dynamic)
    for (int64_t job = 0; job < rows * heads; job++) {
#ifdef _OPENMP
      job_of(&a, job, buffer + omp_get_thread_num() * per_thread);
#else
      job_of(&a, job, buffer);
#endif
    }
  }
  free(buffer);
  free(firsts);
  return 0;
}
