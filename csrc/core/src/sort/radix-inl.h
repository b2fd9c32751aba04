// LSD radix sort of packed or wide elements (included inside namespace kwker::sort_detail::<isa>).
// Each pass is a stable counting scatter by one digit of the key, so the whole sort is stable;
// digits equal in every element are skipped. Rows long enough to leave the cache use digits of up to
// 11 bits where that saves a pass over memory (2048 counters each), the key's bits spread evenly over
// the passes (narrower digits scatter to fewer places at once); otherwise 8-bit digits.

// Rows from this length on use 11-bit digits (bench: token-ids-i32-1m, length-bucket-1m-*).
inline constexpr int64_t kLongRadixRow = 65536;

// Sorts src[0, n) by kDigits digits of Ops::radix_key, from bit low_bit up, stably; dst is scratch.
// The digits are of `digit_bits` (<= kMaxBits) bits if kNarrowed, else of kMaxBits (constants: the
// short rows' passes are bound by instructions, not memory). Returns the buffer that holds the result.
// Not inlined: its counters (up to 48 KiB) would otherwise sit in every caller's stack frame.
template <typename Ops, int kDigits, int kMaxBits, bool kNarrowed>
[[gnu::noinline]] typename Ops::Element* radix_sort(typename Ops::Element* src, typename Ops::Element* dst,
                                                    int64_t n, int digit_bits, int low_bit) {
  const int bits = kNarrowed ? digit_bits : kMaxBits;
  const int values = 1 << bits;
  const uint64_t mask = static_cast<uint64_t>(values - 1);
  uint32_t counts[kDigits][1 << kMaxBits] = {};
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t key = Ops::radix_key(src[i]) >> low_bit;
    for (int d = 0; d < kDigits; ++d) ++counts[d][(key >> (bits * d)) & mask];
  }
  for (int d = 0; d < kDigits; ++d) {
    uint32_t* count = counts[d];
    bool constant_digit = false;
    uint32_t offset = 0;
    for (int v = 0; v < values; ++v) {
      constant_digit |= count[v] == n;
      const uint32_t c = count[v];
      count[v] = offset;
      offset += c;
    }
    if (constant_digit) continue;
    const int shift = low_bit + bits * d;
    for (int64_t i = 0; i < n; ++i) dst[count[(Ops::radix_key(src[i]) >> shift) & mask]++] = src[i];
    swap_values(src, dst);
  }
  return src;
}

// Bits (at least 1) that keys of this range need.
inline int key_bits_for_range(uint64_t range) { return 64 - __builtin_clzll(range | 1); }

// radix_sort of key_bits bits in `passes` (1..kPasses) digits of at most kMaxBits bits.
template <typename Ops, int kMaxBits, bool kNarrowed, int kPasses>
typename Ops::Element* radix_sort_in_passes(typename Ops::Element* src, typename Ops::Element* dst,
                                            int64_t n, int key_bits, int passes, int low_bit) {
  if constexpr (kPasses > 1) {
    if (passes < kPasses) {
      return radix_sort_in_passes<Ops, kMaxBits, kNarrowed, kPasses - 1>(src, dst, n, key_bits, passes, low_bit);
    }
  }
  return radix_sort<Ops, kPasses, kMaxBits, kNarrowed>(src, dst, n, (key_bits + kPasses - 1) / kPasses, low_bit);
}

// radix_sort over `key_bits` (1..Ops::kRadixBits) bits of the keys, from bit low_bit up.
template <typename Ops>
typename Ops::Element* radix_sort(typename Ops::Element* src, typename Ops::Element* dst, int64_t n,
                                  int key_bits, int low_bit = 0) {
  constexpr int kMaxKeyBits = Ops::kRadixBits;
  const int passes11 = (key_bits + 10) / 11, passes8 = (key_bits + 7) / 8;
  if (n >= kLongRadixRow && passes11 < passes8) {
    return radix_sort_in_passes<Ops, 11, true, (kMaxKeyBits + 10) / 11>(src, dst, n, key_bits, passes11, low_bit);
  }
  return radix_sort_in_passes<Ops, 8, false, (kMaxKeyBits + 7) / 8>(src, dst, n, key_bits, passes8, low_bit);
}

// A count, not a boolean OR: integer sums vectorise.
template <typename Ops>
bool has_equal_neighbours(const typename Ops::Element* a, int64_t n) {
  int64_t equal = 0;
  for (int64_t i = 1; i < n; ++i) equal += !Ops::less(a[i - 1], a[i]);
  return equal != 0;
}
