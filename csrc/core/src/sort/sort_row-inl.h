// One row of a sort, compiled once per ISA (included inside namespace kwker::sort_detail::<isa>).
//
// Algorithm. Elements become canonical keys (sort_keys.h) packed with their position.
//  - Stable order: LSD radix sort by 8-bit digits (stable, so equal keys keep position order),
//    skipping digits that are the same in every element.
//  - torch's unstable order: libstdc++'s std::sort (introsort) on (value, index) pairs decides every
//    step by comparator outcomes only. When no two keys are equal every correct sort gives the same
//    permutation, so the radix result is returned. Otherwise the introsort runs here step for step:
//    same depth limit, same median-of-three pivot, same Hoare partition (its scans vectorised in
//    simd_scan-inl.h), same heapsort fallback, and each leaf of <= 16 elements stably sorted, which is
//    what libstdc++'s final insertion sort does to it (no element can cross a leaf boundary).
// Keys of 64-bit types whose range in the row spans less than 2^32 are rebased to 32 bits.
// Cost: O(n) per radix digit; O(n log n) for the introsort. Memory: the job's two buffers.

#include "simd_scan-inl.h"

inline constexpr uint64_t kLowHalf = 0xFFFFFFFFull;

// Not std::swap: an inline std:: function instantiated in several ISA files may be linked as the copy
// built with the widest ISA and then run on a CPU without it. Everything here lives in the ISA's
// namespace.
template <typename T>
inline void swap_values(T& a, T& b) {
  T t = a;
  a = b;
  b = t;
}

// Packed element: key << 32 | position; compares by key only.
struct PackedOps {
  using Element = uint64_t;
  static bool less(uint64_t a, uint64_t b) { return (a >> 32) < (b >> 32); }
  // while (less(*p, pivot)) ++p;
  static uint64_t* skip_less(uint64_t* p, uint64_t pivot) {
    return first_not_below(p, pivot & ~kLowHalf);
  }
  // while (less(pivot, *p)) --p;
  static uint64_t* skip_greater(uint64_t* p, uint64_t pivot) {
    return last_not_above(p, pivot | kLowHalf);
  }
  static uint64_t position(uint64_t e) { return e & kLowHalf; }
  static unsigned digit(uint64_t e, int d) { return (e >> (32 + 8 * d)) & 0xFF; }
};

// Element of a row whose 64-bit keys span 2^32 or more.
struct WideElement {
  uint64_t key;
  uint64_t position;
};

struct WideOps {
  using Element = WideElement;
  static bool less(const WideElement& a, const WideElement& b) { return a.key < b.key; }
  static WideElement* skip_less(WideElement* p, const WideElement& pivot) {
    while (p->key < pivot.key) ++p;
    return p;
  }
  static WideElement* skip_greater(WideElement* p, const WideElement& pivot) {
    while (pivot.key < p->key) --p;
    return p;
  }
  static uint64_t position(const WideElement& e) { return e.position; }
  static unsigned digit(const WideElement& e, int d) { return (e.key >> (8 * d)) & 0xFF; }
};

// ---- stable: LSD radix sort -------------------------------------------------------------------

// Sorts src[0, n) by digits [0, kDigits) of Ops::digit, stably; dst is scratch. Returns the buffer
// that holds the result.
template <typename Ops, int kDigits>
typename Ops::Element* radix_sort(typename Ops::Element* src, typename Ops::Element* dst, int64_t n) {
  uint32_t counts[kDigits][256] = {};
  for (int64_t i = 0; i < n; ++i) {
    for (int d = 0; d < kDigits; ++d) ++counts[d][Ops::digit(src[i], d)];
  }
  for (int d = 0; d < kDigits; ++d) {
    uint32_t* count = counts[d];
    bool constant_digit = false;
    uint32_t offset = 0;
    for (int v = 0; v < 256; ++v) {
      constant_digit |= count[v] == n;
      const uint32_t c = count[v];
      count[v] = offset;
      offset += c;
    }
    if (constant_digit) continue;
    for (int64_t i = 0; i < n; ++i) dst[count[Ops::digit(src[i], d)]++] = src[i];
    swap_values(src, dst);
  }
  return src;
}

