// The optimizer steps compiled for avx512: steps-inl.h (arithmetic) over lanes-inl.h (the ISA part).
#define KWKER_ISA_AVX512 1

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <immintrin.h>

#include "optim/optim_kernels.h"

namespace kwker::optim_detail::avx512 {
#include "optim/lanes-inl.h"
#include "optim/steps-inl.h"
}  // namespace kwker::optim_detail::avx512
