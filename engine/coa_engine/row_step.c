/* A whole decode step of a few rows on a CPU: the model's every layer for their new ids, from the ids to
 * their logits, in one call (row_step.py loads it; model.py's `decode_tokens` is the same arithmetic in
 * torch ops and what every other step runs).
 *
 * Why: a one-row step of `tiny` reads 17 MB of fp32 weights, ~1 ms at this project's 2-core EPYC's
 * one-thread read rate, but took 2.2-2.8 ms through TorchScript there: ~200 torch ops and five calls of
 * the fused attention through Python, each costing more than its arithmetic (docs/engine.md). Here the
 * step is matrix-vector products over packed copies of the decode layout's matrices, the norms,
 * rotation and SwiGLU in plain loops, and the attention by `coa_attend_rows` (attention.c) over each
 * row's own positions.
 *
 * In fp32 a step of many ids (a batch's rows, their drafts, a prompt's new ids) runs here too, its
 * projections by the BLAS's sgemm (as torch's matmul) instead of `gemv`: the TorchScript step spent about
 * a quarter of such a step (`micro`, 33 rows feeding 221 ids) in its ~200 small ops and their dispatch
 * (docs/engine.md, "The whole fp32 step in native code"). In bf16 on a CPU with AVX512-BF16 (and no AMX)
 * it does too, its products by `gemv_pairs`, which shares each load of the weights among several ids.
 *
 * Arithmetic: that of `decode_tokens` (RMSNorm, rotary halves, softmax attention scaled by
 * 1/sqrt(head_dim), SwiGLU, residual adds, tied output) in its dtype. In fp32 with sums in another
 * order: logits agree to about 1e-5 (tested). In bf16 (`bf16` = 1: bf16 matrices and cache) as a bf16
 * engine's one-row step computes it (`RowWeights`): every projection's input and output rounded to
 * bf16 around fp32 sums of exact products, the stream x kept in fp32, the rotation in fp32 from bf16
 * values, queries and keys rounded to bf16, the attention's output rounded, SwiGLU's activation and
 * product each rounded as torch's bf16 ops round them; its sums in another order leave some outputs a
 * bf16 step apart. */
#if !defined(__AVX2__) || !defined(__FMA__)
#error "the native decode step needs AVX2 and FMA; the engine decodes in torch ops instead"
#endif
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"
#ifdef _OPENMP
#include <omp.h>
#endif