template <typename Ops>
bool has_equal_neighbours(const typename Ops::Element* a, int64_t n) {
  bool equal = false;
  for (int64_t i = 1; i < n; ++i) equal |= !Ops::less(a[i - 1], a[i]);
  return equal;
}

// ---- torch's unstable order: libstdc++ introsort, step for step --------------------------------

inline constexpr int64_t kIntrosortThreshold = 16;  // libstdc++'s _S_threshold

template <typename Ops, typename E>
void move_median_to_first(E* result, E* a, E* b, E* c) {
  if (Ops::less(*a, *b)) {
    if (Ops::less(*b, *c)) swap_values(*result, *b);
    else if (Ops::less(*a, *c)) swap_values(*result, *c);
    else swap_values(*result, *a);
  } else if (Ops::less(*a, *c)) {
    swap_values(*result, *a);
  } else if (Ops::less(*b, *c)) {
    swap_values(*result, *c);
  } else {
    swap_values(*result, *b);
  }
}

template <typename Ops, typename E>
E* unguarded_partition(E* first, E* last, const E pivot) {
  while (true) {
    first = Ops::skip_less(first, pivot);
    --last;
    last = Ops::skip_greater(last, pivot);
    if (!(first < last)) return first;
    swap_values(*first, *last);
    ++first;
  }
}

// Stable insertion sort: the order libstdc++'s final insertion sort leaves a leaf in.
template <typename Ops, typename E>
void insertion_sort(E* first, E* last) {
  for (E* i = first + 1; i < last; ++i) {
    const E v = *i;
    E* j = i;
    for (; j > first && Ops::less(v, j[-1]); --j) *j = j[-1];
    *j = v;
  }
}

template <typename Ops, typename E>
void introsort_loop(E* first, E* last, int depth_limit) {
  while (last - first > kIntrosortThreshold) {
    if (depth_limit == 0) {
      // libstdc++ falls back to __partial_sort(first, last, last): std::partial_sort is that call.
      std::partial_sort(first, last, last, [](const E& a, const E& b) { return Ops::less(a, b); });
      return;
    }
    --depth_limit;
    E* mid = first + (last - first) / 2;
    move_median_to_first<Ops>(first, first + 1, mid, last - 1);
    E* cut = unguarded_partition<Ops>(first + 1, last, E(*first));
    introsort_loop<Ops>(cut, last, depth_limit);
    last = cut;
  }
  insertion_sort<Ops>(first, last);
}

template <typename Ops, typename E>
void libstdcxx_introsort(E* first, int64_t n) {
  if (n < 2) return;
  const int depth_limit = 2 * (63 - __builtin_clzll(static_cast<unsigned long long>(n)));
  introsort_loop<Ops>(first, first + n, depth_limit);
}

// ---- one row -----------------------------------------------------------------------------------

template <typename Bits>
Bits load_bits(const void* base, int64_t i) {
  Bits b;
  std::memcpy(&b, static_cast<const char*>(base) + i * static_cast<int64_t>(sizeof(Bits)), sizeof b);
  return b;
}

template <typename Ops, typename Bits>
void write_output(const RowJob& job, const typename Ops::Element* sorted) {
  Bits* values = static_cast<Bits*>(job.values);
  if (job.values_stride == 1 && job.indices_stride == 1) {
    for (int64_t i = 0; i < job.n; ++i) {
      const int64_t pos = static_cast<int64_t>(Ops::position(sorted[i]));
      job.indices[i] = pos;
      values[i] = load_bits<Bits>(job.input, pos * job.input_stride);
    }
    return;
  }
  for (int64_t i = 0; i < job.n; ++i) {
    const int64_t pos = static_cast<int64_t>(Ops::position(sorted[i]));
    job.indices[i * job.indices_stride] = pos;
    values[i * job.values_stride] = load_bits<Bits>(job.input, pos * job.input_stride);
  }
}

