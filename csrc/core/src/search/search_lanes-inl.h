// The ISA-specific part of searchsorted: Lanes<Key>, kWidth searches side by side, with the handful
// of operations search-inl.h's binary-search step is written in. I holds each lane's position (start)
// or remaining length (end - start), M a per-lane condition. ScalarLanes<Key> (one search) is Lanes
// of the scalar variant, and every variant's tail.
//
// goes_right is torch's test for start = mid + 1: !(b >= v) (left) or !(b > v) (right), computed as
// the element type compares (float compares are unordered-true, so a NaN on either side goes right).
//
// Included inside namespace kwker::search_detail::<isa> by search_<isa>.cc.

template <typename Key>
struct ScalarLanes {
  using V = Key;
  using I = int32_t;
  using M = bool;
  static constexpr int kWidth = 1;
  static constexpr int kGroups = 8;  // independent searches in flight: their loads overlap
  static V load(const Key* p) { return *p; }
  static I splat(int32_t x) { return x; }
  static I add(I a, I b) { return a + b; }
  static I sub(I a, I b) { return a - b; }
  static I halve(I a) { return a >> 1; }
  static I min(I a, I b) { return a < b ? a : b; }
  static V gather(const Key* row, I index) { return row[index]; }
  template <SearchSide kSide>
  static M goes_right(V bound, V value) {
    if constexpr (kSide == SearchSide::kLeft) return !(bound >= value);
    return !(bound > value);
  }
  static M positive(I a) { return a > 0; }
  static M both(M a, M b) { return a & b; }
  static I select(M m, I a, I b) { return m ? a : b; }
  static void store(int64_t* out, I a) { *out = a; }
  static void store(int32_t* out, I a) { *out = a; }
};

#if defined(KWKER_ISA_SCALAR)

template <typename Key>
using Lanes = ScalarLanes<Key>;

#elif defined(KWKER_ISA_AVX512)

template <typename Key>
struct Lanes;

// 16 searches on 32-bit keys: positions as 32-bit lanes, conditions as mask registers.
template <typename Key>
struct Lanes32 {
  using I = __m512i;
  using M = __mmask16;
  static constexpr int kWidth = 16;
  static constexpr int kGroups = 4;
  static I splat(int32_t x) { return _mm512_set1_epi32(x); }
  static I add(I a, I b) { return _mm512_add_epi32(a, b); }
  static I sub(I a, I b) { return _mm512_sub_epi32(a, b); }
  static I halve(I a) { return _mm512_srli_epi32(a, 1); }
  static I min(I a, I b) { return _mm512_min_epi32(a, b); }
  static M positive(I a) { return _mm512_cmpgt_epi32_mask(a, _mm512_setzero_si512()); }
  static M both(M a, M b) { return a & b; }
  static I select(M m, I a, I b) { return _mm512_mask_blend_epi32(m, b, a); }
  static void store(int32_t* out, I a) { _mm512_storeu_si512(out, a); }
  static void store(int64_t* out, I a) {
    _mm512_storeu_si512(out, _mm512_cvtepi32_epi64(_mm512_castsi512_si256(a)));
    _mm512_storeu_si512(out + 8, _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(a, 1)));
  }
};

// 8 searches on 64-bit keys: positions as 64-bit lanes.
template <typename Key>
struct Lanes64 {
  using I = __m512i;
  using M = __mmask8;
  static constexpr int kWidth = 8;
  static constexpr int kGroups = 4;
  static I splat(int32_t x) { return _mm512_set1_epi64(x); }
  static I add(I a, I b) { return _mm512_add_epi64(a, b); }
  static I sub(I a, I b) { return _mm512_sub_epi64(a, b); }
  static I halve(I a) { return _mm512_srli_epi64(a, 1); }
  static I min(I a, I b) { return _mm512_min_epi64(a, b); }
  static M positive(I a) { return _mm512_cmpgt_epi64_mask(a, _mm512_setzero_si512()); }
  static M both(M a, M b) { return a & b; }
  static I select(M m, I a, I b) { return _mm512_mask_blend_epi64(m, b, a); }
  static void store(int32_t* out, I a) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm512_cvtepi64_epi32(a));
  }
  static void store(int64_t* out, I a) { _mm512_storeu_si512(out, a); }
};

template <>
struct Lanes<float> : Lanes32<float> {
  using V = __m512;
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V gather(const float* row, I index) { return _mm512_i32gather_ps(index, row, 4); }
  template <SearchSide kSide>
  static M goes_right(V bound, V value) {
    return _mm512_cmp_ps_mask(bound, value, kSide == SearchSide::kLeft ? _CMP_NGE_UQ : _CMP_NGT_UQ);
  }
};

template <>
struct Lanes<int32_t> : Lanes32<int32_t> {
  using V = __m512i;
  static V load(const int32_t* p) { return _mm512_loadu_si512(p); }
  static V gather(const int32_t* row, I index) { return _mm512_i32gather_epi32(index, row, 4); }
  template <SearchSide kSide>
  static M goes_right(V bound, V value) {
    if constexpr (kSide == SearchSide::kLeft) return _mm512_cmplt_epi32_mask(bound, value);
    return _mm512_cmple_epi32_mask(bound, value);
  }
};