/* The calling thread's number in the OpenMP region it runs in (0 outside one, or without OpenMP). */
INLINE int64_t thread_number(void) {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

int coa_attend_rows(const float *q, const void *keys, const void *values, float *out, const int64_t *ends,
                    const int64_t *counts, int64_t rows, int64_t heads, int64_t d, int64_t q_position, int64_t q_head,
                    int64_t key_row, int64_t key_head, int64_t value_row, int64_t value_head, const void *shared_keys,
                    const void *shared_values, const int64_t *shared, int64_t shared_head, float scale, int threads,
                    int bf16);

/* Fortran BLAS's sgemm (column-major), which torch 1.13 calls for an fp32 matrix product on a CPU where it
 * links the system BLAS (Debian's: OpenBLAS). */
typedef void (*sgemm_fn)(const char *, const char *, const int *, const int *, const int *, const float *,
                         const float *, const int *, const float *, const int *, const float *, float *, const int *);

/* Columns per block of a packed matrix: a block's accumulators fill 8 of AVX2's 16 registers. */
#define BLOCK 64

/* y[t] = x[t] w, or with `add` y[t] += x[t] w, for `count` inputs x [count, in] and w [in, out] (fp32, or
 * bf16 with `bf16`: then each sum is rounded to bf16 before it is stored or added) packed in blocks of
 * BLOCK columns ([blocks, in, BLOCK], the last block padded with zeros: row_step.py's `packed`), so that
 * each block is one contiguous stream: read by columns of the [in, out] layout (rows `out` apart) the
 * same products ran at 9-10 GB/s on one core of a 2-core AVX2 EPYC, packed at 16-19 (docs/engine.md). A
 * block is read from memory for the first input and from the core's L2 for the others. The blocks are
 * shared among the threads of the enclosing parallel region (all on the caller's outside one), and the
 * call ends with their barrier. */
INLINE void gemv(const float *x, int64_t count, const void *w, int64_t in, int64_t out, float *y, const int add,
                 const int bf16) {
#pragma omp for schedule(static)
  for (int64_t block = 0; block < (out + BLOCK - 1) / BLOCK; block++) {
    const int64_t stream = block * in * BLOCK;
    const int64_t first = block * BLOCK, last = first + BLOCK < out ? first + BLOCK : out;
    for (int64_t t = 0; t < count; t++) {
      const float *xt = x + t * in;
      float *yt = y + t * out;
      __m256 a[BLOCK / 8];
      for (int j = 0; j < BLOCK / 8; j++) a[j] = _mm256_setzero_ps();
      for (int64_t i = 0; i < in; i++) {
        const __m256 xi = _mm256_broadcast_ss(xt + i);
        for (int j = 0; j < BLOCK / 8; j++) a[j] = _mm256_fmadd_ps(xi, load8(w, stream + i * BLOCK + 8 * j, bf16), a[j]);
      }
      float sums[BLOCK];
      for (int j = 0; j < BLOCK / 8; j++) _mm256_storeu_ps(sums + 8 * j, bf16 ? round_bf16(a[j]) : a[j]);
      for (int64_t c = first; c < last; c++) yt[c] = add ? yt[c] + sums[c - first] : sums[c - first];
    }
  }
}

/* bf16 products by AVX512-BF16's dot products of pairs (vdpbf16ps), where the compiler targets a CPU that
 * has them (`coa_row_step_pairs`): there bf16 matrices are packed in pairs of rows ([blocks, pairs, BLOCK,
 * 2]: row_step.py's `packed`), each 512-bit load 16 columns of two rows, and one load serves up to TILE
 * inputs. The conversions of `gemv`'s bf16 path (a widening and a shift per eight weights, per input) go,
 * and several inputs share each load, so a batch's step runs here rather than through TorchScript's ~200
 * ops and oneDNN's products (docs/engine.md, "bf16 steps in pairs"). */
#if defined(__AVX512BF16__) && defined(__AVX512F__)
#define PAIRS 1
/* Inputs a tile: 4 accumulators each (a block's 64 columns), 24 of AVX-512's 32 registers beside the
 * block's 4. */
#define TILE 6

/* sums [g, BLOCK] = the products of g inputs (as pairs of bf16, `pairs` apart) and a block of pairs: every
 * input's sums in the same order whatever g, so an input's bits do not depend on the others. */
INLINE void tile_pairs(const uint32_t *xp, int64_t pairs, const uint16_t *block, float *sums, const int g) {
  __m512 acc[TILE][4];
  for (int i = 0; i < g; i++)
    for (int j = 0; j < 4; j++) acc[i][j] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; p++) {
    const uint16_t *row = block + p * 2 * BLOCK;
    __m512bh w[4];
    for (int j = 0; j < 4; j++) w[j] = (__m512bh)_mm512_loadu_si512(row + 32 * j);
    for (int i = 0; i < g; i++) {
      const __m512bh x = (__m512bh)_mm512_set1_epi32((int)xp[i * pairs + p]);
      for (int j = 0; j < 4; j++) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], x, w[j]);
    }
  }
  for (int i = 0; i < g; i++)
    for (int j = 0; j < 4; j++) _mm512_storeu_ps(sums + i * BLOCK + 16 * j, acc[i][j]);
}

/* `gemv` in bf16 over matrices packed in pairs; `xp`: this thread's room for the inputs as pairs of bf16
 * ([count, pairs]: every thread converts them itself rather than waiting at a barrier). The inputs are
 * bf16 values already (each projection's input is rounded), so a pair is their upper halves. */
