// The per-ISA part of the sort. Included inside namespace kwker::sort_detail::<isa> by
// sort_<isa>.cc.
//
// stop_mask64<kStops, kPairs, kReversed>(p, t): bit i set iff the i-th of 64 keys at p compares with
//                          t as kStops says (kNotBelow: key >= t, kNotAbove: key <= t). The keys are
//                          p[0..63], or the keys of 64 (key, position) pairs (kPairs: p[2 * i]);
//                          kReversed counts them from the end: the right front of the partition walks
//                          down, and a reversed mask lets it find its next stop with tzcnt/blsr, whose
//                          short latency keeps the partition loop from waiting on lzcnt.
// not_after_mask64<kDescending>(v, t): bit i set iff the float or double v[i] is not after t in the
//                          order (ascending: !(v[i] > t), descending: !(v[i] < t)); so a NaN on
//                          either side sets it. topk's heap offers only these elements.
// swap_block_with_reversed64(a, b): swaps a[i] with b[63 - i] for i in [0, 64); a and b are disjoint.
// partition_below(in, n, pivot, out): copies the elements (uint64 or uint32) of in[0..n) less than
//                          `pivot` to out[0, b) and the others to out[b + 16, n + 16), in no
//                          particular order; returns b. The parts grow towards each other, a vector
//                          at a time, from both ends of out[0, n + 16): the lanes of each store that
//                          belong to the other part land in the gap between them.
// keep_between(keys, n, lo, width, first, kept, positions): appends the uint32 or uint64 keys[i] with
//                          key - lo <= width (unsigned) to kept[0..), in order, and their uint32
//                          positions first + i to positions[0..); returns how many. May write up to 15 elements
//                          past the end of either.
// key_masks64<kCount>(keys, x, below, equal): bit j of *below (*equal) set iff keys[j] < x (== x), for
//                          j < kCount, a multiple of 16 up to 64; short rows of select rank by it.
// load_keys_tail(in, count, out): the 32-bit in[0..count), 0 < count < kKeysPerVector (16 for AVX-512,
//                          else 8), to out[0..count) and zeros to out[count..kKeysPerVector), by one
//                          whole-vector store (masked loads: nothing past in + count is read), so that
//                          a vector load of out is forwarded from the store (one of what narrower
//                          stores just wrote waits for them to reach the cache).
// KeyVector:              the kKeysPerVector 32-bit keys of a row that fits one vector, in a register;
//                          take_smallest() finds the smallest key, how many lanes hold it and the
//                          first, and sets those lanes to all ones (topk rows up to kKeysPerVector
//                          long take their k smallest so, with no store and reload of the keys between).
// stable_sort_leaf<kByWholeElement>(a, n): sorts a[0..n), n <= 16, by key (the high half) keeping
//                          the order of equal keys, or by the whole (unique) element. Vector variants
//                          rank each element by (key, position in the leaf), or by itself.

enum class Stops { kNotBelow, kNotAbove };

// How many elements have a key, and where the first is (-1: none).
struct KeyMatches {
  int64_t count, first;
};

// partition_below's and keep_between's element loops, from element i with the first counts already
// placed: the stores always happen, so there is no branch on the data. Every ISA's tail, and the
// scalar variant.
inline constexpr int64_t kPartitionGap = 16;

template <typename E>
inline int64_t partition_below_from(const E* in, int64_t i, int64_t n, E pivot, E* out, int64_t nb, int64_t na) {
  E* const top = out + n + kPartitionGap;
  for (; i < n; ++i) {
    const E x = in[i];
    out[nb] = x;
    top[-1 - na] = x;
    nb += x < pivot;
    na += !(x < pivot);
  }
  return nb;
}

