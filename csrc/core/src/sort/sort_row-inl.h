// One row of a sort, compiled once per ISA (included inside namespace kwker::sort_detail::<isa>).
//
// Algorithm. Elements become canonical keys (sort_keys.h) packed with their position.
//  - Stable order: LSD radix sort by 8-bit digits (stable, so equal keys keep position order),
//    skipping digits that are the same in every element.
//  - torch's unstable order: libstdc++'s std::sort (introsort) on (value, index) pairs decides every
//    step by comparator outcomes only. When no two keys are equal every correct sort gives the same
//    permutation, so the radix result is returned. Otherwise the introsort runs here step for step:
//    same depth limit, same median-of-three pivot, same Hoare partition (its stops found from
//    vector compare masks, simd-inl.h), same heapsort fallback, and each leaf of <= 16 elements stably sorted, which is
//    what libstdc++'s final insertion sort does to it (no element can cross a leaf boundary).
// Where equal keys are likely (long rows, narrow keys, or an earlier row of the same call had them)
// the radix attempt is skipped. Rows of <= 16 elements: std::sort is an insertion sort, i.e. stable.
// Keys of 64-bit types whose range in the row spans less than 2^32 are rebased to 32 bits.
// Cost: O(n) per radix digit; O(n log n) for the introsort. Memory: the job's two buffers.

#include "simd-inl.h"

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
  static uint64_t position(uint64_t e) { return e & kLowHalf; }
  static unsigned digit(uint64_t e, int d) { return (e >> (32 + 8 * d)) & 0xFF; }
  static uint64_t* partition(uint64_t* first, uint64_t* last, uint64_t pivot);
  static void sort_leaf(uint64_t* first, uint64_t* last) { stable_sort_leaf(first, last - first); }
};

// Element of a row whose 64-bit keys span 2^32 or more.
struct WideElement {
  uint64_t key;
  uint64_t position;
};

