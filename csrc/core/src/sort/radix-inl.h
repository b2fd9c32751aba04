// LSD radix sort of packed or wide elements (included inside namespace kwker::sort_detail::<isa>).
// Each pass is a stable counting scatter by one digit of the key, so the whole sort is stable;
// digits equal in every element are skipped. Rows long enough to leave the cache use 11-bit digits
// where that saves a pass over memory (2048 counters each); otherwise 8-bit digits.

// Rows from this length on use 11-bit digits (bench: token-ids-i32-1m, length-bucket-1m-*).
inline constexpr int64_t kLongRadixRow = 65536;

// Sorts src[0, n) by kDigits digits of kBits bits of Ops::radix_key, stably; dst is scratch.
// Returns the buffer that holds the result.
// Not inlined: its counters (up to 48 KiB) would otherwise sit in every caller's stack frame.
template <typename Ops, int kDigits, int kBits>
[[gnu::noinline]] typename Ops::Element* radix_sort(typename Ops::Element* src, typename Ops::Element* dst,
                                                    int64_t n) {
  constexpr int kValues = 1 << kBits;
  constexpr uint64_t kMask = kValues - 1;
  uint32_t counts[kDigits][kValues] = {};
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t key = Ops::radix_key(src[i]);
    for (int d = 0; d < kDigits; ++d) ++counts[d][(key >> (kBits * d)) & kMask];
  }
  for (int d = 0; d < kDigits; ++d) {
    uint32_t* count = counts[d];
    bool constant_digit = false;
    uint32_t offset = 0;
    for (int v = 0; v < kValues; ++v) {
      constant_digit |= count[v] == n;
      const uint32_t c = count[v];
      count[v] = offset;
      offset += c;
    }
    if (constant_digit) continue;
    for (int64_t i = 0; i < n; ++i) dst[count[(Ops::radix_key(src[i]) >> (kBits * d)) & kMask]++] = src[i];
    swap_values(src, dst);
  }
  return src;
}

// Bits (at least 1) that keys of this range need.
inline int key_bits_for_range(uint64_t range) { return 64 - __builtin_clzll(range | 1); }

// radix_sort in `passes` (1..kPasses) digits of kBits bits.
template <typename Ops, int kBits, int kPasses>
typename Ops::Element* radix_sort_in_passes(typename Ops::Element* src, typename Ops::Element* dst,
                                            int64_t n, int passes) {
  if constexpr (kPasses > 1) {
    if (passes < kPasses) return radix_sort_in_passes<Ops, kBits, kPasses - 1>(src, dst, n, passes);
  }
  return radix_sort<Ops, kPasses, kBits>(src, dst, n);
}

// radix_sort over the low `key_bits` (1..64; at most 32 for packed elements) bits of the keys.
template <typename Ops>
typename Ops::Element* radix_sort(typename Ops::Element* src, typename Ops::Element* dst, int64_t n,
                                  int key_bits) {
  constexpr int kMaxKeyBits = std::is_same_v<typename Ops::Element, WideElement> ? 64 : 32;
  const int passes11 = (key_bits + 10) / 11, passes8 = (key_bits + 7) / 8;
  if (n >= kLongRadixRow && passes11 < passes8) {
    return radix_sort_in_passes<Ops, 11, (kMaxKeyBits + 10) / 11>(src, dst, n, passes11);
  }
  return radix_sort_in_passes<Ops, 8, kMaxKeyBits / 8>(src, dst, n, passes8);
}

// A count, not a boolean OR: integer sums vectorise.
template <typename Ops>
bool has_equal_neighbours(const typename Ops::Element* a, int64_t n) {
  int64_t equal = 0;
  for (int64_t i = 1; i < n; ++i) equal += !Ops::less(a[i - 1], a[i]);
  return equal != 0;
}