template <typename K>
inline int64_t keep_between_from(const K* keys, int64_t i, int64_t n, K lo, K width, uint32_t first, K* kept,
                                 uint32_t* positions, int64_t count) {
  for (; i < n; ++i) {
    kept[count] = keys[i];
    positions[count] = first + static_cast<uint32_t>(i);
    count += static_cast<K>(keys[i] - lo) <= width;
  }
  return count;
}
// key_masks64's element loop, for keys of either width: the scalar variant, and uint64 keys (the
// bare-key select's leaves) on every ISA.
template <int kCount, typename K>
inline void key_masks64_by_element(const K* keys, K x, uint64_t* below, uint64_t* equal) {
  uint64_t b = 0, e = 0;
  for (int j = 0; j < kCount; ++j) {
    b |= uint64_t{keys[j] < x} << j;
    e |= uint64_t{keys[j] == x} << j;
  }
  *below = b;
  *equal = e;
}

#if defined(KWKER_ISA_AVX512)

template <Stops kStops, bool kPairs, bool kReversed>
inline uint64_t stop_mask64(const uint64_t* p, uint64_t t) {
  const __m512i threshold = _mm512_set1_epi64(static_cast<long long>(t));
  // Lane order within a vector: the pair-keys (even elements of two vectors), reversed or not.
  const __m512i order = kPairs ? (kReversed ? _mm512_set_epi64(0, 2, 4, 6, 8, 10, 12, 14)
                                            : _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0))
                               : _mm512_set_epi64(0, 1, 2, 3, 4, 5, 6, 7);
  uint64_t bits = 0;
  for (int v = 0; v < 8; ++v) {
    __m512i keys;
    if constexpr (kPairs) {
      keys = _mm512_permutex2var_epi64(_mm512_loadu_si512(p + 16 * v), order, _mm512_loadu_si512(p + 16 * v + 8));
    } else if constexpr (kReversed) {
      // The maskz form: GCC 12 warns (falsely) about the unmasked one's undefined pass-through.
      keys = _mm512_maskz_permutexvar_epi64(0xFF, order, _mm512_loadu_si512(p + 8 * v));
    } else {
      keys = _mm512_loadu_si512(p + 8 * v);
    }
    const __mmask8 m = kStops == Stops::kNotBelow ? _mm512_cmpge_epu64_mask(keys, threshold)
                                                  : _mm512_cmple_epu64_mask(keys, threshold);
    bits |= uint64_t{m} << (8 * (kReversed ? 7 - v : v));
  }
  return bits;
}

template <bool kDescending, typename Value>
inline uint64_t not_after_mask64(const Value* v, Value t) {
  constexpr int kPredicate = kDescending ? _CMP_NLT_UQ : _CMP_NGT_UQ;
  constexpr int kLanes = 64 / sizeof(Value);
  uint64_t bits = 0;
  for (int i = 0; i < 64 / kLanes; ++i) {
    uint64_t m;
    if constexpr (sizeof(Value) == 4) {
      m = _mm512_cmp_ps_mask(_mm512_loadu_ps(v + kLanes * i), _mm512_set1_ps(t), kPredicate);
    } else {
      m = _mm512_cmp_pd_mask(_mm512_loadu_pd(v + kLanes * i), _mm512_set1_pd(t), kPredicate);
    }
    bits |= m << (kLanes * i);
  }
  return bits;
}

inline void swap_block_with_reversed64(uint64_t* a, uint64_t* b) {
  const __m512i reverse = _mm512_set_epi64(0, 1, 2, 3, 4, 5, 6, 7);
  for (int v = 0; v < 4; ++v) {  // vectors v and 7 - v of each side trade places, lanes reversed
    const __m512i a_low = _mm512_loadu_si512(a + 8 * v), a_high = _mm512_loadu_si512(a + 56 - 8 * v);
    const __m512i b_low = _mm512_loadu_si512(b + 8 * v), b_high = _mm512_loadu_si512(b + 56 - 8 * v);
    _mm512_storeu_si512(a + 8 * v, _mm512_maskz_permutexvar_epi64(0xFF, reverse, b_high));
    _mm512_storeu_si512(a + 56 - 8 * v, _mm512_maskz_permutexvar_epi64(0xFF, reverse, b_low));
    _mm512_storeu_si512(b + 8 * v, _mm512_maskz_permutexvar_epi64(0xFF, reverse, a_high));
    _mm512_storeu_si512(b + 56 - 8 * v, _mm512_maskz_permutexvar_epi64(0xFF, reverse, a_low));
  }
}

