// An LSD radix sort of unsigned integer keys (no payload), for the baseline code that needs only the
// keys in order (quantile's order statistics, unique's distinct values).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace kwker {

// LSD radix sort of keys[0, n) by 11-bit digits, skipping digits all keys share. Only the bits from
// `low_bits` up are sorted on: keys equal there keep their order (a payload packed below stays put).
template <typename Bits>
inline void key_radix_sort(Bits* keys, int64_t n, std::vector<Bits>& buffer, int low_bits = 0) {
  constexpr int kDigitBits = 11;
  const int digits = (8 * static_cast<int>(sizeof(Bits)) - low_bits + kDigitBits - 1) / kDigitBits;
  constexpr size_t kRadix = size_t{1} << kDigitBits;
  std::vector<int64_t> counts(static_cast<size_t>(digits) * kRadix, 0);
  for (int64_t i = 0; i < n; ++i) {
    for (int d = 0; d < digits; ++d) ++counts[d * kRadix + ((keys[i] >> (low_bits + d * kDigitBits)) & (kRadix - 1))];
  }
  buffer.resize(static_cast<size_t>(n));
  Bits *from = keys, *to = buffer.data();
  for (int d = 0; d < digits; ++d) {
    int64_t* c = counts.data() + d * kRadix;
    if (*std::max_element(c, c + kRadix) == n) continue;  // one digit value: the pass changes nothing
    int64_t running = 0;
    for (size_t v = 0; v < kRadix; ++v) {
      const int64_t k = c[v];
      c[v] = running;
      running += k;
    }
    for (int64_t i = 0; i < n; ++i) to[c[(from[i] >> (low_bits + d * kDigitBits)) & (kRadix - 1)]++] = from[i];
    std::swap(from, to);
  }
  if (from != keys) std::copy(from, from + n, keys);
}

}  // namespace kwker
