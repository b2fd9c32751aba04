// How the row kernels (sort, topk) see a tensor: rows along one dim of an N-d strided tensor.
#pragma once

#include <cstdint>
#include <span>

namespace kwker {

// Rows of elements along one dim. Element (r, i), with r unravelled over the problem's outer sizes
// into (r_0, ..., r_k), lives at data + sum(r_j * outer_strides[j]) + i * row_stride (strides in
// elements).
struct StridedRows {
  void* data;
  int64_t row_stride;
  std::span<const int64_t> outer_strides;
};

}  // namespace kwker
