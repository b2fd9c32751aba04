// The quantile row passes compiled for scalar: see row_passes-inl.h.
#define KWKER_ISA_SCALAR 1

#include <cstdint>

#include "quantile/row_passes.h"

namespace kwker::quantile_detail::scalar {
#include "quantile/row_passes-inl.h"

const RowPassKernels kKernels = {&row_keys<float, uint32_t>, &row_keys<double, uint64_t>,
                                 &row_nans<float, uint32_t>, &row_nans<double, uint64_t>};
}  // namespace kwker::quantile_detail::scalar
