// The row loops of embedding_dense_backward and embedding_bag_max (kwker/embedding.h), written as plain
// loops over a row that the compiler vectorizes for this file's ISA; float16/bfloat16 rows go through
// float in blocks of kBlock elements (widening is exact; narrowing rounds to nearest even as c10 does).
//
// Included inside namespace kwker::embedding_detail::<isa>. No std:: templates here: their inline
// copies compiled with this file's ISA flags could be picked by the linker for baseline code.

constexpr int64_t kBlock = 64;
// Rows are read (bags) or updated (backward) at random places of a table that may be far larger than
// the caches: the row this many indices ahead is prefetched, up to kPrefetchLines cache lines of it.
constexpr int64_t kPrefetchAhead = 8;
constexpr int64_t kPrefetchLines = 8;

inline void prefetch_row(const void* row, int64_t bytes) {
  const char* p = static_cast<const char*>(row);
  const int64_t lines = (bytes + 63) / 64;
  for (int64_t l = 0; l < lines && l < kPrefetchLines; ++l) __builtin_prefetch(p + 64 * l);
}

inline void widen(const uint16_t* in, float* out, int64_t n, DType dtype) {
  int64_t i = 0;
  if (dtype == DType::kBFloat16) {
    for (; i < n; ++i) out[i] = bfloat16_to_float(in[i]);
    return;
  }
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  }
#endif
  for (; i < n; ++i) out[i] = half_to_float(in[i]);
}

// Rounds to nearest even; NaNs may come out as any NaN (callers treat NaN results separately).
inline void narrow(const float* in, uint16_t* out, int64_t n, DType dtype) {
  int64_t i = 0;
  if (dtype == DType::kBFloat16) {
    for (; i < n; ++i) out[i] = float_to_bfloat16(in[i]);
    return;
  }
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
#endif
  for (; i < n; ++i) out[i] = float_to_half(in[i]);
}

inline float fused(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
inline double fused(double a, double b, double c) { return __builtin_fma(a, b, c); }

// acc[0, n) += alpha * g[0, n), float32 or float64. Returns whether a result is NaN.
template <typename F>
bool add_row(F* __restrict acc, const F* __restrict g, int64_t n, F alpha) {
  uint32_t nan = 0;
  if (alpha == F(1)) {
    for (int64_t d = 0; d < n; ++d) {
      const F r = acc[d] + g[d];
      acc[d] = r;
      nan |= r != r;
    }
  } else {
    for (int64_t d = 0; d < n; ++d) {
      const F r = fused(g[d], alpha, acc[d]);
      acc[d] = r;
      nan |= r != r;
    }
  }
  return nan != 0;
}

// acc[0, n) = T(acc + g) for float16/bfloat16 rows, in one pass.
bool add_row16_unit(uint16_t* __restrict acc, const uint16_t* __restrict g, int64_t n, DType dtype) {
  uint32_t nan = 0;
  int64_t d = 0;
  if (dtype == DType::kBFloat16) {
#if defined(__AVX512F__) && defined(__AVX512BW__)
    const __m512i rounding16 = _mm512_set1_epi32(0x7FFF), one16 = _mm512_set1_epi32(1);
    for (; d + 16 <= n; d += 16) {
      const __m512 a = _mm512_castsi512_ps(_mm512_slli_epi32(
          _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + d))), 16));
      const __m512 x = _mm512_castsi512_ps(_mm512_slli_epi32(
          _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + d))), 16));
      const __m512 r = _mm512_add_ps(a, x);
      const __mmask16 unordered = _mm512_cmp_ps_mask(r, r, _CMP_UNORD_Q);
      nan |= unordered;
      const __m512i bits = _mm512_castps_si512(r);
      const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), one16);
      __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(bits, rounding16), lsb), 16);
      rounded = _mm512_mask_blend_epi32(unordered, rounded, _mm512_set1_epi32(0x7FC0));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + d), _mm512_cvtepi32_epi16(rounded));
    }
#endif
#if defined(__AVX2__)
    const __m256i rounding = _mm256_set1_epi32(0x7FFF), one = _mm256_set1_epi32(1);
    for (; d + 8 <= n; d += 8) {
      const __m256 a = _mm256_castsi256_ps(_mm256_slli_epi32(
          _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(acc + d))), 16));
      const __m256 x = _mm256_castsi256_ps(_mm256_slli_epi32(
          _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g + d))), 16));
      const __m256 r = _mm256_add_ps(a, x);
      const __m256 unordered = _mm256_cmp_ps(r, r, _CMP_UNORD_Q);
      nan |= static_cast<uint32_t>(_mm256_movemask_ps(unordered));
      const __m256i bits = _mm256_castps_si256(r);
      const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), one);
      __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(bits, rounding), lsb), 16);
      rounded = _mm256_blendv_epi8(rounded, _mm256_set1_epi32(0x7FC0), _mm256_castps_si256(unordered));
      const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(rounded), _mm256_extracti128_si256(rounded, 1));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(acc + d), packed);
    }