struct WideOps {
  using Element = WideElement;
  static bool less(const WideElement& a, const WideElement& b) { return a.key < b.key; }
  static uint64_t position(const WideElement& e) { return e.position; }
  static unsigned digit(const WideElement& e, int d) { return (e.key >> (8 * d)) & 0xFF; }
  static WideElement* partition(WideElement* first, WideElement* last, WideElement pivot);
  static void sort_leaf(WideElement* first, WideElement* last);
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

// libstdc++'s __unguarded_partition(first, last, pivot), literally:
//   while (true) { while (less(*first, pivot)) ++first; --last; while (less(pivot, *last)) --last;
//                  if (!(first < last)) return first; swap(*first, *last); ++first; }
inline WideElement* WideOps::partition(WideElement* first, WideElement* last, WideElement pivot) {
  while (true) {
    while (first->key < pivot.key) ++first;
    --last;
    while (pivot.key < last->key) --last;
    if (!(first < last)) return first;
    swap_values(*first, *last);
    ++first;
  }
}

// The same partition, with its stops read from bit masks. Between the two scan fronts no element
// has moved yet, so where each front stops next is decided by the elements as they were when their
// 64-element block was masked: the left front stops at the next element >= pivot (or at the last
// right stop, whose swapped-in element is >= pivot), the right front at the previous element <= pivot;
// once the right stop is at or left of the left stop the fronts have crossed and the left stop is
// the cut. Hence the same swaps and the same cut as the loop above, without a branch per element.
inline uint64_t* PackedOps::partition(uint64_t* first, uint64_t* last, uint64_t pivot) {
  const uint64_t not_less = pivot & ~kLowHalf;    // x >= not_less  <=>  !less(x, pivot)
  const uint64_t not_greater = pivot | kLowHalf;  // x <= not_greater  <=>  !less(pivot, x)
  uint64_t* left_block = first;
  uint64_t left_stops = not_below_mask64(left_block, not_less);
  uint64_t* right_top = last;  // right_stops bit i stands for right_top[-1 - i]
  uint64_t right_stops = not_above_mask64_reversed(right_top - 64, not_greater);
  uint64_t* bound = last;  // the last right stop: from here on the elements are final
  while (true) {
    while (left_stops == 0) {
      left_block += 64;
      if (left_block >= bound) return bound;
      left_stops = not_below_mask64(left_block, not_less);
    }
    uint64_t* f = left_block + __builtin_ctzll(left_stops);
    if (f >= bound) return bound;
    left_stops &= left_stops - 1;
    while (right_stops == 0) {
      right_top -= 64;
      if (right_top - 1 <= f) return f;
      right_stops = not_above_mask64_reversed(right_top - 64, not_greater);
    }
    uint64_t* l = right_top - 1 - __builtin_ctzll(right_stops);
    if (l <= f) return f;
    right_stops &= right_stops - 1;
    swap_values(*f, *l);
    bound = l;
  }
}

// Stable insertion sort: the order libstdc++'s final insertion sort leaves a leaf in.
inline void WideOps::sort_leaf(WideElement* first, WideElement* last) {
  for (WideElement* i = first + 1; i < last; ++i) {
    const WideElement v = *i;
    WideElement* j = i;
    for (; j > first && v.key < j[-1].key; --j) *j = j[-1];
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
    E* cut = Ops::partition(first + 1, last, E(*first));
    introsort_loop<Ops>(cut, last, depth_limit);
    last = cut;
  }
  Ops::sort_leaf(first, last);
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

// Rows this long or longer are assumed to hold equal keys (real data of this size nearly always
// does): the radix attempt that could prove otherwise is skipped.
inline constexpr int64_t kTiesAssumedLength = 16384;

// Sorts elements[0, n) (built by `fill`, which may be called again) and writes the outputs.
template <typename Ops, typename Bits, int kDigits, typename Fill>
void sort_elements(const RowJob& job, typename Ops::Element* a, typename Ops::Element* b,
                   bool ties_likely, const Fill& fill) {
  const int64_t n = job.n;
  fill(a);
  if (n <= kIntrosortThreshold) {  // std::sort is insertion sort here: the stable order either way
    Ops::sort_leaf(a, a + n);
    write_output<Ops, Bits>(job, a);
    return;
  }
  const bool introsort_order = job.ties == TieOrder::kIntrosort;
  ties_likely |= n >= kTiesAssumedLength || __atomic_load_n(job.ties_seen, __ATOMIC_RELAXED);
  if (!introsort_order || !ties_likely) {
    const auto* sorted = radix_sort<Ops, kDigits>(a, b, n);
    if (!introsort_order || !has_equal_neighbours<Ops>(sorted, n)) {
      write_output<Ops, Bits>(job, sorted);
      return;
    }
    __atomic_store_n(job.ties_seen, 1, __ATOMIC_RELAXED);  // later rows skip the attempt
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
    const bool ties_likely = Format::key_bits <= 16 && n > (int64_t{1} << Format::key_bits) / 16;
    auto fill = [&](uint64_t* out) {
      for (int64_t i = 0; i < n; ++i) out[i] = (uint64_t{key_at(i)} << 32) | static_cast<uint64_t>(i);
    };
    sort_elements<PackedOps, Bits, Format::key_bits / 8>(job, job.buffer_a, job.buffer_b, ties_likely, fill);
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
      sort_elements<PackedOps, Bits, 4>(job, job.buffer_a, job.buffer_b, false, fill);
    } else {
      auto fill = [&](WideElement* out) {
        for (int64_t i = 0; i < n; ++i) out[i] = {key_at(i), static_cast<uint64_t>(i)};
      };
      sort_elements<WideOps, Bits, 8>(job, reinterpret_cast<WideElement*>(job.buffer_a),
                                      reinterpret_cast<WideElement*>(job.buffer_b), false, fill);
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
