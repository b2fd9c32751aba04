// The row loops of embedding_dense_backward and embedding_bag_max (kwker/embedding.h), written as plain
// loops over a row that the compiler vectorizes for this file's ISA; float16/bfloat16 rows go through
// float in blocks of kBlock elements (widening is exact; narrowing rounds to nearest even as c10 does).
//
// Included inside namespace kwker::embedding_detail::<isa>. No std:: templates here: their inline
// copies compiled with this file's ISA flags could be picked by the linker for baseline code.

constexpr int64_t kBlock = 64;
// Rows are read (bags) or updated (backward) at random places of a table that may be far larger than
// the caches: the row this many indices ahead is prefetched, up to kPrefetchLines cache lines of it.
constexpr int64_t kPrefetchAhead = 16;
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

#if defined(__AVX512F__)
constexpr int64_t kRegisterBytes = 64;
#elif defined(__AVX2__)
constexpr int64_t kRegisterBytes = 32;
#else
constexpr int64_t kRegisterBytes = 16;
#endif

// Bag max compares in C (float32/float64; float16/bfloat16 rows widened to float) and keeps each
// column's row as a Row, a signed integer as wide as C, so that a comparison's mask selects rows
// directly. GCC compiles vector code that mixes lane widths, or uses vectors wider than a register, to
// scalar code, and a conditional store to a masked store (slow on AMD): hence register-wide vector
// types of one lane width, and unconditional stores. embedding_bag_max declines tables whose row
// numbers do not fit a Row.
template <typename C>
struct MaxLanes {
  static constexpr int64_t kCount = kRegisterBytes / sizeof(C);
  typedef C Values __attribute__((vector_size(kRegisterBytes)));
  typedef decltype(Values{} > Values{}) Rows;
  typedef decltype(Rows{}[0] + 0) Row;
};

// best[0, n) holds the running maximum and arg[0, n) its row; a later element replaces the maximum
// only when strictly greater (a NaN never does; a NaN maximum stays).
template <typename C>
void bag_max_step(C* __restrict best, typename MaxLanes<C>::Row* __restrict arg, const C* __restrict v, int64_t n,
                  typename MaxLanes<C>::Row idx) {
  using L = MaxLanes<C>;
  const typename L::Rows idx_lanes = typename L::Rows{} + idx;
  int64_t d = 0;
  for (; d + L::kCount <= n; d += L::kCount) {
    typename L::Values b, x;
    typename L::Rows a;
    memcpy(&b, best + d, sizeof b);
    memcpy(&x, v + d, sizeof x);
    memcpy(&a, arg + d, sizeof a);
    const typename L::Rows greater = x > b;
    b = greater ? x : b;
    a = greater ? idx_lanes : a;
    memcpy(best + d, &b, sizeof b);
    memcpy(arg + d, &a, sizeof a);
  }
  for (; d < n; ++d) {
    const bool greater = v[d] > best[d];
    best[d] = greater ? v[d] : best[d];
    arg[d] = greater ? idx : arg[d];
  }
}

// Narrow rows (DLRM's 16-float tables), float32/float64: one bag, 64 bytes of columns at a time, the
// running maximum and its row in kVectors registers over the whole bag, stored once; the last columns
// (fewer than kLanes) one at a time. Same rule as bag_max_step; a bag of padding only (or empty) gives
// zeros.
template <typename T, typename Index>
struct BagColumns {
  using L = MaxLanes<T>;
  static constexpr int64_t kVectors = 64 / kRegisterBytes;
  static constexpr int64_t kLanes = kVectors * L::kCount;

