// The per-ISA part of the sort, on packed (key << 32 | position) elements. Included inside
// namespace kwker::sort_detail::<isa> by sort_<isa>.cc.
//
// not_below_mask64(p, t): bit i set iff p[i] >= t, for p[0..63].
// not_above_mask64_reversed(p, t): bit i set iff p[63 - i] <= t, for p[0..63]: the right front walks
//                          down, and a reversed mask lets it find its next stop with tzcnt/blsr,
//                          whose short latency keeps the partition loop from waiting on lzcnt.
// not_below_mask64_wide / not_above_mask64_wide_reversed: the same over the keys of 64 (key,
//                          position) pairs, i.e. p[2 * i] for i in [0, 64).
// stable_sort_leaf<kByWholeElement>(a, n): sorts a[0..n), n <= 16, by key (the high half) keeping
//                          the order of equal keys, or by the whole (unique) element. Vector variants
//                          rank each element by (key, position in the leaf), or by itself.

#if defined(KWKER_ISA_AVX512)

inline uint64_t not_below_mask64(const uint64_t* p, uint64_t t) {
  const __m512i threshold = _mm512_set1_epi64(static_cast<long long>(t));
  uint64_t bits = 0;
  for (int v = 0; v < 8; ++v) {
    bits |= uint64_t{_mm512_cmpge_epu64_mask(_mm512_loadu_si512(p + 8 * v), threshold)} << (8 * v);
  }
  return bits;
}

inline uint64_t not_above_mask64_reversed(const uint64_t* p, uint64_t t) {
  const __m512i threshold = _mm512_set1_epi64(static_cast<long long>(t));
  const __m512i reverse = _mm512_set_epi64(0, 1, 2, 3, 4, 5, 6, 7);
  uint64_t bits = 0;
  for (int v = 0; v < 8; ++v) {
    // The maskz form: GCC 12 warns (falsely) about the unmasked one's undefined pass-through.
    const __m512i x = _mm512_maskz_permutexvar_epi64(0xFF, reverse, _mm512_loadu_si512(p + 8 * v));
    bits |= uint64_t{_mm512_cmple_epu64_mask(x, threshold)} << (8 * (7 - v));
  }
  return bits;
}

inline uint64_t not_below_mask64_wide(const uint64_t* p, uint64_t t) {
  const __m512i threshold = _mm512_set1_epi64(static_cast<long long>(t));
  const __m512i keys_of = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0);
  uint64_t bits = 0;
  for (int v = 0; v < 8; ++v) {
    const __m512i keys = _mm512_permutex2var_epi64(_mm512_loadu_si512(p + 16 * v), keys_of,
                                                   _mm512_loadu_si512(p + 16 * v + 8));
    bits |= uint64_t{_mm512_cmpge_epu64_mask(keys, threshold)} << (8 * v);
  }
  return bits;
}

inline uint64_t not_above_mask64_wide_reversed(const uint64_t* p, uint64_t t) {
  const __m512i threshold = _mm512_set1_epi64(static_cast<long long>(t));
  const __m512i keys_reversed = _mm512_set_epi64(0, 2, 4, 6, 8, 10, 12, 14);
  uint64_t bits = 0;
  for (int v = 0; v < 8; ++v) {
    const __m512i keys = _mm512_permutex2var_epi64(_mm512_loadu_si512(p + 16 * v), keys_reversed,
                                                   _mm512_loadu_si512(p + 16 * v + 8));
    bits |= uint64_t{_mm512_cmple_epu64_mask(keys, threshold)} << (8 * (7 - v));
  }
  return bits;
}

template <bool kByWholeElement>
inline void stable_sort_leaf(uint64_t* a, int64_t n) {
  const __mmask8 m0 = static_cast<__mmask8>(n >= 8 ? 0xFF : (1u << n) - 1);
  const __mmask8 m1 = static_cast<__mmask8>(n >= 16 ? 0xFF : n <= 8 ? 0 : (1u << (n - 8)) - 1);
  const __m512i key_mask = _mm512_set1_epi64(static_cast<long long>(0xFFFFFFFF00000000ull));
  const __m512i lanes = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i none = _mm512_set1_epi64(-1);  // absent lanes rank after every element
  const __m512i v0 = _mm512_maskz_loadu_epi64(m0, a), v1 = _mm512_maskz_loadu_epi64(m1, a + 8);
  __m512i r0 = v0, r1 = v1;
  if constexpr (!kByWholeElement) {
    r0 = _mm512_or_si512(_mm512_and_si512(v0, key_mask), lanes);
    r1 = _mm512_or_si512(_mm512_and_si512(v1, key_mask), _mm512_add_epi64(lanes, _mm512_set1_epi64(8)));
  }
  r0 = _mm512_mask_blend_epi64(m0, none, r0);
  r1 = _mm512_mask_blend_epi64(m1, none, r1);
  alignas(64) uint64_t ranked[16], out[16];
  _mm512_store_si512(ranked, r0);
  _mm512_store_si512(ranked + 8, r1);
  for (int64_t i = 0; i < n; ++i) {
    const __m512i r = _mm512_set1_epi64(static_cast<long long>(ranked[i]));
    const int rank = __builtin_popcount(_mm512_cmplt_epu64_mask(r0, r)) +
                     __builtin_popcount(_mm512_cmplt_epu64_mask(r1, r));
    out[rank] = a[i];
  }
  for (int64_t i = 0; i < n; ++i) a[i] = out[i];
}