#endif
    for (; d < n; ++d) {
      const float r = bfloat16_to_float(acc[d]) + bfloat16_to_float(g[d]);
      nan |= r != r;
      acc[d] = float_to_bfloat16(r);
    }
    return nan != 0;
  }
#if defined(__F16C__)
  for (; d + 8 <= n; d += 8) {
    const __m256 a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(acc + d)));
    const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g + d)));
    const __m256 r = _mm256_add_ps(a, x);
    nan |= static_cast<uint32_t>(_mm256_movemask_ps(_mm256_cmp_ps(r, r, _CMP_UNORD_Q)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(acc + d), _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
#endif
  for (; d < n; ++d) {
    const float r = half_to_float(acc[d]) + half_to_float(g[d]);
    nan |= r != r;
    acc[d] = float_to_half(r);
  }
  return nan != 0;
}

// acc[0, n) += alpha * g[0, n) for float16/bfloat16 rows: elements before `body` as torch's vector
// body computes them, T(fma(g, alpha, acc)); the rest as its scalar tail, T(acc + T(alpha * g)). With
// alpha 1 both are T(acc + g).
bool add_row16(uint16_t* acc, const uint16_t* g, int64_t n, float alpha, int64_t body, DType dtype) {
  if (alpha == 1.0f) return add_row16_unit(acc, g, n, dtype);
  float a[kBlock], x[kBlock], t[kBlock];
  uint16_t rounded[kBlock];
  uint32_t nan = 0;
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    const int64_t len = n - begin < kBlock ? n - begin : kBlock;
    widen(acc + begin, a, len, dtype);
    widen(g + begin, x, len, dtype);
    const int64_t vector_part = body <= begin ? 0 : (body - begin < len ? body - begin : len);
    for (int64_t d = 0; d < vector_part; ++d) a[d] = fused(x[d], alpha, a[d]);
    for (int64_t d = vector_part; d < len; ++d) t[d] = alpha * x[d];
    narrow(t + vector_part, rounded, len - vector_part, dtype);
    widen(rounded, t + vector_part, len - vector_part, dtype);
    for (int64_t d = vector_part; d < len; ++d) a[d] += t[d];
    for (int64_t d = 0; d < len; ++d) nan |= a[d] != a[d];
    narrow(a, acc + begin, len, dtype);
  }
  return nan != 0;
}

template <typename Index>
bool backward_rows_typed(const EmbeddingBackwardProblem& p, const int64_t* counts, int64_t begin, int64_t end) {
  const Index* indices = static_cast<const Index*>(p.indices);
  const int64_t dim = p.dim;
  const size_t element = dtype_size(p.dtype);
  char* gw = static_cast<char*>(p.grad_weight);
  const char* grad = static_cast<const char*>(p.grad);
  bool nan = false;
  for (int64_t i = 0; i < p.num_indices; ++i) {
    if (i + kPrefetchAhead < p.num_indices) {
      const int64_t ahead = indices[i + kPrefetchAhead];
      if (ahead >= begin && ahead < end) prefetch_row(gw + ahead * dim * element, dim * static_cast<int64_t>(element));
    }
    const int64_t k = indices[i];
    if (k == p.padding_idx || k < begin || k >= end) continue;
    const double scale = counts ? 1.0 / static_cast<double>(counts[k]) : 1.0;
    void* acc = gw + k * dim * element;
    const void* g = grad + i * dim * element;
    switch (p.dtype) {
      case DType::kFloat32:
        nan |= add_row(static_cast<float*>(acc), static_cast<const float*>(g), dim, static_cast<float>(scale));
        break;
      case DType::kFloat64:
        nan |= add_row(static_cast<double*>(acc), static_cast<const double*>(g), dim, scale);
        break;
      case DType::kBFloat16:
        nan |= add_row16(static_cast<uint16_t*>(acc), static_cast<const uint16_t*>(g), dim,
                         bfloat16_to_float(float_to_bfloat16(static_cast<float>(scale))),
                         dim - dim % p.torch_vector_elements, p.dtype);
        break;
      case DType::kFloat16:
        nan |= add_row16(static_cast<uint16_t*>(acc), static_cast<const uint16_t*>(g), dim,
                         half_to_float(float_to_half(static_cast<float>(scale))),
                         dim - dim % p.torch_vector_elements, p.dtype);
        break;
      default: break;
    }
  }
  return nan;
}