inline int64_t partition_below(const uint64_t* in, int64_t n, uint64_t pivot, uint64_t* out) {
  const __m512i p = _mm512_set1_epi64(static_cast<long long>(pivot));
  uint64_t* const top = out + n + kPartitionGap;
  int64_t nb = 0, na = 0, i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m512i v = _mm512_loadu_si512(in + i);
    const __mmask8 m = _mm512_cmplt_epu64_mask(v, p);
    const int c = __builtin_popcount(m);
    // Compressed in a register, stored whole: the masked compress-store is slow on several cores. The
    // others go to the top c.. 7 lanes, the part above growing down.
    _mm512_storeu_si512(out + nb, _mm512_maskz_compress_epi64(m, v));
    _mm512_storeu_si512(top - na - 8, _mm512_maskz_expand_epi64(static_cast<__mmask8>(0xFFu << c),
                                                                 _mm512_maskz_compress_epi64(static_cast<__mmask8>(~m), v)));
    nb += c;
    na += 8 - c;
  }
  return partition_below_from(in, i, n, pivot, out, nb, na);
}

inline int64_t partition_below(const uint32_t* in, int64_t n, uint32_t pivot, uint32_t* out) {
  const __m512i p = _mm512_set1_epi32(static_cast<int>(pivot));
  uint32_t* const top = out + n + kPartitionGap;
  int64_t nb = 0, na = 0, i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i v = _mm512_loadu_si512(in + i);
    const __mmask16 m = _mm512_cmplt_epu32_mask(v, p);
    const int c = __builtin_popcount(m);
    _mm512_storeu_si512(out + nb, _mm512_maskz_compress_epi32(m, v));
    _mm512_storeu_si512(top - na - 16, _mm512_maskz_expand_epi32(static_cast<__mmask16>(0xFFFFu << c),
                                                                  _mm512_maskz_compress_epi32(static_cast<__mmask16>(~m), v)));
    nb += c;
    na += 16 - c;
  }
  return partition_below_from(in, i, n, pivot, out, nb, na);
}

inline int64_t keep_between(const uint32_t* keys, int64_t n, uint32_t lo, uint32_t width, uint32_t first,
                            uint32_t* kept, uint32_t* positions) {
  const __m512i low = _mm512_set1_epi32(static_cast<int>(lo)), w = _mm512_set1_epi32(static_cast<int>(width));
  __m512i at = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(first)),
                                _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  int64_t count = 0, i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i v = _mm512_loadu_si512(keys + i);
    const __mmask16 m = _mm512_cmple_epu32_mask(_mm512_sub_epi32(v, low), w);
    _mm512_storeu_si512(kept + count, _mm512_maskz_compress_epi32(m, v));
    _mm512_storeu_si512(positions + count, _mm512_maskz_compress_epi32(m, at));
    count += __builtin_popcount(m);
    at = _mm512_add_epi32(at, _mm512_set1_epi32(16));
  }
  return keep_between_from(keys, i, n, lo, width, first, kept, positions, count);
}

inline int64_t keep_between(const uint64_t* keys, int64_t n, uint64_t lo, uint64_t width, uint32_t first,
                            uint64_t* kept, uint32_t* positions) {
  const __m512i low = _mm512_set1_epi64(static_cast<long long>(lo)), w = _mm512_set1_epi64(static_cast<long long>(width));
  __m256i at = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(first)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  int64_t count = 0, i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m512i v = _mm512_loadu_si512(keys + i);
    const __mmask8 m = _mm512_cmple_epu64_mask(_mm512_sub_epi64(v, low), w);
    _mm512_storeu_si512(kept + count, _mm512_maskz_compress_epi64(m, v));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(positions + count), _mm256_maskz_compress_epi32(m, at));
    count += __builtin_popcount(m);
    at = _mm256_add_epi32(at, _mm256_set1_epi32(8));
  }
  return keep_between_from(keys, i, n, lo, width, first, kept, positions, count);
}