template <>
struct Lanes<double> : Lanes64<double> {
  using V = __m512d;
  static V load(const double* p) { return _mm512_loadu_pd(p); }
  static V gather(const double* row, I index) { return _mm512_i64gather_pd(index, row, 8); }
  template <SearchSide kSide>
  static M goes_right(V bound, V value) {
    return _mm512_cmp_pd_mask(bound, value, kSide == SearchSide::kLeft ? _CMP_NGE_UQ : _CMP_NGT_UQ);
  }
};

template <>
struct Lanes<int64_t> : Lanes64<int64_t> {
  using V = __m512i;
  static V load(const int64_t* p) { return _mm512_loadu_si512(p); }
  static V gather(const int64_t* row, I index) { return _mm512_i64gather_epi64(index, row, 8); }
  template <SearchSide kSide>
  static M goes_right(V bound, V value) {
    if constexpr (kSide == SearchSide::kLeft) return _mm512_cmplt_epi64_mask(bound, value);
    return _mm512_cmple_epi64_mask(bound, value);
  }
};

#elif defined(KWKER_ISA_AVX2)

template <typename Key>
struct Lanes;

// 8 searches on 32-bit keys: positions as 32-bit lanes, conditions as all-ones lanes.
template <typename Key>
struct Lanes32 {
  using I = __m256i;
  using M = __m256i;
  static constexpr int kWidth = 8;
  static constexpr int kGroups = 4;
  static I splat(int32_t x) { return _mm256_set1_epi32(x); }
  static I add(I a, I b) { return _mm256_add_epi32(a, b); }
  static I sub(I a, I b) { return _mm256_sub_epi32(a, b); }
  static I halve(I a) { return _mm256_srli_epi32(a, 1); }
  static I min(I a, I b) { return _mm256_min_epi32(a, b); }
  static M positive(I a) { return _mm256_cmpgt_epi32(a, _mm256_setzero_si256()); }
  static M both(M a, M b) { return _mm256_and_si256(a, b); }
  static I select(M m, I a, I b) { return _mm256_blendv_epi8(b, a, m); }
  static void store(int32_t* out, I a) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), a); }
  static void store(int64_t* out, I a) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_cvtepi32_epi64(_mm256_castsi256_si128(a)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 4), _mm256_cvtepi32_epi64(_mm256_extracti128_si256(a, 1)));
  }
};

// 4 searches on 64-bit keys: positions as 64-bit lanes (the gathers take 64-bit indices).
template <typename Key>
struct Lanes64 {
  using I = __m256i;
  using M = __m256i;
  static constexpr int kWidth = 4;
  static constexpr int kGroups = 4;
  static I splat(int32_t x) { return _mm256_set1_epi64x(x); }
  static I add(I a, I b) { return _mm256_add_epi64(a, b); }
  static I sub(I a, I b) { return _mm256_sub_epi64(a, b); }
  static I halve(I a) { return _mm256_srli_epi64(a, 1); }
  static I min(I a, I b) { return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(a, b)); }
  static M positive(I a) { return _mm256_cmpgt_epi64(a, _mm256_setzero_si256()); }
  static M both(M a, M b) { return _mm256_and_si256(a, b); }
  static I select(M m, I a, I b) { return _mm256_blendv_epi8(b, a, m); }
  static void store(int32_t* out, I a) {
    const __m256i low_words = _mm256_permutevar8x32_epi32(a, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_castsi256_si128(low_words));
  }
  static void store(int64_t* out, I a) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), a); }
};

template <>
struct Lanes<float> : Lanes32<float> {
  using V = __m256;
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V gather(const float* row, I index) { return _mm256_i32gather_ps(row, index, 4); }
  template <SearchSide kSide>
  static M goes_right(V bound, V value) {
    return _mm256_castps_si256(
        _mm256_cmp_ps(bound, value, kSide == SearchSide::kLeft ? _CMP_NGE_UQ : _CMP_NGT_UQ));
  }
};

template <>
struct Lanes<int32_t> : Lanes32<int32_t> {
  using V = __m256i;
  static V load(const int32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static V gather(const int32_t* row, I index) { return _mm256_i32gather_epi32(row, index, 4); }
  template <SearchSide kSide>
  static M goes_right(V bound, V value) {
    if constexpr (kSide == SearchSide::kLeft) return _mm256_cmpgt_epi32(value, bound);
    return _mm256_xor_si256(_mm256_cmpgt_epi32(bound, value), _mm256_set1_epi32(-1));
  }
};

template <>
struct Lanes<double> : Lanes64<double> {
  using V = __m256d;
  static V load(const double* p) { return _mm256_loadu_pd(p); }
  static V gather(const double* row, I index) { return _mm256_i64gather_pd(row, index, 8); }
  template <SearchSide kSide>
  static M goes_right(V bound, V value) {
    return _mm256_castpd_si256(
        _mm256_cmp_pd(bound, value, kSide == SearchSide::kLeft ? _CMP_NGE_UQ : _CMP_NGT_UQ));
  }
};

template <>
struct Lanes<int64_t> : Lanes64<int64_t> {
  using V = __m256i;
  static V load(const int64_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static V gather(const int64_t* row, I index) {
    return _mm256_i64gather_epi64(reinterpret_cast<const long long*>(row), index, 8);
  }
  template <SearchSide kSide>
  static M goes_right(V bound, V value) {
    if constexpr (kSide == SearchSide::kLeft) return _mm256_cmpgt_epi64(value, bound);
    return _mm256_xor_si256(_mm256_cmpgt_epi64(bound, value), _mm256_set1_epi64x(-1));
  }
};

#endif