bool backward_rows(const EmbeddingBackwardProblem& p, const int64_t* counts, int64_t begin, int64_t end) {
  return p.index_type == IndexType::kInt32 ? backward_rows_typed<int32_t>(p, counts, begin, end)
                                           : backward_rows_typed<int64_t>(p, counts, begin, end);
}

// best/out hold the running maximum's bits; a later element replaces it only when strictly greater.
template <typename T, typename Index>
void bag_max_step(T* __restrict out, Index* __restrict mi, const T* __restrict row, int64_t n, Index idx) {
  for (int64_t d = 0; d < n; ++d) {
    const bool greater = row[d] > out[d];
    out[d] = greater ? row[d] : out[d];
    mi[d] = greater ? idx : mi[d];
  }
}

// 16-bit rows: compared as float (best holds the maximum widened), the bits copied.
template <typename Index>
void bag_max_step16(uint16_t* __restrict out, float* __restrict best, Index* __restrict mi, const uint16_t* row,
                    int64_t n, Index idx, DType dtype) {
  float v[kBlock];
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    const int64_t len = n - begin < kBlock ? n - begin : kBlock;
    widen(row + begin, v, len, dtype);
    for (int64_t d = 0; d < len; ++d) {
      const bool greater = v[d] > best[begin + d];
      best[begin + d] = greater ? v[d] : best[begin + d];
      out[begin + d] = greater ? row[begin + d] : out[begin + d];
      mi[begin + d] = greater ? idx : mi[begin + d];
    }
  }
}

// Narrow rows (a few vectors wide; DLRM's 16-float tables): one bag of float32/float64 rows, kLanes
// columns at a time, the running maximum and its index kept in vector registers over the whole bag
// (GCC vector types of at most 64 bytes: one register, or halves or quarters of it on narrower ISAs),
// stored once; the last columns (fewer than kLanes) one at a time. A later element replaces the
// maximum only when strictly greater, as in bag_max_step; a bag of padding only (or empty) gives zeros.
template <typename T, typename Index>
struct BagColumns {
  static constexpr int64_t kLanes = 64 / (sizeof(T) > sizeof(Index) ? sizeof(T) : sizeof(Index));
  typedef T Values __attribute__((vector_size(kLanes * sizeof(T))));
  typedef Index Indices __attribute__((vector_size(kLanes * sizeof(Index))));
  typedef decltype(Values{} > Values{}) Mask;

  static void bag(const T* weight, int64_t stride, const Index* ids, int64_t count, Index pad, int64_t dim,
                  T* __restrict out, Index* __restrict mi) {
    int64_t first = 0;
    while (first < count && ids[first] == pad) ++first;
    if (first == count) {
      for (int64_t d = 0; d < dim; ++d) out[d] = T(0);
      for (int64_t d = 0; d < dim; ++d) mi[d] = 0;
      return;
    }
    int64_t col = 0;
    for (; col + kLanes <= dim; col += kLanes) {
      Values best;
      memcpy(&best, weight + ids[first] * stride + col, sizeof best);
      Indices arg = Indices{} + ids[first];
      for (int64_t i = first + 1; i < count; ++i) {
        const Index idx = ids[i];
        if (idx == pad) continue;
        Values row;
        memcpy(&row, weight + idx * stride + col, sizeof row);
        const Mask greater = row > best;
        best = greater ? row : best;
        arg = __builtin_convertvector(greater, Indices) ? Indices{} + idx : arg;
      }
      memcpy(out + col, &best, sizeof best);
      memcpy(mi + col, &arg, sizeof arg);
    }
    for (; col < dim; ++col) {
      T best = weight[ids[first] * stride + col];
      Index arg = ids[first];
      for (int64_t i = first + 1; i < count; ++i) {
        const Index idx = ids[i];
        if (idx == pad) continue;
        const T v = weight[idx * stride + col];
        arg = v > best ? idx : arg;
        best = v > best ? v : best;
      }
      out[col] = best;
      mi[col] = arg;
    }
  }
};

// Rows up to this many BagColumns vectors wide (float32/float64) take BagColumns; wider ones go row by
// row, the maximum kept in the output: re-reading a long bag's rows once per vector of columns costs
// more.
constexpr int64_t kNarrowRowVectors = 2;