// Ranks by counting: a bitonic network over the 16 lanes measured slower (10 dependent layers).
template <int kCount>
inline void key_masks64(const uint32_t* keys, uint32_t x, uint64_t* below, uint64_t* equal) {
  const __m512i t = _mm512_set1_epi32(static_cast<int>(x));
  uint64_t b = 0, e = 0;
  for (int v = 0; v < kCount / 16; ++v) {
    const __m512i k = _mm512_loadu_si512(keys + 16 * v);
    b |= uint64_t{_mm512_cmplt_epu32_mask(k, t)} << (16 * v);
    e |= uint64_t{_mm512_cmpeq_epi32_mask(k, t)} << (16 * v);
  }
  *below = b;
  *equal = e;
}

inline constexpr int64_t kKeysPerVector = 16;

inline void load_keys_tail(const uint32_t* in, int64_t count, uint32_t* out) {
  _mm512_storeu_si512(out, _mm512_maskz_loadu_epi32(static_cast<__mmask16>((1u << count) - 1), in));
}

struct KeyVector {
  __m512i keys;
  explicit KeyVector(const uint32_t* k) : keys(_mm512_load_si512(k)) {}
  KeyMatches take_smallest(uint32_t* key) {
    *key = _mm512_reduce_min_epu32(keys);
    const __mmask16 at = _mm512_cmpeq_epi32_mask(keys, _mm512_set1_epi32(static_cast<int>(*key)));
    keys = _mm512_mask_mov_epi32(keys, at, _mm512_set1_epi32(-1));
    return {__builtin_popcount(at), __builtin_ctz(at)};
  }
};

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

// Keys of the four (key, position) pairs at p, in order (or reversed).
inline __m256i pair_keys(const uint64_t* p, bool reversed) {
  const __m256i mixed = _mm256_unpacklo_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
                                              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 4)));
  // mixed = k0 k2 k1 k3
  return reversed ? _mm256_permute4x64_epi64(mixed, 0x27) : _mm256_permute4x64_epi64(mixed, 0xD8);
}

template <Stops kStops, bool kPairs, bool kReversed>
inline uint64_t stop_mask64(const uint64_t* p, uint64_t t) {
  const __m256i threshold = biased(_mm256_set1_epi64x(static_cast<long long>(t)));
  uint64_t fails = 0;  // lanes that do not stop: key < t (kNotBelow) or key > t (kNotAbove)
  for (int v = 0; v < 16; ++v) {
    __m256i keys;
    if constexpr (kPairs) {
      keys = pair_keys(p + 8 * v, kReversed);
    } else {
      keys = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 4 * v));
      if constexpr (kReversed) keys = _mm256_permute4x64_epi64(keys, 0x1B);
    }
    keys = biased(keys);
    const __m256i fail = kStops == Stops::kNotBelow ? _mm256_cmpgt_epi64(threshold, keys)
                                                    : _mm256_cmpgt_epi64(keys, threshold);
    fails |= lane_bits(fail) << (4 * (kReversed ? 15 - v : v));
  }
  return ~fails;
}

template <bool kDescending, typename Value>
inline uint64_t not_after_mask64(const Value* v, Value t) {
  constexpr int kPredicate = kDescending ? _CMP_NLT_UQ : _CMP_NGT_UQ;
  constexpr int kLanes = 32 / sizeof(Value), kVectors = 64 / kLanes;
  // Most blocks of topk's rows hold no element that passes: the compares' OR answers for them, and
  // the bit mask (a movemask, shift and OR per vector) is built only for the others.
  __m256 passes[kVectors];
  for (int i = 0; i < kVectors; ++i) {
    if constexpr (sizeof(Value) == 4) {
      passes[i] = _mm256_cmp_ps(_mm256_loadu_ps(v + kLanes * i), _mm256_set1_ps(t), kPredicate);
    } else {
      passes[i] = _mm256_castpd_ps(_mm256_cmp_pd(_mm256_loadu_pd(v + kLanes * i), _mm256_set1_pd(t), kPredicate));
    }
  }
  __m256 any = passes[0];
  for (int i = 1; i < kVectors; ++i) any = _mm256_or_ps(any, passes[i]);
  if (_mm256_testz_ps(any, any)) return 0;
  uint64_t bits = 0;
  for (int i = 0; i < kVectors; ++i) {
    const int m = sizeof(Value) == 4 ? _mm256_movemask_ps(passes[i]) : _mm256_movemask_pd(_mm256_castps_pd(passes[i]));
    bits |= static_cast<uint64_t>(m) << (kLanes * i);
  }
  return bits;
}