INLINE void gemv_pairs(const float *x, int64_t count, const uint16_t *w, int64_t in, int64_t out, float *y,
                       const int add, uint32_t *xp) {
  const int64_t pairs = (in + 1) / 2;
  for (int64_t t = 0; t < count; t++)
    for (int64_t p = 0; p < pairs; p++) {
      uint32_t lo, hi = 0;
      __builtin_memcpy(&lo, x + t * in + 2 * p, sizeof lo);
      if (2 * p + 1 < in) __builtin_memcpy(&hi, x + t * in + 2 * p + 1, sizeof hi);
      xp[t * pairs + p] = (lo >> 16) | (hi & 0xffff0000u);
    }
#pragma omp for schedule(static)
  for (int64_t block = 0; block < (out + BLOCK - 1) / BLOCK; block++) {
    const uint16_t *packed = w + block * pairs * 2 * BLOCK;
    const int64_t first = block * BLOCK, last = first + BLOCK < out ? first + BLOCK : out;
    float sums[TILE * BLOCK];
    for (int64_t t0 = 0; t0 < count; t0 += TILE) {
      const int64_t g = count - t0 < TILE ? count - t0 : TILE;
      const uint32_t *tile = xp + t0 * pairs;
      /* Each count its own unrolled copy, its accumulators in registers. */
      switch (g) {
        case 6: tile_pairs(tile, pairs, packed, sums, 6); break;
        case 5: tile_pairs(tile, pairs, packed, sums, 5); break;
        case 4: tile_pairs(tile, pairs, packed, sums, 4); break;
        case 3: tile_pairs(tile, pairs, packed, sums, 3); break;
        case 2: tile_pairs(tile, pairs, packed, sums, 2); break;
        default: tile_pairs(tile, pairs, packed, sums, 1);
      }
      /* Each sum rounded to bf16, then stored or added: eight at a time, the last block's tail one by one. */
      for (int64_t i = 0; i < g; i++) {
        float *yt = y + (t0 + i) * out + first;
        const float *st = sums + i * BLOCK;
        int64_t c = 0;
        for (; c + 8 <= last - first; c += 8) {
          const __m256 s = round_bf16(_mm256_loadu_ps(st + c));
          _mm256_storeu_ps(yt + c, add ? _mm256_add_ps(_mm256_loadu_ps(yt + c), s) : s);
        }
        for (; c < last - first; c++) yt[c] = add ? yt[c] + round1_bf16(st[c]) : round1_bf16(st[c]);
      }
    }
  }
}
#else
#define PAIRS 0
#endif

/* Whether bf16 matrices are packed in pairs of rows for AVX512-BF16 (row_step.py's `packed`), and a bf16
 * step takes any number of ids (`RowStep.batches`). */
int coa_row_step_pairs(void) { return PAIRS; }

/* y = x w, or with `add` y += x w, for `count` inputs x [count, in] and w [in, out] (fp32, row-major) by
 * the BLAS, called as torch's matmul calls it (y^T = w^T x^T in column-major terms): for many inputs,
 * where `gemv` would read each block once per input and the BLAS's packed panels share every load. */
static void gemm(sgemm_fn sgemm, const float *x, int64_t count, const float *w, int64_t in, int64_t out, float *y,
                 const int add) {
  const int m = (int)out, n = (int)count, k = (int)in;
  const float one = 1.0f, beta = add ? 1.0f : 0.0f;
  sgemm("N", "N", &m, &n, &k, &one, w, &m, x, &k, &beta, y, &m);
}

/* out = x / sqrt(mean(x^2) + eps) * weight, as model.py's `rms_norm`; with `bf16` rounded to bf16 (the
 * projection it feeds rounds its input so). */
