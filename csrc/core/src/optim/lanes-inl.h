// The ISA-specific part of the optimizer steps: Lanes<T>, a vector of T with the handful of
// operations steps-inl.h is written in (ScalarLanes<T>, one element, is Lanes<T> of the scalar
// variant). Every operation rounds once, as the instruction it names does; nothing is contracted
// (the core is built with -ffp-contract=off), so the arithmetic is exactly what steps-inl.h spells out.
// Besides, the copies of MKL's float square root this ISA can compute (with_mkl_sqrt, at the end).
//
// Included inside namespace kwker::optim_detail::<isa> by optim_<isa>.cc.

template <typename T>
struct ScalarLanes {
  using V = T;
  static constexpr int kWidth = 1;
  // Which of MKL's vsSqrt paths (kwker/optim.h) this ISA has copies of: see with_mkl_sqrt.
  static constexpr bool kHasMklAvx512Path = false;
  static constexpr bool kHasMklSsePath = false;
  static V load(const T* p) { return *p; }
  static void store(T* p, V v) { *p = v; }
  static V set(T x) { return x; }
  static V add(V a, V b) { return a + b; }
  static V sub(V a, V b) { return a - b; }
  static V mul(V a, V b) { return a * b; }
  static V div(V a, V b) { return a / b; }
  static V fma(V a, V b, V c) { return std::fma(a, b, c); }
  static V sqrt(V a) { return std::sqrt(a); }
  static V neg(V a) { return -a; }
};

#if defined(KWKER_ISA_AVX512)

template <typename T>
struct Lanes;

template <>
struct Lanes<float> {
  using V = __m512;
  static constexpr int kWidth = 16;
  static constexpr bool kHasMklAvx512Path = true;
  static constexpr bool kHasMklSsePath = true;
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V set(float x) { return _mm512_set1_ps(x); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V sqrt(V a) { return _mm512_sqrt_ps(a); }
  static V neg(V a) { return _mm512_xor_ps(a, _mm512_set1_ps(-0.0f)); }
  // The square root MKL's AVX-512 vsSqrt (VML high accuracy) computes on Intel CPUs: y = rsqrt14(x),
  // s = x·y, then s + (y/2)·(x − s²), the correction scaled by 2^78 for x below about 2^-78
  // (y > 2^39). ±0 and +inf come back as they are, negative x as the quiet NaN 0x7fc00000, NaN
  // quieted. It is within an ulp, not always correctly rounded.
  static V mkl_avx512_sqrt(V x) {
    const V y = _mm512_rsqrt14_ps(x);
    const V s = _mm512_mul_ps(x, y);
    const V half_y = _mm512_mul_ps(y, _mm512_set1_ps(0.5f));
    const __mmask16 tiny = _mm512_cmp_ps_mask(_mm512_set1_ps(0x1p39f), y, _CMP_LT_OQ);
    constexpr int kNegative = 0x10 | 0x40, kNan = 0x01 | 0x80, kKept = 0x02 | 0x04 | 0x08;
    const __mmask16 special = _mm512_fpclass_ps_mask(x, kNegative | kNan | kKept);
    if ((tiny | special) == 0) return _mm512_fmadd_ps(half_y, _mm512_fnmadd_ps(s, s, x), s);
    const V x_scaled = _mm512_mask_mul_ps(x, tiny, x, _mm512_set1_ps(0x1p78f));
    const V s_scaled = _mm512_mask_mul_ps(s, tiny, s, _mm512_set1_ps(0x1p39f));
    const V half_y_scaled = _mm512_mask_mul_ps(half_y, tiny, half_y, _mm512_set1_ps(0x1p-78f));
    V root = _mm512_fmadd_ps(half_y_scaled, _mm512_fnmadd_ps(s_scaled, s_scaled, x_scaled), s);
    root = _mm512_mask_mov_ps(root, _mm512_fpclass_ps_mask(x, kNegative),
                              _mm512_castsi512_ps(_mm512_set1_epi32(0x7fc00000)));
    root = _mm512_mask_mov_ps(root, _mm512_fpclass_ps_mask(x, kNan),
                              _mm512_or_ps(x, _mm512_castsi512_ps(_mm512_set1_epi32(0x00400000))));
    return _mm512_mask_mov_ps(root, _mm512_fpclass_ps_mask(x, kKept), x);
  }
  // The CPU's own rsqrtps approximation, which MKL's SSE path starts from: AVX-512 has no 16-wide
  // form of it (rsqrt14 is another approximation), so each half goes through the 8-wide one.
  static V rsqrtps(V x) {
    const __m256 low = _mm256_rsqrt_ps(_mm512_castps512_ps256(x));
    const __m256 high = _mm256_rsqrt_ps(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(low)),
                                               _mm256_castps_pd(high), 1));
  }
  // mkl_sse_sqrt's lanes outside (0x007fffff, 0x7f7ff000]: the correctly rounded sqrt, and the quiet
  // NaN 0x7fc00000 for negative x. Outside that range the bits plus 0x7f800000 exceed 0xfefff000 as
  // signed integers.
  static V sse_path_specials(V x, V root) {
    const __m512i biased = _mm512_add_epi32(_mm512_castps_si512(x), _mm512_set1_epi32(0x7f800000));
    const __mmask16 special = _mm512_cmpgt_epi32_mask(biased, _mm512_set1_epi32(int32_t(0xfefff000u)));
    if (special == 0) return root;
    const V exact = _mm512_mask_sqrt_ps(root, special, x);
    const __mmask16 negative = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
    return _mm512_mask_mov_ps(exact, negative, _mm512_castsi512_ps(_mm512_set1_epi32(0x7fc00000)));
  }
};

