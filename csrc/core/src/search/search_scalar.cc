// searchsorted compiled for scalar: search-inl.h (the algorithm) over search_lanes-inl.h (the ISA part).
#define KWKER_ISA_SCALAR 1

#include <bit>
#include <cstdint>
#include <type_traits>

#include "search/search_kernels.h"

namespace kwker::search_detail::scalar {
#include "search/search_lanes-inl.h"
#include "search/search-inl.h"
}  // namespace kwker::search_detail::scalar
