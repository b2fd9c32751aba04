// An LSD radix sort of unsigned integer keys (no payload), for the baseline code that needs only the
// keys in order (quantile's order statistics, unique's distinct values, coalesce's packed keys).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace kwker {

// LSD radix sort of keys[0, n) on their bits [low_bits, high_bits), in as few passes of at most 12
// bits as cover them (equal widths), skipping digits all keys share. Keys equal on those bits keep
// their order (a payload packed below stays put); bits from high_bits up must be the same in all keys.
// buffer: n keys of scratch (a ScratchArray where n is large: the scatter writes far apart). Returns
// where the sorted keys are: keys or buffer, whichever the last pass wrote.
template <typename Bits>
inline Bits* key_radix_sort(Bits* keys, int64_t n, Bits* buffer, int low_bits = 0,
                            int high_bits = 8 * static_cast<int>(sizeof(Bits))) {
  constexpr int kMaxDigitBits = 12;
  const int bits = high_bits - low_bits;
  if (bits <= 0 || n < 2) return keys;
  const int digits = (bits + kMaxDigitBits - 1) / kMaxDigitBits;
  const int digit_bits = (bits + digits - 1) / digits;
  const size_t radix = size_t{1} << digit_bits;
  const Bits mask = static_cast<Bits>(radix - 1);
  std::vector<int64_t> counts(static_cast<size_t>(digits) * radix, 0);
  for (int64_t i = 0; i < n; ++i) {
    for (int d = 0; d < digits; ++d) ++counts[d * radix + ((keys[i] >> (low_bits + d * digit_bits)) & mask)];
  }
  Bits *from = keys, *to = buffer;
  for (int d = 0; d < digits; ++d) {
    int64_t* c = counts.data() + d * radix;
    if (*std::max_element(c, c + radix) == n) continue;  // one digit value: the pass changes nothing
    int64_t running = 0;
    for (size_t v = 0; v < radix; ++v) {
      const int64_t k = c[v];
      c[v] = running;
      running += k;
    }
    const int shift = low_bits + d * digit_bits;
    for (int64_t i = 0; i < n; ++i) to[c[(from[i] >> shift) & mask]++] = from[i];
    std::swap(from, to);
  }
  return from;
}

template <typename Bits>
inline void key_radix_sort(Bits* keys, int64_t n, std::vector<Bits>& buffer, int low_bits = 0) {
  buffer.resize(static_cast<size_t>(n));
  const Bits* sorted = key_radix_sort(keys, n, buffer.data(), low_bits);
  if (sorted != keys) std::copy(sorted, sorted + n, keys);
}

}  // namespace kwker