template <>
struct Lanes<double> {
  using V = __m512d;
  static constexpr int kWidth = 8;
  static constexpr bool kHasMklAvx512Path = false;
  static constexpr bool kHasMklSsePath = false;
  static V load(const double* p) { return _mm512_loadu_pd(p); }
  static void store(double* p, V v) { _mm512_storeu_pd(p, v); }
  static V set(double x) { return _mm512_set1_pd(x); }
  static V add(V a, V b) { return _mm512_add_pd(a, b); }
  static V sub(V a, V b) { return _mm512_sub_pd(a, b); }
  static V mul(V a, V b) { return _mm512_mul_pd(a, b); }
  static V div(V a, V b) { return _mm512_div_pd(a, b); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
  static V sqrt(V a) { return _mm512_sqrt_pd(a); }
  static V neg(V a) { return _mm512_xor_pd(a, _mm512_set1_pd(-0.0)); }
};

#elif defined(KWKER_ISA_AVX2)

template <typename T>
struct Lanes;

template <>
struct Lanes<float> {
  using V = __m256;
  static constexpr int kWidth = 8;
  static constexpr bool kHasMklAvx512Path = false;
  static constexpr bool kHasMklSsePath = true;
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V set(float x) { return _mm256_set1_ps(x); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V sqrt(V a) { return _mm256_sqrt_ps(a); }
  static V neg(V a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }
  static V rsqrtps(V x) { return _mm256_rsqrt_ps(x); }
  // As Lanes<float>::sse_path_specials of AVX-512.
  static V sse_path_specials(V x, V root) {
    const __m256i biased = _mm256_add_epi32(_mm256_castps_si256(x), _mm256_set1_epi32(0x7f800000));
    const V special = _mm256_castsi256_ps(_mm256_cmpgt_epi32(biased, _mm256_set1_epi32(int32_t(0xfefff000u))));
    if (_mm256_movemask_ps(special) == 0) return root;
    const V exact = _mm256_blendv_ps(root, _mm256_sqrt_ps(x), special);
    const V negative = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
    return _mm256_blendv_ps(exact, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)), negative);
  }
};

template <>
struct Lanes<double> {
  using V = __m256d;
  static constexpr int kWidth = 4;
  static constexpr bool kHasMklAvx512Path = false;
  static constexpr bool kHasMklSsePath = false;
  static V load(const double* p) { return _mm256_loadu_pd(p); }
  static void store(double* p, V v) { _mm256_storeu_pd(p, v); }
  static V set(double x) { return _mm256_set1_pd(x); }
  static V add(V a, V b) { return _mm256_add_pd(a, b); }
  static V sub(V a, V b) { return _mm256_sub_pd(a, b); }
  static V mul(V a, V b) { return _mm256_mul_pd(a, b); }
  static V div(V a, V b) { return _mm256_div_pd(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
  static V sqrt(V a) { return _mm256_sqrt_pd(a); }
  static V neg(V a) { return _mm256_xor_pd(a, _mm256_set1_pd(-0.0)); }
};

#else

template <typename T>
using Lanes = ScalarLanes<T>;

#endif

// The square root MKL's SSE vsSqrt (VML high accuracy) computes on AMD CPUs, with or without
// AVX-512: y = rsqrtps(x), s = x·y, h = y/2, e = 1/2 − s·h,
// s' = s + s·e, h' = h + h·e, then s' + (x − s'²)·h', every product and sum rounded on its own (no
// FMA). rsqrtps is the CPU's own approximation, so the bits are this CPU's. Positive normal x up to
// 0x7f7ff000 only; the others as L::sse_path_specials. Within an ulp, not always correctly rounded.
template <typename L>
typename L::V mkl_sse_sqrt(typename L::V x) {
  const auto half = L::set(0.5f);
  const auto y = L::rsqrtps(x);
  const auto s = L::mul(x, y);
  const auto h = L::mul(y, half);
  const auto e = L::sub(half, L::mul(s, h));
  const auto s1 = L::add(L::mul(s, e), s);
  const auto h1 = L::add(L::mul(h, e), h);
  return L::sse_path_specials(x, L::add(L::mul(L::sub(x, L::mul(s1, s1)), h1), s1));
}

// Calls use(root) with root(V) -> V computing MKL's `path` of vsSqrt in registers, and returns true;
// false where this ISA has no copy of that path. Neither copy comes from a specification: the adapter
// checks the one it uses against MKL itself on this machine (optim_ops.cc), the tests on every float.
template <typename L, typename Use>
bool with_mkl_sqrt(MklSqrtPath path, const Use& use) {
  if constexpr (L::kHasMklAvx512Path) {
    if (path == MklSqrtPath::kAvx512) {
      use([](typename L::V x) { return L::mkl_avx512_sqrt(x); });
      return true;
    }
  }
  if constexpr (L::kHasMklSsePath) {
    if (path == MklSqrtPath::kSse) {
      use([](typename L::V x) { return mkl_sse_sqrt<L>(x); });
      return true;
    }
  }
  return false;
}