INLINE void rms_norm(const float *x, const float *weight, int64_t n, float eps, float *out, const int bf16) {
  float squares = 0.0f;
  for (int64_t i = 0; i < n; i++) squares += x[i] * x[i];
  const float r = 1.0f / sqrtf(squares / (float)n + eps);
  int64_t i = 0;
  if (bf16) /* eight at a time: the scalar rounding kept the loop from vectorizing */
    for (const __m256 r8 = _mm256_set1_ps(r); i + 8 <= n; i += 8)
      _mm256_storeu_ps(out + i, round_bf16(_mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), r8),
                                                         _mm256_loadu_ps(weight + i))));
  for (; i < n; i++) out[i] = bf16 ? round1_bf16(x[i] * r * weight[i]) : x[i] * r * weight[i];
}

/* n values into a cache row (fp32, or bf16 rounded), eight at a time: a row's line is usually not in the
 * cache, and one store per value filled the core's store queue with misses (a batch's step of `tiny` spent
 * a tenth of its time in this loop). */
INLINE void store(void *to, int64_t at, const float *from, int64_t n, const int bf16) {
  if (!bf16) {
    memcpy((float *)to + at, from, sizeof(float) * (size_t)n);
    return;
  }
  uint16_t *row = (uint16_t *)to + at;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i bits = _mm256_srli_epi32(_mm256_castps_si256(round_bf16(_mm256_loadu_ps(from + i))), 16);
    const __m128i halves = _mm_packus_epi32(_mm256_castsi256_si128(bits), _mm256_extracti128_si256(bits, 1));
    _mm_storeu_si128((__m128i *)(row + i), halves);
  }
  for (; i < n; i++) row[i] = bf16_bits(from[i]);
}

/* fp32 SwiGLU units one at a time with glibc's scalar `expf`: the bits the fp32 step has always had (its
 * vectorized exponentials differ in last bits, which could turn a greedy near-tie). */
__attribute__((noinline, optimize("no-tree-vectorize"))) static void swiglu_fp32(const float *gate, const float *up,
                                                                                  int64_t n, float *y) {
  for (int64_t c = 0; c < n; c++) y[c] = gate[c] / (1.0f + expf(-gate[c])) * up[c];
}

/* SwiGLU of `count` ids (gate_up [count, 2 hidden], each id's gate then up) into out [count, hidden]:
 * silu(gate) * up, in bf16 each rounded as torch's bf16 ops round them. Shared among the region's threads
 * in chunks of BLOCK units of one id, so that no unit pays a division for its id (one a unit cost a
 * batch's step of `tiny` a fifth of its time), and in bf16 each chunk's exponentials are one loop the
 * compiler vectorizes (glibc's libmvec). A unit's bits depend on its place in its chunk only, not on the
 * ids or threads beside it. */
INLINE void swiglu_rows(const float *gate_up, int64_t count, int64_t hidden, float *out, const int bf16) {
  const int64_t chunks = (hidden + BLOCK - 1) / BLOCK;
#pragma omp for schedule(static)
  for (int64_t job = 0; job < count * chunks; job++) {
    const int64_t t = job / chunks, first = (job % chunks) * BLOCK;
    const int64_t n = hidden - first < BLOCK ? hidden - first : BLOCK;
    const float *gate = gate_up + t * 2 * hidden + first, *up = gate + hidden;
    float *y = out + t * hidden + first;
    if (!bf16) {
      swiglu_fp32(gate, up, n, y);
      continue;
    }
    for (int64_t c = 0; c < n; c++) y[c] = gate[c] / (1.0f + expf(-gate[c]));
    int64_t c = 0;
    for (; c + 8 <= n; c += 8) {
      const __m256 silu = round_bf16(_mm256_loadu_ps(y + c));
      _mm256_storeu_ps(y + c, round_bf16(_mm256_mul_ps(silu, _mm256_loadu_ps(up + c))));
    }
    for (; c < n; c++) y[c] = round1_bf16(round1_bf16(y[c]) * up[c]);
  }
}

