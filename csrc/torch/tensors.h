// How the row-kernel adapters (sort_ops.cc, topk_ops.cc, select_ops.cc) see tensors: the core's dtype
// for a torch scalar type, which tensors the core may read and write as plain strided memory, out=
// tensors resized the way torch's structured kernels resize them, and which share no memory.
#pragma once

#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

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

// Whether a and b share no memory. torch's check cannot tell for tensors that are not dense (a
// strided input): then different storages are enough.
inline bool distinct(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0) return true;
  switch (at::get_overlap_status(a, b)) {
    case at::MemOverlapStatus::No: return true;
    case at::MemOverlapStatus::TooHard: return !a.storage().is_alias_of(b.storage());
    default: return false;
  }
}

// Whether no two elements of t share memory: torch's check, or, where it cannot tell (strided, not
// dense), strides that nest: each at least the extent of the smaller ones.
inline bool no_internal_overlap(const at::Tensor& t) {
  const auto status = at::has_internal_overlap(t);
  if (status != at::MemOverlap::TooHard) return status == at::MemOverlap::No;
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of dims longer than 1
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) > 1) dims.emplace_back(t.stride(d), t.size(d));
  }
  std::sort(dims.begin(), dims.end());
  int64_t extent = 1;
  for (const auto& [stride, size] : dims) {
    if (stride < extent) return false;
    extent = stride * size;
  }
  return true;
}

}  // namespace kwker::adapter