inline void swap_block_with_reversed64(uint64_t* a, uint64_t* b) {
  auto load = [](const uint64_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); };
  auto store_reversed = [](uint64_t* p, __m256i v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm256_permute4x64_epi64(v, 0x1B));
  };
  for (int v = 0; v < 8; ++v) {  // vectors v and 15 - v of each side trade places, lanes reversed
    const __m256i a_low = load(a + 4 * v), a_high = load(a + 60 - 4 * v);
    const __m256i b_low = load(b + 4 * v), b_high = load(b + 60 - 4 * v);
    store_reversed(a + 4 * v, b_high);
    store_reversed(a + 60 - 4 * v, b_low);
    store_reversed(b + 4 * v, a_high);
    store_reversed(b + 60 - 4 * v, a_low);
  }
}

// Lane indices (as 32-bit pairs) that move the 64-bit lanes set in a 4-bit mask to the front, in
// order, and the others behind them.
struct CompressTable {
  alignas(32) int32_t lanes[16][8];
  constexpr CompressTable() : lanes{} {
    for (int m = 0; m < 16; ++m) {
      int k = 0;
      for (int set = 1; set >= 0; --set) {
        for (int lane = 0; lane < 4; ++lane) {
          if (((m >> lane) & 1) == set) {
            lanes[m][2 * k] = 2 * lane;
            lanes[m][2 * k + 1] = 2 * lane + 1;
            ++k;
          }
        }
      }
    }
  }
};
inline constexpr CompressTable kCompress{};

// The 64-bit lanes of v set in the 4-bit mask m, moved to the front; the others behind them.
inline __m256i compressed64(__m256i v, int m) {
  return _mm256_permutevar8x32_epi32(v, _mm256_load_si256(reinterpret_cast<const __m256i*>(kCompress.lanes[m])));
}

// One permutation puts the keys below the pivot in the first lanes and the others in the last: the
// same vector is stored at the front of the part below, and where its last lanes end the part above.
inline int64_t partition_below(const uint64_t* in, int64_t n, uint64_t pivot, uint64_t* out) {
  const __m256i p = biased(_mm256_set1_epi64x(static_cast<long long>(pivot)));
  uint64_t* const top = out + n + kPartitionGap;
  int64_t nb = 0, na = 0, i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    const int m = static_cast<int>(lane_bits(_mm256_cmpgt_epi64(p, biased(v))));
    const __m256i parted = compressed64(v, m);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + nb), parted);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(top - na - 4), parted);
    const int c = __builtin_popcount(static_cast<unsigned>(m));
    nb += c;
    na += 4 - c;
  }
  return partition_below_from(in, i, n, pivot, out, nb, na);
}

// For each 8-bit mask, the lanes set in it, first to last, then the others, as 4-bit fields: the
// permutation that moves those 32-bit lanes to the front and the others behind them (1 KiB, where a
// table of whole vectors takes 8).
struct CompressTable32 {
  uint32_t lanes[256];
  constexpr CompressTable32() : lanes{} {
    for (int m = 0; m < 256; ++m) {
      int k = 0;
      for (int set = 1; set >= 0; --set) {
        for (int lane = 0; lane < 8; ++lane) {
          if (((m >> lane) & 1) == set) lanes[m] |= static_cast<uint32_t>(lane) << (4 * k++);
        }
      }
    }
  }
};
inline constexpr CompressTable32 kCompress32{};