/* One head's two halves (d values) rotated by the position's angles (model.py's `rotate`), in place. */
static void rotate(float *x, int64_t d, const float *cos, const float *sin) {
  const int64_t half = d / 2;
  float *a = x, *b = x + half;
  for (int64_t c = 0; c < half; c++) {
    const float x1 = a[c], x2 = b[c];
    a[c] = x1 * cos[c] - x2 * sin[c];
    b[c] = x1 * sin[c] + x2 * cos[c];
  }
}

/* One id's head h (qkv: its [q | k | v] of 3 dim): its query and key rotated by the position's angles
 * (model.py's `rotate`) in place, then rounded as the cache and the attention take them, and its key and
 * value written to the cache at `key_at` and `value_at` (elements). */
INLINE void place_head(float *qkv, int64_t h, int64_t dim, int64_t d, int64_t position, const float *rope_cos,
                       const float *rope_sin, void *keys, void *values, int64_t key_at, int64_t value_at,
                       const int bf16) {
  float *q = qkv + h * d, *k = qkv + dim + h * d;
  const float *angle_cos = rope_cos + position * (d / 2), *angle_sin = rope_sin + position * (d / 2);
  rotate(q, d, angle_cos, angle_sin);
  rotate(k, d, angle_cos, angle_sin);
  if (bf16)
    for (int64_t i = 0; i < d; i++) q[i] = round1_bf16(q[i]), k[i] = round1_bf16(k[i]);
  store(keys, key_at + position * d, k, d, bf16);
  store(values, value_at + position * d, qkv + 2 * dim + h * d, d, bf16);
}

/* What locates each row's ids: the cache rows they go to, how many each feeds and from which position, and
 * how many of its first positions it reads from a shared prefix (NULL: none). */
typedef struct {
  int64_t rows;
  const int64_t *index, *counts, *starts, *shared;
} row_set;

/* A prefix of positions that rows share (`coa_attend_rows`): per layer its [heads, positions, d] keys and
 * values, heads `head` elements apart. */
typedef struct {
  const void *const *keys, *const *values;
  int64_t head;
} shared_prefix;

/* How the projections run: each id's products by `gemv` over the packed matrices, or with `sgemm` (fp32)
 * for `gemm_from` inputs or more all at once by the BLAS over the plain [in, out] ones (`plain`, in the
 * packed ones' order). */
typedef struct {
  const void *const *packed;
  const float *const *plain;
  sgemm_fn sgemm;
  int64_t gemm_from;
} projections;

/* Matrix m's products for `count` inputs, by the BLAS with `blas` (`projections`), else by `gemv` (in bf16
 * with AVX512-BF16 `gemv_pairs`, converting the inputs into `xp`). */
INLINE void project(const projections *p, const int blas, int64_t m, const float *x, int64_t count, int64_t in,
                    int64_t out, float *y, const int add, const int bf16, uint32_t *xp) {
  if (blas) {
#pragma omp single
    gemm(p->sgemm, x, count, p->plain[m], in, out, y, add);
#if PAIRS
  } else if (bf16) {
    gemv_pairs(x, count, p->packed[m], in, out, y, add, xp);
#endif
  } else {
    (void)xp;
    gemv(x, count, p->packed[m], in, out, y, add, bf16);
  }
}