template <typename T, typename Index>
void bag_max_typed(const BagMaxProblem& p, int64_t begin, int64_t end, float* best) {
  const Index* indices = static_cast<const Index*>(p.indices);
  const Index* offsets = static_cast<const Index*>(p.offsets);
  const T* weight = static_cast<const T*>(p.weight);
  const Index pad = static_cast<Index>(p.padding_idx);
  constexpr bool kWide16 = sizeof(T) == 2;
  const int64_t dim = p.dim;
  bool narrow = false;
  if constexpr (!kWide16) narrow = dim <= kNarrowRowVectors * BagColumns<T, Index>::kLanes;
  for (int64_t b = begin; b < end; ++b) {
    T* out = static_cast<T*>(p.output) + b * dim;
    Index* mi = static_cast<Index*>(p.max_indices) + b * dim;
    const int64_t start = offsets[b], stop = b + 1 < p.num_bags ? offsets[b + 1] : p.num_indices;
    int64_t size = stop - start;
    if constexpr (!kWide16) {
      if (narrow) {
        for (int64_t i = start; i < stop; ++i) {
          if (i + kPrefetchAhead < p.num_indices) {
            prefetch_row(weight + indices[i + kPrefetchAhead] * p.weight_row_stride, dim * static_cast<int64_t>(sizeof(T)));
          }
          static_cast<Index*>(p.offset2bag)[i] = static_cast<Index>(b);
          size -= indices[i] == pad;
        }
        BagColumns<T, Index>::bag(weight, p.weight_row_stride, indices + start, stop - start, pad, dim, out, mi);
        static_cast<Index*>(p.bag_size)[b] = static_cast<Index>(size);
        continue;
      }
    }
    bool first = true;
    for (int64_t i = start; i < stop; ++i) {
      if (i + kPrefetchAhead < p.num_indices) {
        prefetch_row(weight + indices[i + kPrefetchAhead] * p.weight_row_stride, dim * static_cast<int64_t>(sizeof(T)));
      }
      static_cast<Index*>(p.offset2bag)[i] = static_cast<Index>(b);
      const Index idx = indices[i];
      if (idx == pad) {
        --size;
        continue;
      }
      const T* row = weight + idx * p.weight_row_stride;
      if (first) {
        memcpy(out, row, static_cast<size_t>(dim) * sizeof(T));
        for (int64_t d = 0; d < dim; ++d) mi[d] = idx;
        if constexpr (kWide16) widen(reinterpret_cast<const uint16_t*>(row), best, dim, p.dtype);
        first = false;
      } else if constexpr (kWide16) {
        bag_max_step16(reinterpret_cast<uint16_t*>(out), best, mi, reinterpret_cast<const uint16_t*>(row), dim,
                       idx, p.dtype);
      } else {
        bag_max_step(out, mi, row, dim, idx);
      }
    }
    if (first) {
      memset(out, 0, static_cast<size_t>(dim) * sizeof(T));
      memset(mi, 0, static_cast<size_t>(dim) * sizeof(Index));
    }
    static_cast<Index*>(p.bag_size)[b] = static_cast<Index>(size);
  }
}

template <typename Index>
void bag_max_indexed(const BagMaxProblem& p, int64_t begin, int64_t end, float* best) {
  switch (p.dtype) {
    case DType::kFloat32: return bag_max_typed<float, Index>(p, begin, end, best);
    case DType::kFloat64: return bag_max_typed<double, Index>(p, begin, end, best);
    case DType::kFloat16:
    case DType::kBFloat16: return bag_max_typed<uint16_t, Index>(p, begin, end, best);
    default: return;
  }
}

void bag_max_rows(const BagMaxProblem& p, int64_t begin, int64_t end) {
  // The widened running maxima of 16-bit rows: one row's worth, on the stack when it fits.
  constexpr int64_t kStackFloats = 4096;
  float stack_best[kStackFloats];
  float* best = stack_best;
  float* heap_best = nullptr;
  if (dtype_size(p.dtype) == 2 && p.dim > kStackFloats) {
    heap_best = new float[static_cast<size_t>(p.dim)];
    best = heap_best;
  }
  if (p.index_type == IndexType::kInt32) {
    bag_max_indexed<int32_t>(p, begin, end, best);
  } else {
    bag_max_indexed<int64_t>(p, begin, end, best);
  }
  delete[] heap_best;
}

extern const EmbeddingKernels kKernels = {&backward_rows, &bag_max_rows};