#elif defined(KWKER_ISA_AVX2)

// AVX2 compares 64-bit lanes as signed only: flipping the top bit of both sides orders them unsigned.
inline __m256i biased(__m256i v) {
  return _mm256_xor_si256(v, _mm256_set1_epi64x(static_cast<long long>(0x8000000000000000ull)));
}

inline uint64_t lane_bits(__m256i v) {
  return static_cast<uint64_t>(_mm256_movemask_pd(_mm256_castsi256_pd(v)));
}

inline __m256i load_biased(const uint64_t* p) {
  return biased(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

inline uint64_t not_below_mask64(const uint64_t* p, uint64_t t) {
  const __m256i threshold = biased(_mm256_set1_epi64x(static_cast<long long>(t)));
  uint64_t below = 0;
  for (int v = 0; v < 16; ++v) below |= lane_bits(_mm256_cmpgt_epi64(threshold, load_biased(p + 4 * v))) << (4 * v);
  return ~below;
}

inline uint64_t not_above_mask64_reversed(const uint64_t* p, uint64_t t) {
  const __m256i threshold = biased(_mm256_set1_epi64x(static_cast<long long>(t)));
  uint64_t above = 0;
  for (int v = 0; v < 16; ++v) {
    const __m256i x = _mm256_permute4x64_epi64(load_biased(p + 4 * v), 0x1B);  // lanes reversed
    above |= lane_bits(_mm256_cmpgt_epi64(x, threshold)) << (4 * (15 - v));
  }
  return ~above;
}

// Keys of the four (key, position) pairs at p, in order (or reversed).
inline __m256i wide_keys(const uint64_t* p, bool reversed) {
  const __m256i mixed = _mm256_unpacklo_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
                                              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 4)));
  // mixed = k0 k2 k1 k3
  return reversed ? _mm256_permute4x64_epi64(mixed, 0x27) : _mm256_permute4x64_epi64(mixed, 0xD8);
}

inline uint64_t not_below_mask64_wide(const uint64_t* p, uint64_t t) {
  const __m256i threshold = biased(_mm256_set1_epi64x(static_cast<long long>(t)));
  uint64_t below = 0;
  for (int v = 0; v < 16; ++v) {
    below |= lane_bits(_mm256_cmpgt_epi64(threshold, biased(wide_keys(p + 8 * v, false)))) << (4 * v);
  }
  return ~below;
}

inline uint64_t not_above_mask64_wide_reversed(const uint64_t* p, uint64_t t) {
  const __m256i threshold = biased(_mm256_set1_epi64x(static_cast<long long>(t)));
  uint64_t above = 0;
  for (int v = 0; v < 16; ++v) {
    above |= lane_bits(_mm256_cmpgt_epi64(biased(wide_keys(p + 8 * v, true)), threshold)) << (4 * (15 - v));
  }
  return ~above;
}

template <bool kByWholeElement>
inline void stable_sort_leaf(uint64_t* a, int64_t n) {
  alignas(32) uint64_t ranked[16], out[16];
  for (int64_t i = 0; i < 16; ++i) {
    const uint64_t rank_key =
        kByWholeElement ? a[i] : (a[i] & 0xFFFFFFFF00000000ull) | static_cast<uint64_t>(i);
    ranked[i] = i < n ? rank_key : ~uint64_t{0};
  }
  __m256i r[4];
  for (int v = 0; v < 4; ++v) r[v] = biased(_mm256_load_si256(reinterpret_cast<const __m256i*>(ranked + 4 * v)));
  for (int64_t i = 0; i < n; ++i) {
    const __m256i x = biased(_mm256_set1_epi64x(static_cast<long long>(ranked[i])));
    uint64_t below = 0;
    for (int v = 0; v < 4; ++v) below |= lane_bits(_mm256_cmpgt_epi64(x, r[v])) << (4 * v);
    out[__builtin_popcountll(below)] = a[i];
  }
  for (int64_t i = 0; i < n; ++i) a[i] = out[i];
}

#else

inline uint64_t not_below_mask64(const uint64_t* p, uint64_t t) {
  uint64_t bits = 0;
  for (int i = 0; i < 64; ++i) bits |= uint64_t{p[i] >= t} << i;
  return bits;
}

inline uint64_t not_above_mask64_reversed(const uint64_t* p, uint64_t t) {
  uint64_t bits = 0;
  for (int i = 0; i < 64; ++i) bits |= uint64_t{p[63 - i] <= t} << i;
  return bits;
}

inline uint64_t not_below_mask64_wide(const uint64_t* p, uint64_t t) {
  uint64_t bits = 0;
  for (int i = 0; i < 64; ++i) bits |= uint64_t{p[2 * i] >= t} << i;
  return bits;
}

inline uint64_t not_above_mask64_wide_reversed(const uint64_t* p, uint64_t t) {
  uint64_t bits = 0;
  for (int i = 0; i < 64; ++i) bits |= uint64_t{p[2 * (63 - i)] <= t} << i;
  return bits;
}

template <bool kByWholeElement>
inline void stable_sort_leaf(uint64_t* a, int64_t n) {
  const int shift = kByWholeElement ? 0 : 32;
  for (int64_t i = 1; i < n; ++i) {
    const uint64_t v = a[i];
    int64_t j = i;
    for (; j > 0 && (v >> shift) < (a[j - 1] >> shift); --j) a[j] = a[j - 1];
    a[j] = v;
  }
}

#endif
