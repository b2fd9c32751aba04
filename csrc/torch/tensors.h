// How the row-kernel adapters (sort_ops.cc, topk_ops.cc) see tensors: the core's dtype for a torch
// scalar type, which tensors the core may read and write as plain strided memory, and out= tensors
// resized the way torch's structured kernels resize them.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>

#include <optional>

#include "kwker/dtype.h"

namespace kwker::adapter {

inline std::optional<DType> core_dtype(c10::ScalarType t) {
  switch (t) {
    case at::kBool: return DType::kBool;
    case at::kByte: return DType::kUInt8;
    case at::kChar: return DType::kInt8;
    case at::kShort: return DType::kInt16;
    case at::kInt: return DType::kInt32;
    case at::kLong: return DType::kInt64;
    case at::kHalf: return DType::kFloat16;
    case at::kBFloat16: return DType::kBFloat16;
    case at::kFloat: return DType::kFloat32;
    case at::kDouble: return DType::kFloat64;
    default: return std::nullopt;
  }
}

inline bool plain_strided(const at::Tensor& t) {
  return t.layout() == at::kStrided && t.device().is_cpu() && !t.is_neg() && !t.is_conj();
}

// An out= tensor of the right dtype resized as torch's structured kernel resizes it:
// at::native::resize_output (with its warning for a non-empty out of another shape), then
// `strides` if a resize happened. False (nothing touched) when torch must convert or reject it.
inline bool resize_out_like_torch(const at::Tensor& out, at::IntArrayRef sizes, at::IntArrayRef strides,
                                  c10::ScalarType dtype) {
  if (!plain_strided(out) || out.scalar_type() != dtype) return false;
  if (at::native::resize_output(out, sizes)) out.as_strided_(sizes, strides);
  return true;
}

}  // namespace kwker::adapter