inline __m256i compress_lanes32(int m) {
  const __m256i fields = _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(kCompress32.lanes[m])),
                                           _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
  return _mm256_and_si256(fields, _mm256_set1_epi32(7));
}

inline int64_t partition_below(const uint32_t* in, int64_t n, uint32_t pivot, uint32_t* out) {
  // Signed compares only: flipping the top bit of both sides orders them unsigned.
  const __m256i flip = _mm256_set1_epi32(INT32_MIN);
  const __m256i p = _mm256_xor_si256(_mm256_set1_epi32(static_cast<int>(pivot)), flip);
  uint32_t* const top = out + n + kPartitionGap;
  int64_t nb = 0, na = 0, i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    const int m = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(p, _mm256_xor_si256(v, flip))));
    const __m256i parted = _mm256_permutevar8x32_epi32(v, compress_lanes32(m));  // as for uint64
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + nb), parted);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(top - na - 8), parted);
    const int c = __builtin_popcount(static_cast<unsigned>(m));
    nb += c;
    na += 8 - c;
  }
  return partition_below_from(in, i, n, pivot, out, nb, na);
}

inline int64_t keep_between(const uint32_t* keys, int64_t n, uint32_t lo, uint32_t width, uint32_t first,
                            uint32_t* kept, uint32_t* positions) {
  const __m256i flip = _mm256_set1_epi32(INT32_MIN), low = _mm256_set1_epi32(static_cast<int>(lo));
  const __m256i w = _mm256_xor_si256(_mm256_set1_epi32(static_cast<int>(width)), flip);
  __m256i at = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(first)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  int64_t count = 0, i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys + i));
    const __m256i outside = _mm256_cmpgt_epi32(_mm256_xor_si256(_mm256_sub_epi32(v, low), flip), w);
    const int m = ~_mm256_movemask_ps(_mm256_castsi256_ps(outside)) & 0xFF;
    const __m256i lanes = compress_lanes32(m);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(kept + count), _mm256_permutevar8x32_epi32(v, lanes));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(positions + count), _mm256_permutevar8x32_epi32(at, lanes));
    count += __builtin_popcount(static_cast<unsigned>(m));
    at = _mm256_add_epi32(at, _mm256_set1_epi32(8));
  }
  return keep_between_from(keys, i, n, lo, width, first, kept, positions, count);
}

inline int64_t keep_between(const uint64_t* keys, int64_t n, uint64_t lo, uint64_t width, uint32_t first,
                            uint64_t* kept, uint32_t* positions) {
  const __m256i low = _mm256_set1_epi64x(static_cast<long long>(lo));
  const __m256i w = biased(_mm256_set1_epi64x(static_cast<long long>(width)));
  // The positions of the four keys in the low four 32-bit lanes, compressed with the same mask.
  __m256i at = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(first)), _mm256_setr_epi32(0, 1, 2, 3, 0, 0, 0, 0));
  int64_t count = 0, i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys + i));
    const __m256i outside = _mm256_cmpgt_epi64(biased(_mm256_sub_epi64(v, low)), w);
    const int m = static_cast<int>(~lane_bits(outside) & 15);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(kept + count), compressed64(v, m));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(positions + count), _mm256_permutevar8x32_epi32(at, compress_lanes32(m)));
    count += __builtin_popcount(static_cast<unsigned>(m));
    at = _mm256_add_epi32(at, _mm256_set1_epi32(4));
  }
  return keep_between_from(keys, i, n, lo, width, first, kept, positions, count);
}

template <int kCount>
inline void key_masks64(const uint32_t* keys, uint32_t x, uint64_t* below, uint64_t* equal) {
  // Signed compares only: flipping the top bit of both sides orders them unsigned.
  const __m256i flip = _mm256_set1_epi32(INT32_MIN);
  const __m256i t = _mm256_set1_epi32(static_cast<int>(x)), t_flipped = _mm256_xor_si256(t, flip);
  uint64_t b = 0, e = 0;
  for (int v = 0; v < kCount / 8; ++v) {
    const __m256i k = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys + 8 * v));
    const __m256i lt = _mm256_cmpgt_epi32(t_flipped, _mm256_xor_si256(k, flip));
    b |= static_cast<uint64_t>(_mm256_movemask_ps(_mm256_castsi256_ps(lt))) << (8 * v);
    e |= static_cast<uint64_t>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(k, t)))) << (8 * v);
  }
  *below = b;
  *equal = e;
}

