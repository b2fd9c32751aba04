// The per-ISA part of the sort: the two scans of libstdc++'s unguarded partition over packed
// (key << 32 | position) elements, found a vector at a time instead of one branch per element.
// They stop at exactly the element the scalar loops stop at, so the partition makes the same swaps.
//
// first_not_below(p, t): the first q >= p with *q >= t.  last_not_above(p, t): the last q <= p
// with *q <= t. The caller guarantees such an element exists; loads may touch up to 7 elements past
// it (the work buffers have kPad elements of slack).
// Included inside namespace kwker::sort_detail::<isa> by sort_<isa>.cc.

#if defined(KWKER_ISA_AVX512)

inline uint64_t* first_not_below(uint64_t* p, uint64_t t) {
  const __m512i threshold = _mm512_set1_epi64(static_cast<long long>(t));
  for (;; p += 8) {
    const __mmask8 below = _mm512_cmplt_epu64_mask(_mm512_loadu_si512(p), threshold);
    if (below != 0xFF) return p + __builtin_ctz(~unsigned{below});
  }
}

inline uint64_t* last_not_above(uint64_t* p, uint64_t t) {
  const __m512i threshold = _mm512_set1_epi64(static_cast<long long>(t));
  for (p -= 7;; p -= 8) {
    const __mmask8 above = _mm512_cmpgt_epu64_mask(_mm512_loadu_si512(p), threshold);
    if (above != 0xFF) return p + (31 - __builtin_clz(~unsigned{above} & 0xFFu));
  }
}

#elif defined(KWKER_ISA_AVX2)

// AVX2 compares 64-bit lanes as signed only: flipping the top bit of both sides orders them unsigned.
inline __m256i biased(__m256i v) {
  return _mm256_xor_si256(v, _mm256_set1_epi64x(static_cast<long long>(0x8000000000000000ull)));
}

inline unsigned lane_mask(__m256i v) {
  return static_cast<unsigned>(_mm256_movemask_pd(_mm256_castsi256_pd(v)));
}

inline uint64_t* first_not_below(uint64_t* p, uint64_t t) {
  const __m256i threshold = biased(_mm256_set1_epi64x(static_cast<long long>(t)));
  for (;; p += 4) {
    const __m256i v = biased(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    const unsigned below = lane_mask(_mm256_cmpgt_epi64(threshold, v));
    if (below != 0xF) return p + __builtin_ctz(~below);
  }
}

inline uint64_t* last_not_above(uint64_t* p, uint64_t t) {
  const __m256i threshold = biased(_mm256_set1_epi64x(static_cast<long long>(t)));
  for (p -= 3;; p -= 4) {
    const __m256i v = biased(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    const unsigned above = lane_mask(_mm256_cmpgt_epi64(v, threshold));
    if (above != 0xF) return p + (31 - __builtin_clz(~above & 0xFu));
  }
}

#else

inline uint64_t* first_not_below(uint64_t* p, uint64_t t) {
  while (*p < t) ++p;
  return p;
}

inline uint64_t* last_not_above(uint64_t* p, uint64_t t) {
  while (*p > t) --p;
  return p;
}

#endif