/* The step, with the element type `bf16` a constant once inlined (`coa_row_step`). */
INLINE int row_step(const int64_t *ids, const row_set *set, const float *embed, const projections *mats,
                    const float *const *norms, const float *rope_cos, const float *rope_sin, void *const *keys,
                    void *const *values, int64_t key_row, int64_t key_head, int64_t value_row, int64_t value_head,
                    const shared_prefix *prefix, int64_t layers, int64_t dim, int64_t heads, int64_t hidden,
                    int64_t vocab, float eps, const int64_t *select, int64_t selected, float *logits, int threads,
                    int attention_threads, const int bf16) {
  const int64_t d = dim / heads;
  const int shift = bf16 ? 1 : 2; /* bytes per cache element: 1 << shift */
  int64_t T = 0;
  for (int64_t r = 0; r < set->rows; r++) T += set->counts[r];
  /* Many ids: the layers' products by the BLAS, outside any region of ours. Then, and on one thread, the
   * attention is one call a layer for all rows, its arguments over the cache's rows up to the last that
   * feeds (those that do not: no queries, no positions): its jobs fetch the next one's keys while they
   * weigh values, which a call per row and head cannot (32 bf16 `tiny` rows at 300-650 positions, one
   * thread: 4.88 -> 4.49 ms, the same bits). */
  const int batched = mats->sgemm && T >= mats->gemm_from;
  const int64_t span = batched || threads == 1 ? set->index[set->rows - 1] + 1 : 0;
  /* Per id: the stream x, q k v, the attention's output (also per head, `by_head`, without the one call), the
   * gate and up projections and SwiGLU's product of them; then its norm, one copy per thread of the region
   * (`normed`: every thread computes the norms itself rather than one computing them while the others
   * wait at a barrier; the first copy also holds the last norm). Then per id its position and its row's
   * offsets in the cache, per row its first id and its positions after the step, and the one call's
   * arguments. */
  const int64_t copies = batched ? 1 : threads, by_head_floats = span ? 0 : T * dim;
  float *buffer = malloc(sizeof(float) *
                         (size_t)(T * (dim + 3 * dim + dim + 2 * hidden + hidden) + by_head_floats + copies * T * dim));
  int64_t *where = malloc(sizeof(int64_t) * (size_t)(3 * T + 2 * set->rows + 3 * span + 1));
  /* With AVX512-BF16, per thread its inputs as pairs of bf16 (`gemv_pairs`), for the widest input. */
  const int64_t widest = (hidden > dim ? hidden : dim) + 1;
  uint32_t *pairs = bf16 && PAIRS ? malloc(sizeof(uint32_t) * (size_t)(copies * T * (widest / 2))) : NULL;
  if (!buffer || !where || (bf16 && PAIRS && !pairs)) return free(buffer), free(where), free(pairs), -1;
  float *x = buffer, *qkv = x + T * dim, *attended = qkv + T * 3 * dim, *by_head = attended + T * dim;
  float *gate_up = by_head + by_head_floats, *swiglu = gate_up + T * 2 * hidden, *normed = swiglu + T * hidden;
  int64_t *position = where, *key_at = position + T, *value_at = key_at + T, *first = value_at + T, *end = first + set->rows;
  int64_t *all_ends = end + set->rows, *all_counts = all_ends + span, *all_shared = all_counts + span;
  memset(all_ends, 0, sizeof(int64_t) * (size_t)(3 * span));
  for (int64_t r = 0, t = 0; r < set->rows; r++) {
    first[r] = t;
    end[r] = set->starts[r] + set->counts[r];
    if (span) {
      all_ends[set->index[r]] = end[r];
      all_counts[set->index[r]] = set->counts[r];
      all_shared[set->index[r]] = set->shared ? set->shared[r] : 0;
    }
    for (int64_t j = 0; j < set->counts[r]; j++, t++) {
      position[t] = set->starts[r] + j;
      key_at[t] = set->index[r] * key_row;
      value_at[t] = set->index[r] * value_row;
    }
  }
  for (int64_t t = 0; t < T; t++) memcpy(x + t * dim, embed + ids[t] * dim, sizeof(float) * (size_t)dim);
  const float scale = 1.0f / sqrtf((float)d);
  int failed = 0;
  /* With the BLAS no region of our own: its products run on its pool, the attention on its threads.
   * Otherwise, for a few ids, the region's barriers are much of its cost on many cores: six a layer, one
   * after each product, the attention and SwiGLU (ten before the norms went to every thread and the
   * rotation and cache writes into the attention's jobs; docs/engine.md). */
#pragma omp parallel num_threads(threads) if (threads > 1 && !batched)
  {
    const int64_t thread = thread_number();
    float *mine = normed + thread * T * dim;
    uint32_t *my_pairs = pairs ? pairs + thread * T * (widest / 2) : NULL;
    for (int64_t l = 0; l < layers; l++) {
      char *layer_keys = keys[l], *layer_values = values[l];
      const char *layer_shared_keys = set->shared ? prefix->keys[l] : NULL;
      const char *layer_shared_values = set->shared ? prefix->values[l] : NULL;
      for (int64_t t = 0; t < T; t++) rms_norm(x + t * dim, norms[2 * l], dim, eps, mine + t * dim, bf16);
      project(mats, batched, 4 * l, mine, T, dim, 3 * dim, qkv, 0, bf16, my_pairs);
      if (span) {
        /* One thread here (the region is inactive): every id's rotation and cache writes, then every
         * row and head in one call, straight into attended [T, heads, d]. */
        for (int64_t t = 0; t < T; t++)
          for (int64_t h = 0; h < heads; h++)
            place_head(qkv + t * 3 * dim, h, dim, d, position[t], rope_cos, rope_sin, layer_keys, layer_values,
                       key_at[t] + h * key_head, value_at[t] + h * value_head, bf16);
        if (coa_attend_rows(qkv, layer_keys, layer_values, attended, all_ends, all_counts, span, heads, d, 3 * dim, d,
                            key_row, key_head, value_row, value_head, layer_shared_keys, layer_shared_values,
                            set->shared ? all_shared : NULL, prefix->head, scale, attention_threads, bf16))
          failed = 1;
        if (bf16) /* rounded as the per-head path rounds it (dim: whole vectors, as the kernel's d) */
          for (int64_t i = 0; i < T * dim; i += 8) _mm256_storeu_ps(attended + i, round_bf16(_mm256_loadu_ps(attended + i)));
      } else {
        /* Each row and head: its ids' rotation and cache writes for that head, then their queries (3 dim
         * apart) into by_head [heads, T, d], then into attended [T, dim]. */
#pragma omp for schedule(static)
        for (int64_t job = 0; job < set->rows * heads; job++) {
          const int64_t r = job / heads, h = job % heads, t = first[r];
          for (int64_t j = t; j < t + set->counts[r]; j++)
            place_head(qkv + j * 3 * dim, h, dim, d, position[j], rope_cos, rope_sin, layer_keys, layer_values,
                       key_at[j] + h * key_head, value_at[j] + h * value_head, bf16);
          const int64_t s = set->shared ? set->shared[r] : 0;
          if (coa_attend_rows(qkv + t * 3 * dim + h * d, layer_keys + ((key_at[t] + h * key_head) << shift),
                              layer_values + ((value_at[t] + h * value_head) << shift), by_head + (h * T + t) * d,
                              end + r, set->counts + r, 1, 1, d, 3 * dim, d, 0, key_head, 0, value_head,
                              s ? layer_shared_keys + ((h * prefix->head) << shift) : NULL,
                              s ? layer_shared_values + ((h * prefix->head) << shift) : NULL, s ? &s : NULL, 0, scale,
                              1, bf16))
            failed = 1;
          for (int64_t j = t; j < t + set->counts[r]; j++)
            for (int64_t c = 0; c < d; c++) {
              const float y = by_head[(h * T + j) * d + c];
              attended[j * dim + h * d + c] = bf16 ? round1_bf16(y) : y;
            }
        }
      }
      project(mats, batched, 4 * l + 1, attended, T, dim, dim, x, 1, bf16, my_pairs);
      for (int64_t t = 0; t < T; t++) rms_norm(x + t * dim, norms[2 * l + 1], dim, eps, mine + t * dim, bf16);
      project(mats, batched, 4 * l + 2, mine, T, dim, 2 * hidden, gate_up, 0, bf16, my_pairs);
      swiglu_rows(gate_up, T, hidden, swiglu, bf16);
      project(mats, batched, 4 * l + 3, swiglu, T, hidden, dim, x, 1, bf16, my_pairs);
    }
  }
  /* Only the selected ids' logits (all without `select`): the last norm and the output matrix for them. */
  const int64_t S = select ? selected : T;
  for (int64_t i = 0; i < S; i++)
    rms_norm(x + (select ? select[i] : i) * dim, norms[2 * layers], dim, eps, normed + i * dim, bf16);
  /* A prompt's last id beside a few rows: the output matrix by `gemv` (the BLAS would pack all of it). */
  const int output_gemm = batched && S >= mats->gemm_from;
#pragma omp parallel num_threads(threads) if (threads > 1 && !output_gemm)
  project(mats, output_gemm, 4 * layers, normed, S, dim, vocab, logits, 0, bf16,
          pairs ? pairs + thread_number() * T * (widest / 2) : NULL);
  free(buffer);
  free(where);
  free(pairs);
  return failed ? -1 : 0;
}

