/* A whole decode step of one row in fp32 on a CPU: the model's every layer for one new token, from its id
 * to its logits, in one call (row_step.py loads it; model.py's `decode_tokens` is the same arithmetic in
 * torch ops and what every other step runs).
 *
 * Why: a one-row step of `tiny` reads 17 MB of weights, ~0.4 ms at this project's CPUs' cache rates, but
 * took 2.2-2.8 ms through TorchScript on a 2-core AVX2 EPYC: ~200 torch ops and five calls of the fused
 * attention through Python, each costing more than its arithmetic (docs/engine.md). Here the step is
 * matrix-vector products over the decode layout's [in, out] matrices, the norms, rotation and SwiGLU in
 * plain loops, and the attention by `coa_attend_rows` (attention.c) over the row's own positions.
 *
 * Arithmetic: that of `decode_tokens` in fp32 (RMSNorm, rotary halves, softmax attention scaled by
 * 1/sqrt(head_dim), SwiGLU, residual adds, tied output), with sums in another order: logits agree to
 * about 1e-5 (tested). */
#if !defined(__AVX2__) || !defined(__FMA__)
#error "the one-row step needs AVX2 and FMA; the engine decodes in torch ops instead"
#endif
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int coa_attend_rows(const float *q, const void *keys, const void *values, float *out, const int64_t *ends,
                    const int64_t *counts, int64_t rows, int64_t heads, int64_t d, int64_t q_position, int64_t q_head,
                    int64_t key_row, int64_t key_head, int64_t value_row, int64_t value_head, float scale,
                    int threads, int bf16);

/* Columns per block of a packed matrix: a block's accumulators fill 8 of AVX2's 16 registers. */
#define BLOCK 64

/* y[t] = x[t] w, or with `add` y[t] += x[t] w, for `count` inputs x [count, in] and w [in, out] packed in
 * blocks of BLOCK columns ([blocks, in, BLOCK], the last block padded with zeros: row_step.py's `packed`),
 * so that each block is one contiguous stream: read by columns of the [in, out] layout (rows `out` apart)
 * the same products ran at 9-10 GB/s on one core of a 2-core AVX2 EPYC, packed at 16-19 (docs/engine.md).
 * A block is read from memory for the first input and from the core's L2 for the others. The blocks are
 * shared among the threads of the enclosing parallel region (all on the caller's outside one), and the
 * call ends with their barrier. */
static void gemv(const float *x, int64_t count, const float *w, int64_t in, int64_t out, float *y, const int add) {
#pragma omp for schedule(static)
  for (int64_t block = 0; block < (out + BLOCK - 1) / BLOCK; block++) {
    const float *stream = w + block * in * BLOCK;
    const int64_t first = block * BLOCK, last = first + BLOCK < out ? first + BLOCK : out;
    for (int64_t t = 0; t < count; t++) {
      const float *xt = x + t * in;
      float *yt = y + t * out;
      __m256 a[BLOCK / 8];
      for (int j = 0; j < BLOCK / 8; j++) a[j] = _mm256_setzero_ps();
      for (int64_t i = 0; i < in; i++) {
        const __m256 xi = _mm256_broadcast_ss(xt + i);
        for (int j = 0; j < BLOCK / 8; j++) a[j] = _mm256_fmadd_ps(xi, _mm256_loadu_ps(stream + i * BLOCK + 8 * j), a[j]);
      }
      float sums[BLOCK];
      for (int j = 0; j < BLOCK / 8; j++) _mm256_storeu_ps(sums + 8 * j, a[j]);
      for (int64_t c = first; c < last; c++) yt[c] = add ? yt[c] + sums[c - first] : sums[c - first];
    }
  }
}

/* out = x / sqrt(mean(x^2) + eps) * weight, as model.py's `rms_norm`. */
static void rms_norm(const float *x, const float *weight, int64_t n, float eps, float *out) {
  float squares = 0.0f;
  for (int64_t i = 0; i < n; i++) squares += x[i] * x[i];
  const float r = 1.0f / sqrtf(squares / (float)n + eps);
  for (int64_t i = 0; i < n; i++) out[i] = x[i] * r * weight[i];
}

/* Each head's two halves rotated by the position's angles (model.py's `rotate`), in place. */
static void rotate(float *x, int64_t heads, int64_t d, const float *cos, const float *sin) {
  const int64_t half = d / 2;
  for (int64_t h = 0; h < heads; h++) {
    float *a = x + h * d, *b = a + half;
    for (int64_t c = 0; c < half; c++) {
      const float x1 = a[c], x2 = b[c];
      a[c] = x1 * cos[c] - x2 * sin[c];
      b[c] = x1 * sin[c] + x2 * cos[c];
    }
  }
}