  static void bag(const T* weight, int64_t stride, const Index* ids, int64_t count, Index pad, int64_t dim,
                  T* __restrict out, Index* __restrict mi) {
    using Row = typename L::Row;
    int64_t first = 0;
    while (first < count && ids[first] == pad) ++first;
    if (first == count) {
      for (int64_t d = 0; d < dim; ++d) out[d] = T(0);
      for (int64_t d = 0; d < dim; ++d) mi[d] = 0;
      return;
    }
    int64_t col = 0;
    for (; col + kLanes <= dim; col += kLanes) {
      typename L::Values best[kVectors];
      typename L::Rows arg[kVectors];
      const T* first_row = weight + ids[first] * stride + col;
      for (int64_t v = 0; v < kVectors; ++v) {
        memcpy(&best[v], first_row + v * L::kCount, sizeof best[v]);
        arg[v] = typename L::Rows{} + static_cast<Row>(ids[first]);
      }
      for (int64_t i = first + 1; i < count; ++i) {
        const Index idx = ids[i];
        if (idx == pad) continue;
        const T* row = weight + idx * stride + col;
        const typename L::Rows idx_lanes = typename L::Rows{} + static_cast<Row>(idx);
        for (int64_t v = 0; v < kVectors; ++v) {
          typename L::Values values;
          memcpy(&values, row + v * L::kCount, sizeof values);
          const typename L::Rows greater = values > best[v];
          best[v] = greater ? values : best[v];
          arg[v] = greater ? idx_lanes : arg[v];
        }
      }
      for (int64_t v = 0; v < kVectors; ++v) {
        memcpy(out + col + v * L::kCount, &best[v], sizeof best[v]);
        for (int64_t d = 0; d < L::kCount; ++d) mi[col + v * L::kCount + d] = static_cast<Index>(arg[v][d]);
      }
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
// row (bag_max_step), the maximum kept in memory: re-reading a long bag's rows once per 64 bytes of
// columns costs more.
constexpr int64_t kNarrowRowVectors = 2;

// T is the stored element (uint16_t for float16/bfloat16 rows), C what it is compared as.
template <typename T, typename Index>
void bag_max_typed(const BagMaxProblem& p, int64_t begin, int64_t end) {
  constexpr bool kWide16 = sizeof(T) == 2;
  using C = decltype(T{} * 1.0f);  // float for float32 and 16-bit rows, double for float64
  using Row = typename MaxLanes<C>::Row;
  const Index* indices = static_cast<const Index*>(p.indices);
  const Index* offsets = static_cast<const Index*>(p.offsets);
  const T* weight = static_cast<const T*>(p.weight);
  const Index pad = static_cast<Index>(p.padding_idx);
  const int64_t dim = p.dim;
  bool narrow = false;
  if constexpr (!kWide16) narrow = dim <= kNarrowRowVectors * BagColumns<T, Index>::kLanes;
  // Wide rows: each column's row, and for 16-bit rows the running maximum widened.
  Row* arg = narrow ? nullptr : new Row[static_cast<size_t>(dim)];
  float* best = kWide16 ? new float[static_cast<size_t>(dim)] : nullptr;
  float block[kBlock];
  for (int64_t b = begin; b < end; ++b) {
    T* out = static_cast<T*>(p.output) + b * dim;
    Index* mi = static_cast<Index*>(p.max_indices) + b * dim;
    const int64_t start = offsets[b], stop = b + 1 < p.num_bags ? offsets[b + 1] : p.num_indices;
    int64_t size = stop - start;
    if (narrow) {
      for (int64_t i = start; i < stop; ++i) {
        if (i + kPrefetchAhead < p.num_indices) {
          prefetch_row(weight + indices[i + kPrefetchAhead] * p.weight_row_stride, dim * static_cast<int64_t>(sizeof(T)));
        }
        static_cast<Index*>(p.offset2bag)[i] = static_cast<Index>(b);
        size -= indices[i] == pad;
      }
      if constexpr (!kWide16) {
        BagColumns<T, Index>::bag(weight, p.weight_row_stride, indices + start, stop - start, pad, dim, out, mi);
      }
      static_cast<Index*>(p.bag_size)[b] = static_cast<Index>(size);
      continue;
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
        for (int64_t d = 0; d < dim; ++d) arg[d] = static_cast<Row>(idx);
        if constexpr (kWide16) {
          widen(reinterpret_cast<const uint16_t*>(row), best, dim, p.dtype);
        } else {
          memcpy(out, row, static_cast<size_t>(dim) * sizeof(T));
        }
        first = false;
      } else if constexpr (kWide16) {
        for (int64_t col = 0; col < dim; col += kBlock) {
          const int64_t len = dim - col < kBlock ? dim - col : kBlock;
          widen(reinterpret_cast<const uint16_t*>(row) + col, block, len, p.dtype);
          bag_max_step<float>(best + col, arg + col, block, len, static_cast<Row>(idx));
        }
      } else {
        bag_max_step<C>(out, arg, row, dim, static_cast<Row>(idx));
      }
    }
    if (first) {
      memset(out, 0, static_cast<size_t>(dim) * sizeof(T));
      memset(mi, 0, static_cast<size_t>(dim) * sizeof(Index));
    } else {
      for (int64_t d = 0; d < dim; ++d) mi[d] = static_cast<Index>(arg[d]);
      // The maximum's bits are its row's (a NaN keeps its payload).
      if constexpr (kWide16) {
        for (int64_t d = 0; d < dim; ++d) out[d] = weight[arg[d] * p.weight_row_stride + d];
      }
    }
    static_cast<Index*>(p.bag_size)[b] = static_cast<Index>(size);
  }
  delete[] arg;
  delete[] best;
}

template <typename Index>
void bag_max_indexed(const BagMaxProblem& p, int64_t begin, int64_t end) {
  switch (p.dtype) {
    case DType::kFloat32: return bag_max_typed<float, Index>(p, begin, end);
    case DType::kFloat64: return bag_max_typed<double, Index>(p, begin, end);
    case DType::kFloat16:
    case DType::kBFloat16: return bag_max_typed<uint16_t, Index>(p, begin, end);
    default: return;
  }
}

void bag_max_rows(const BagMaxProblem& p, int64_t begin, int64_t end) {
  if (p.index_type == IndexType::kInt32) {
    bag_max_indexed<int32_t>(p, begin, end);
  } else {
    bag_max_indexed<int64_t>(p, begin, end);
  }
}

extern const EmbeddingKernels kKernels = {&backward_rows, &bag_max_rows};