// Sorts elements[0, n) (built by `fill`, which may be called again) and writes the outputs.
template <typename Ops, typename Bits, int kDigits, bool kTiesLikely, typename Fill>
void sort_elements(const RowJob& job, typename Ops::Element* a, typename Ops::Element* b,
                   const Fill& fill) {
  const int64_t n = job.n;
  const bool tie_order_is_introsort = job.ties == TieOrder::kIntrosort && n > kIntrosortThreshold;
  fill(a);
  if (!tie_order_is_introsort || !kTiesLikely) {
    const auto* sorted = radix_sort<Ops, kDigits>(a, b, n);
    if (!tie_order_is_introsort || !has_equal_neighbours<Ops>(sorted, n)) {
      write_output<Ops, Bits>(job, sorted);
      return;
    }
    fill(a);
  }
  libstdcxx_introsort<Ops>(a, n);
  write_output<Ops, Bits>(job, a);
}

template <typename Format, bool kDescending>
void sort_row_typed(const RowJob& job) {
  using Bits = typename Format::Bits;
  const int64_t n = job.n, stride = job.input_stride;
  auto key_at = [&](int64_t i) { return sort_key<Format, kDescending>(load_bits<Bits>(job.input, i * stride)); };

  if constexpr (Format::key_bits <= 32) {
    // Narrow keys leave no doubt about ties once a row is longer than 1/16 of the key space.
    constexpr bool kTiesLikely = Format::key_bits <= 16;
    const bool ties_likely = kTiesLikely && n > (int64_t{1} << Format::key_bits) / 16;
    auto fill = [&](uint64_t* out) {
      for (int64_t i = 0; i < n; ++i) out[i] = (uint64_t{key_at(i)} << 32) | static_cast<uint64_t>(i);
    };
    if (ties_likely) {
      sort_elements<PackedOps, Bits, Format::key_bits / 8, true>(job, job.buffer_a, job.buffer_b, fill);
    } else {
      sort_elements<PackedOps, Bits, Format::key_bits / 8, false>(job, job.buffer_a, job.buffer_b, fill);
    }
  } else {
    uint64_t lo = ~uint64_t{0}, hi = 0;
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t k = key_at(i);
      lo = k < lo ? k : lo;
      hi = k > hi ? k : hi;
    }
    if (n == 0 || hi - lo <= kLowHalf) {
      auto fill = [&](uint64_t* out) {
        for (int64_t i = 0; i < n; ++i) out[i] = ((key_at(i) - lo) << 32) | static_cast<uint64_t>(i);
      };
      sort_elements<PackedOps, Bits, 4, false>(job, job.buffer_a, job.buffer_b, fill);
    } else {
      auto fill = [&](WideElement* out) {
        for (int64_t i = 0; i < n; ++i) out[i] = {key_at(i), static_cast<uint64_t>(i)};
      };
      sort_elements<WideOps, Bits, 8, false>(job, reinterpret_cast<WideElement*>(job.buffer_a),
                                             reinterpret_cast<WideElement*>(job.buffer_b), fill);
    }
  }
}

template <DType D>
void sort_row_of(const RowJob& job) {
  if (job.order == SortOrder::kDescending) {
    sort_row_typed<KeyFormatOf<D>, true>(job);
  } else {
    sort_row_typed<KeyFormatOf<D>, false>(job);
  }
}

void sort_row(const RowJob& job) {
  switch (job.dtype) {
    case DType::kBool: return sort_row_of<DType::kBool>(job);
    case DType::kUInt8: return sort_row_of<DType::kUInt8>(job);
    case DType::kInt8: return sort_row_of<DType::kInt8>(job);
    case DType::kInt16: return sort_row_of<DType::kInt16>(job);
    case DType::kInt32: return sort_row_of<DType::kInt32>(job);
    case DType::kInt64: return sort_row_of<DType::kInt64>(job);
    case DType::kFloat16: return sort_row_of<DType::kFloat16>(job);
    case DType::kBFloat16: return sort_row_of<DType::kBFloat16>(job);
    case DType::kFloat32: return sort_row_of<DType::kFloat32>(job);
    case DType::kFloat64: return sort_row_of<DType::kFloat64>(job);
  }
}
