// Element types the core kernels understand, named as torch names them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kwker {

enum class DType : uint8_t {
  kBool, kUInt8, kInt8, kInt16, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64,
};

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::kBool: case DType::kUInt8: case DType::kInt8: return 1;
    case DType::kInt16: case DType::kFloat16: case DType::kBFloat16: return 2;
    case DType::kInt32: case DType::kFloat32: return 4;
    case DType::kInt64: case DType::kFloat64: return 8;
  }
  return 0;
}

constexpr bool is_floating(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat32 ||
         t == DType::kFloat64;
}

}  // namespace kwker
