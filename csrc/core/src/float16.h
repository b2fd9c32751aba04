// float16 and bfloat16 bits <-> float, as torch (c10::Half, c10::BFloat16) converts them: widening is
// exact; narrowing rounds to nearest, ties to even, and maps every NaN to c10's quiet NaN.
//
// Internal linkage on purpose: files compiled with ISA flags include this too, and one shared inline
// definition could be resolved to an AVX-512 copy in baseline code.
#pragma once

#include <bit>
#include <cstdint>

namespace kwker {
namespace {

inline float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
  if (exponent == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
  if (exponent != 0) return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
  const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;  // subnormal or zero: exact
  return sign ? -magnitude : magnitude;
}

inline float bfloat16_to_float(uint16_t b) { return std::bit_cast<float>(uint32_t{b} << 16); }

inline uint16_t float_to_bfloat16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0;
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

inline uint16_t float_to_half(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return sign | 0x7E00u;
  if (a >= 0x38800000u) {  // a normal half or beyond: rebias the exponent, round off 13 bits
    if (a >= 0x47800000u) return sign | 0x7C00u;  // at least 2^16: infinity
    const uint32_t r = a - 0x38000000u;
    return sign | static_cast<uint16_t>((r + 0xFFFu + ((r >> 13) & 1u)) >> 13);
  }
  const uint32_t e = a >> 23;
  if (e < 102) return sign;  // below 2^-25: rounds to zero
  const uint32_t m = (a & 0x7FFFFFu) | 0x800000u;  // value = m * 2^(e - 150) = (m >> s) units of 2^-24
  const uint32_t s = 126 - e;
  const uint32_t q = m >> s, rem = m & ((1u << s) - 1), half = 1u << (s - 1);
  return sign | static_cast<uint16_t>(q + (rem > half || (rem == half && (q & 1u))));
}

}  // namespace
}  // namespace kwker
