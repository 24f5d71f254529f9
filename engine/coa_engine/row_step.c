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

/* y = x w, or with `add` y += x w, for x [in] and w [in, out] packed in blocks of BLOCK columns ([blocks, in,
 * BLOCK], the last block padded with zeros: row_step.py's `packed`), so that each block is one contiguous
 * stream: read by columns of the [in, out] layout (rows `out` apart) the same products ran at 9-10 GB/s
 * on one core of a 2-core AVX2 EPYC, packed at 16-19 (docs/engine.md). The blocks are shared among the
 * threads of the enclosing parallel region (all on the caller's outside one), and the call ends with
 * their barrier. */
static void gemv(const float *x, const float *w, int64_t in, int64_t out, float *y, const int add) {
#pragma omp for schedule(static)
  for (int64_t block = 0; block < (out + BLOCK - 1) / BLOCK; block++) {
    const float *stream = w + block * in * BLOCK;
    __m256 a[BLOCK / 8];
    for (int j = 0; j < BLOCK / 8; j++) a[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < in; i++) {
      const __m256 xi = _mm256_broadcast_ss(x + i);
      for (int j = 0; j < BLOCK / 8; j++) a[j] = _mm256_fmadd_ps(xi, _mm256_loadu_ps(stream + i * BLOCK + 8 * j), a[j]);
    }
    float sums[BLOCK];
    for (int j = 0; j < BLOCK / 8; j++) _mm256_storeu_ps(sums + 8 * j, a[j]);
    const int64_t first = block * BLOCK, last = first + BLOCK < out ? first + BLOCK : out;
    for (int64_t c = first; c < last; c++) y[c] = add ? y[c] + sums[c - first] : sums[c - first];
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

/* The step of one row: token `id` at position `pos` (its keys and values written there), logits [vocab]
 * out. `mats`: per layer its qkv [dim, 3 dim], out [dim, dim], gate_up [dim, 2 hidden] and down [hidden,
 * dim] matrices, then the output [dim, vocab], each packed (`gemv`); `norms`: per layer its attention's and feed-forward's
 * weights, then the last; `rope_cos`, `rope_sin`: [positions, head_dim / 2]; `keys[l]`, `values[l]`: the
 * row's [heads, positions, head_dim] of layer l, heads `key_head` and `value_head` apart. Returns 0, or
 * -1 if a buffer could not be allocated. */
int coa_row_step(int64_t id, int64_t pos, const float *embed, const float *const *mats, const float *const *norms,
                 const float *rope_cos, const float *rope_sin, float *const *keys, float *const *values,
                 int64_t key_head, int64_t value_head, int64_t layers, int64_t dim, int64_t heads, int64_t hidden,
                 int64_t vocab, float eps, float *logits, int threads) {
  const int64_t d = dim / heads, half = d / 2;
  float *buffer = malloc(sizeof(float) * (size_t)(3 * dim + 3 * dim + dim + 2 * hidden));
  if (!buffer) return -1;
  float *x = buffer, *normed = x + dim, *qkv = normed + dim, *attended = qkv + 3 * dim, *gate_up = attended + dim;
  memcpy(x, embed + id * dim, sizeof(float) * (size_t)dim);
  const float *cos = rope_cos + pos * half, *sin = rope_sin + pos * half;
  const int64_t end = pos + 1, one = 1;
  int failed = 0;
#pragma omp parallel num_threads(threads) if (threads > 1)
  for (int64_t l = 0; l < layers; l++) {
    const float *const *m = mats + 4 * l;
#pragma omp single
    rms_norm(x, norms[2 * l], dim, eps, normed);
    gemv(normed, m[0], dim, 3 * dim, qkv, 0);
#pragma omp single
    {
      rotate(qkv, 2 * heads, d, cos, sin); /* queries and keys: the first 2 dim */
      for (int64_t h = 0; h < heads; h++) {
        memcpy(keys[l] + h * key_head + pos * d, qkv + dim + h * d, sizeof(float) * (size_t)d);
        memcpy(values[l] + h * value_head + pos * d, qkv + 2 * dim + h * d, sizeof(float) * (size_t)d);
      }
    }
#pragma omp for schedule(static)
    for (int64_t h = 0; h < heads; h++)
      if (coa_attend_rows(qkv + h * d, keys[l] + h * key_head, values[l] + h * value_head, attended + h * d, &end,
                          &one, 1, 1, d, 3 * dim, d, 0, key_head, 0, value_head, 1.0f / sqrtf((float)d), 1, 0))
        failed = 1;
    gemv(attended, m[1], dim, dim, x, 1);
#pragma omp single
    rms_norm(x, norms[2 * l + 1], dim, eps, normed);
    gemv(normed, m[2], dim, 2 * hidden, gate_up, 0);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < hidden; i++) {
      const float g = gate_up[i];
      gate_up[i] = g / (1.0f + expf(-g)) * gate_up[hidden + i];
    }
    gemv(gate_up, m[3], hidden, dim, x, 1);
  }
  rms_norm(x, norms[2 * layers], dim, eps, normed);
#pragma omp parallel num_threads(threads) if (threads > 1)
  gemv(normed, mats[4 * layers], dim, vocab, logits, 0);
  free(buffer);
  return failed ? -1 : 0;
}
