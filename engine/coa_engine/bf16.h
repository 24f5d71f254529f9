/* fp32 and bf16 elements for the engine's kernels (attention.c, row_step.c): each helper takes the
 * element type as a constant `bf16` (0: fp32), so that once inlined a loop over one type has no branch.
 * A bf16 is the upper half of the fp32 of the same value: widening is a shift, rounding an add and a
 * mask, and AVX2 suffices for both. */
#ifndef COA_BF16_H
#define COA_BF16_H
#include <immintrin.h>
#include <stdint.h>

#define INLINE static inline __attribute__((always_inline))

/* Eight elements from i on, as fp32 (a bf16 is the upper half of the fp32 of the same value). */
INLINE __m256 load8(const void *base, int64_t i, const int bf16) {
  if (!bf16) return _mm256_loadu_ps((const float *)base + i);
  __m128i half = _mm_loadu_si128((const __m128i *)((const uint16_t *)base + i));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(half), 16));
}

INLINE float load1(const void *base, int64_t i, const int bf16) {
  if (!bf16) return ((const float *)base)[i];
  uint32_t bits = (uint32_t)((const uint16_t *)base)[i] << 16;
  float x;
  __builtin_memcpy(&x, &bits, sizeof x);
  return x;
}

/* Each lane rounded to the nearest bf16, ties to even (as torch rounds; the values here are finite). */
INLINE __m256 round_bf16(__m256 x) {
  __m256i bits = _mm256_castps_si256(x);
  __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  bits = _mm256_add_epi32(bits, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd));
  return _mm256_castsi256_ps(_mm256_and_si256(bits, _mm256_set1_epi32((int)0xffff0000u)));
}

INLINE float round1_bf16(float x) { return _mm256_cvtss_f32(round_bf16(_mm256_set1_ps(x))); }

/* x rounded to bf16, as the 16 bits a bf16 tensor stores. */
INLINE uint16_t bf16_bits(float x) {
  uint32_t bits;
  float rounded = round1_bf16(x);
  __builtin_memcpy(&bits, &rounded, sizeof bits);
  return (uint16_t)(bits >> 16);
}

#endif
