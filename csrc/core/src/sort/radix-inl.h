// LSD radix sort of packed or wide elements (included inside namespace kwker::sort_detail::<isa>).
// Each pass is a stable counting scatter by one 8-bit digit, so the whole sort is stable; digits
// equal in every element are skipped.

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

// radix_sort over the `digits` (1..8) low digits the keys need.
template <typename Ops>
typename Ops::Element* radix_sort(typename Ops::Element* src, typename Ops::Element* dst, int64_t n,
                                  int digits) {
  switch (digits) {
    case 1: return radix_sort<Ops, 1>(src, dst, n);
    case 2: return radix_sort<Ops, 2>(src, dst, n);
    case 3: return radix_sort<Ops, 3>(src, dst, n);
    case 4: return radix_sort<Ops, 4>(src, dst, n);
  }
  if constexpr (std::is_same_v<typename Ops::Element, WideElement>) {
    switch (digits) {
      case 5: return radix_sort<Ops, 5>(src, dst, n);
      case 6: return radix_sort<Ops, 6>(src, dst, n);
      case 7: return radix_sort<Ops, 7>(src, dst, n);
      default: return radix_sort<Ops, 8>(src, dst, n);
    }
  }
  return src;  // unreachable: packed keys have at most 4 digits
}

template <typename Ops>
bool has_equal_neighbours(const typename Ops::Element* a, int64_t n) {
  bool equal = false;
  for (int64_t i = 1; i < n; ++i) equal |= !Ops::less(a[i - 1], a[i]);
  return equal;
}

// Radix digits (of 8 bits) a key range needs.
inline int digits_for_range(uint64_t range) { return (64 - __builtin_clzll(range | 1) + 7) / 8; }
