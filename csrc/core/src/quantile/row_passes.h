// What select_ranks.cc hands each ISA variant (row_passes_<isa>.cc): the element-wise passes over a
// row, which vectorise: keys and their range, and the NaN / zero-sign scan.
#pragma once

#include <cstdint>

namespace kwker::quantile_detail {

struct RowPassKernels {
  // keys[i] = the order key of x[i] (row_passes-inl.h); *low / *high = their minimum / maximum.
  void (*keys_f32)(const float* x, int64_t n, uint32_t* keys, uint32_t* low, uint32_t* high);
  void (*keys_f64)(const double* x, int64_t n, uint64_t* keys, uint64_t* low, uint64_t* high);
  // The NaNs of x[0, n); *zeros gets bit 0 set for a -0.0, bit 1 for a +0.0.
  int64_t (*nans_f32)(const float* x, int64_t n, unsigned* zeros);
  int64_t (*nans_f64)(const double* x, int64_t n, unsigned* zeros);
};

namespace scalar { extern const RowPassKernels kKernels; }
namespace avx2 { extern const RowPassKernels kKernels; }
namespace avx512 { extern const RowPassKernels kKernels; }

}  // namespace kwker::quantile_detail