/* The step of rows feeding a few ids or, with `sgemm` (fp32), any number: row r (cache row index[r],
 * ascending) feeds counts[r] ids (its next id, a speculative step's draft after it, or a prompt's new ids)
 * from position starts[r] on, the rows' ids one after another in `ids`; their keys and values are written
 * there, each id attending to its row's positions before it and itself; logits [selected, vocab] of the
 * ids at the flat positions `select` (NULL: all, sum(counts)) out (fp32; bf16 values with `bf16`).
 * `packed`: per layer its qkv [dim, 3 dim], out [dim, dim], gate_up [dim, 2 hidden] and down [hidden,
 * dim] matrices, then the output [dim, vocab], each packed (`gemv`), fp32 or with `bf16` bf16; with
 * `sgemm` (NULL: `gemv` only; fp32), `plain`: the same matrices [in, out] fp32, row-major, multiplied by
 * it for `gemm_from` inputs or more (all ids of the step, the selected ones); `norms`: per layer its
 * attention's and feed-forward's weights, then the last (fp32); `embed` [vocab, dim] and `rope_cos`,
 * `rope_sin` [positions, head_dim / 2] fp32; `keys[l]`, `values[l]`: layer l's [rows, heads, positions,
 * head_dim], fp32 or with `bf16` bf16, rows and heads the given numbers of elements apart. With `shared`
 * (else NULL), row r reads its first shared[r] positions from `shared_keys[l]` and `shared_values[l]`
 * (`coa_attend_rows`). `threads`: the step's own (with `gemv`), `attention_threads`: the attention's
 * (with the BLAS). Returns 0, or -1 if a buffer could not be allocated. */