inline constexpr int64_t kKeysPerVector = 8;

inline void load_keys_tail(const uint32_t* in, int64_t count, uint32_t* out) {
  const __m256i in_row = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)),
                                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256i tail = _mm256_maskload_epi32(reinterpret_cast<const int*>(in), in_row);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), tail);
}

struct KeyVector {
  __m256i keys;
  explicit KeyVector(const uint32_t* k) : keys(_mm256_load_si256(reinterpret_cast<const __m256i*>(k))) {}
  KeyMatches take_smallest(uint32_t* key) {
    __m256i m = _mm256_min_epu32(keys, _mm256_permute2x128_si256(keys, keys, 1));
    m = _mm256_min_epu32(m, _mm256_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
    m = _mm256_min_epu32(m, _mm256_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));  // the minimum in every lane
    *key = static_cast<uint32_t>(_mm256_cvtsi256_si32(m));
    const __m256i equal = _mm256_cmpeq_epi32(keys, m);
    keys = _mm256_or_si256(keys, equal);
    const int at = _mm256_movemask_ps(_mm256_castsi256_ps(equal));
    return {__builtin_popcount(at), __builtin_ctz(at)};
  }
};

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

template <Stops kStops, bool kPairs, bool kReversed>
inline uint64_t stop_mask64(const uint64_t* p, uint64_t t) {
  uint64_t bits = 0;
  for (int i = 0; i < 64; ++i) {
    const uint64_t key = p[(kPairs ? 2 : 1) * (kReversed ? 63 - i : i)];
    bits |= uint64_t{kStops == Stops::kNotBelow ? key >= t : key <= t} << i;
  }
  return bits;
}

template <bool kDescending, typename Value>
inline uint64_t not_after_mask64(const Value* v, Value t) {
  uint64_t bits = 0;
  for (int i = 0; i < 64; ++i) bits |= uint64_t{kDescending ? !(v[i] < t) : !(v[i] > t)} << i;
  return bits;
}

inline void swap_block_with_reversed64(uint64_t* a, uint64_t* b) {
  for (int i = 0; i < 64; ++i) swap_values(a[i], b[63 - i]);
}

template <typename E>
inline int64_t partition_below(const E* in, int64_t n, E pivot, E* out) {
  return partition_below_from(in, 0, n, pivot, out, 0, 0);
}

template <typename K>
inline int64_t keep_between(const K* keys, int64_t n, K lo, K width, uint32_t first, K* kept, uint32_t* positions) {
  return keep_between_from(keys, 0, n, lo, width, first, kept, positions, 0);
}

template <int kCount>
inline void key_masks64(const uint32_t* keys, uint32_t x, uint64_t* below, uint64_t* equal) {
  key_masks64_by_element<kCount>(keys, x, below, equal);
}

inline constexpr int64_t kKeysPerVector = 8;

inline void load_keys_tail(const uint32_t* in, int64_t count, uint32_t* out) {
  for (int j = 0; j < kKeysPerVector; ++j) out[j] = j < count ? in[j] : 0;
}

struct KeyVector {
  uint32_t keys[kKeysPerVector];
  explicit KeyVector(const uint32_t* k) { std::copy_n(k, kKeysPerVector, keys); }
  KeyMatches take_smallest(uint32_t* key) {
    *key = *std::min_element(keys, keys + kKeysPerVector);
    KeyMatches at{0, -1};
    for (int j = 0; j < kKeysPerVector; ++j) {
      if (keys[j] != *key) continue;
      if (at.count++ == 0) at.first = j;
      keys[j] = ~uint32_t{0};
    }
    return at;
  }
};

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