/* The step of one row: `count` ids from position `pos` on (a speculative step's last id and its draft;
 * their keys and values written there, each attending to the positions before it and itself), logits
 * [count, vocab] out. `mats`: per layer its qkv [dim, 3 dim], out [dim, dim], gate_up [dim, 2 hidden] and
 * down [hidden, dim] matrices, then the output [dim, vocab], each packed (`gemv`); `norms`: per layer its
 * attention's and feed-forward's weights, then the last; `rope_cos`, `rope_sin`: [positions, head_dim /
 * 2]; `keys[l]`, `values[l]`: the row's [heads, positions, head_dim] of layer l, heads `key_head` and
 * `value_head` apart. Returns 0, or -1 if a buffer could not be allocated. */
int coa_row_step(const int64_t *ids, int64_t count, int64_t pos, const float *embed, const float *const *mats,
                 const float *const *norms, const float *rope_cos, const float *rope_sin, float *const *keys,
                 float *const *values, int64_t key_head, int64_t value_head, int64_t layers, int64_t dim,
                 int64_t heads, int64_t hidden, int64_t vocab, float eps, float *logits, int threads) {
  const int64_t d = dim / heads, half = d / 2, T = count;
  /* Per id: the stream x, its norm, q k v, the attention's output (also per head: `by_head`), the gate
   * and up projections, and SwiGLU's product of them. */
  float *buffer = malloc(sizeof(float) * (size_t)(T * (dim + dim + 3 * dim + dim + dim + 2 * hidden + hidden)));
  if (!buffer) return -1;
  float *x = buffer, *normed = x + T * dim, *qkv = normed + T * dim, *attended = qkv + T * 3 * dim;
  float *by_head = attended + T * dim, *gate_up = by_head + T * dim, *swiglu = gate_up + T * 2 * hidden;
  for (int64_t t = 0; t < T; t++) memcpy(x + t * dim, embed + ids[t] * dim, sizeof(float) * (size_t)dim);
  const int64_t end = pos + T;
  int failed = 0;
#pragma omp parallel num_threads(threads) if (threads > 1)
  for (int64_t l = 0; l < layers; l++) {
    const float *const *m = mats + 4 * l;
#pragma omp single
    for (int64_t t = 0; t < T; t++) rms_norm(x + t * dim, norms[2 * l], dim, eps, normed + t * dim);
    gemv(normed, T, m[0], dim, 3 * dim, qkv, 0);
#pragma omp single
    for (int64_t t = 0; t < T; t++) {
      float *row = qkv + t * 3 * dim;
      /* queries and keys (the first 2 dim) by their position's angles */
      rotate(row, 2 * heads, d, rope_cos + (pos + t) * half, rope_sin + (pos + t) * half);
      for (int64_t h = 0; h < heads; h++) {
        memcpy(keys[l] + h * key_head + (pos + t) * d, row + dim + h * d, sizeof(float) * (size_t)d);
        memcpy(values[l] + h * value_head + (pos + t) * d, row + 2 * dim + h * d, sizeof(float) * (size_t)d);
      }
    }
    /* Each head's T queries (3 dim apart) into by_head [heads, T, d], then into attended [T, dim]. */
#pragma omp for schedule(static)
    for (int64_t h = 0; h < heads; h++)
      if (coa_attend_rows(qkv + h * d, keys[l] + h * key_head, values[l] + h * value_head, by_head + h * T * d,
                          &end, &T, 1, 1, d, 3 * dim, d, 0, key_head, 0, value_head, 1.0f / sqrtf((float)d), 1, 0))
        failed = 1;
#pragma omp single
    for (int64_t h = 0; h < heads; h++)
      for (int64_t t = 0; t < T; t++)
        memcpy(attended + t * dim + h * d, by_head + (h * T + t) * d, sizeof(float) * (size_t)d);
    gemv(attended, T, m[1], dim, dim, x, 1);
#pragma omp single
    for (int64_t t = 0; t < T; t++) rms_norm(x + t * dim, norms[2 * l + 1], dim, eps, normed + t * dim);
    gemv(normed, T, m[2], dim, 2 * hidden, gate_up, 0);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < T * hidden; i++) {
      const float *row = gate_up + (i / hidden) * 2 * hidden;
      const float g = row[i % hidden];
      swiglu[i] = g / (1.0f + expf(-g)) * row[hidden + i % hidden];
    }
    gemv(swiglu, T, m[3], hidden, dim, x, 1);
  }
  for (int64_t t = 0; t < T; t++) rms_norm(x + t * dim, norms[2 * layers], dim, eps, normed + t * dim);
#pragma omp parallel num_threads(threads) if (threads > 1)
  gemv(normed, T, mats[4 * layers], dim, vocab, logits, 0);
  free(buffer);
  return failed ? -1 : 0;
}
