// The optimizer steps compiled for scalar: steps-inl.h (arithmetic) over lanes-inl.h (the ISA part).
#define KWKER_ISA_SCALAR 1

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "optim/optim_kernels.h"

namespace kwker::optim_detail::scalar {
#include "optim/lanes-inl.h"
#include "optim/steps-inl.h"
}  // namespace kwker::optim_detail::scalar
