// searchsorted compiled for avx2: search-inl.h (the algorithm) over search_lanes-inl.h (the ISA part).
#define KWKER_ISA_AVX2 1

#include <bit>
#include <cstdint>
#include <type_traits>
#include <immintrin.h>

#include "search/search_kernels.h"

namespace kwker::search_detail::avx2 {
#include "search/search_lanes-inl.h"
#include "search/search-inl.h"
}  // namespace kwker::search_detail::avx2