int coa_row_step(const int64_t *ids, int64_t rows, const int64_t *index, const int64_t *counts,
                 const int64_t *starts, const float *embed, const void *const *packed, const float *const *plain,
                 sgemm_fn sgemm, int64_t gemm_from, const float *const *norms, const float *rope_cos,
                 const float *rope_sin, void *const *keys, void *const *values, int64_t key_row, int64_t key_head,
                 int64_t value_row, int64_t value_head, const void *const *shared_keys,
                 const void *const *shared_values, const int64_t *shared, int64_t shared_head, int64_t layers,
                 int64_t dim, int64_t heads, int64_t hidden, int64_t vocab, float eps, const int64_t *select,
                 int64_t selected, float *logits, int threads, int attention_threads, int bf16) {
  const row_set set = {rows, index, counts, starts, shared};
  const shared_prefix prefix = {shared_keys, shared_values, shared_head};
  const projections mats = {packed, plain, bf16 ? NULL : sgemm, gemm_from};
  if (bf16)
    return row_step(ids, &set, embed, &mats, norms, rope_cos, rope_sin, keys, values, key_row, key_head, value_row,
                    value_head, &prefix, layers, dim, heads, hidden, vocab, eps, select, selected, logits, threads,
                    attention_threads, 1);
  return row_step(ids, &set, embed, &mats, norms, rope_cos, rope_sin, keys, values, key_row, key_head, value_row,
                  value_head, &prefix, layers, dim, heads, hidden, vocab, eps, select, selected, logits, threads,
                  attention_threads, 0);
}
