// Canonical sort keys: each element maps to an unsigned integer whose plain order is torch's
// comparator order. All NaNs map to one key above +inf, -0.0 and +0.0 to one key; descending order
// complements the key, which also moves NaN first, as torch's descending comparator does. Two elements
// tie under torch's comparator exactly when their keys are equal, so any algorithm making the same
// decisions on keys makes the same decisions as torch's comparator.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kwker/dtype.h"

namespace kwker::sort_detail {

enum class KeyKind { kUnsigned, kSigned, kFloat };

template <typename B, KeyKind K, B InfBits = 0>
struct KeyFormat {
  using Bits = B;
  static constexpr KeyKind kind = K;
  static constexpr Bits inf_bits = InfBits;
  static constexpr int key_bits = sizeof(B) * 8;
};

template <DType D> struct KeyFormatOf;
template <> struct KeyFormatOf<DType::kBool> : KeyFormat<uint8_t, KeyKind::kUnsigned> {};
template <> struct KeyFormatOf<DType::kUInt8> : KeyFormat<uint8_t, KeyKind::kUnsigned> {};
template <> struct KeyFormatOf<DType::kInt8> : KeyFormat<uint8_t, KeyKind::kSigned> {};
template <> struct KeyFormatOf<DType::kInt16> : KeyFormat<uint16_t, KeyKind::kSigned> {};
template <> struct KeyFormatOf<DType::kInt32> : KeyFormat<uint32_t, KeyKind::kSigned> {};
template <> struct KeyFormatOf<DType::kInt64> : KeyFormat<uint64_t, KeyKind::kSigned> {};
template <> struct KeyFormatOf<DType::kFloat16> : KeyFormat<uint16_t, KeyKind::kFloat, 0x7C00> {};
template <> struct KeyFormatOf<DType::kBFloat16> : KeyFormat<uint16_t, KeyKind::kFloat, 0x7F80> {};
template <> struct KeyFormatOf<DType::kFloat32>
    : KeyFormat<uint32_t, KeyKind::kFloat, 0x7F800000u> {};
template <> struct KeyFormatOf<DType::kFloat64>
    : KeyFormat<uint64_t, KeyKind::kFloat, 0x7FF0000000000000ull> {};

template <typename Format, bool kDescending>
inline typename Format::Bits sort_key(typename Format::Bits bits) {
  using Bits = typename Format::Bits;
  constexpr Bits sign = Bits(Bits(1) << (sizeof(Bits) * 8 - 1));
  Bits key;
  if constexpr (Format::kind == KeyKind::kUnsigned) {
    key = bits;
  } else if constexpr (Format::kind == KeyKind::kSigned) {
    key = Bits(bits ^ sign);
  } else {
    // Masks, not branches or selects: GCC vectorises loops over elements only in this form.
    using Signed = std::make_signed_t<Bits>;
    const Bits magnitude = Bits(bits & Bits(~sign));
    const Bits negative = Bits(Signed(bits) >> (sizeof(Bits) * 8 - 1));  // all ones if the sign is set
    const Bits zero = Bits(-Bits(magnitude == 0)), nan = Bits(-Bits(magnitude > Format::inf_bits));
    key = Bits(bits ^ Bits(negative | sign));  // ~bits, or bits | sign
    key = Bits(Bits(key & Bits(~zero)) | Bits(sign & zero) | nan);
  }
  return kDescending ? Bits(~key) : key;
}

// sort_key's inverse, exact for every element except NaN and +-0.0 (whose canonical keys merge).
template <typename Format, bool kDescending>
inline typename Format::Bits bits_of_key(typename Format::Bits key) {
  using Bits = typename Format::Bits;
  constexpr Bits sign = Bits(Bits(1) << (sizeof(Bits) * 8 - 1));
  if constexpr (kDescending) key = Bits(~key);
  if constexpr (Format::kind == KeyKind::kUnsigned) {
    return key;
  } else if constexpr (Format::kind == KeyKind::kSigned) {
    return Bits(key ^ sign);
  } else {
    return (key & sign) ? Bits(key ^ sign) : Bits(~key);
  }
}

// Whether bits_of_key(sort_key(bits)) == bits.
template <typename Format>
inline bool key_is_invertible(typename Format::Bits bits) {
  using Bits = typename Format::Bits;
  if constexpr (Format::kind != KeyKind::kFloat) {
    return true;
  } else {
    constexpr Bits sign = Bits(Bits(1) << (sizeof(Bits) * 8 - 1));
    const Bits magnitude = Bits(bits & Bits(~sign));
    return magnitude != 0 && magnitude <= Format::inf_bits;
  }
}

}  // namespace kwker::sort_detail
