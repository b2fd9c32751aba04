// searchsorted compiled for avx512: search-inl.h (the algorithm) over search_lanes-inl.h (the ISA part).
#define KWKER_ISA_AVX512 1

// GCC 12's unmasked AVX-512 intrinsics read a self-initialised "undefined" vector, which it then
// reports as maybe uninitialized once inlined into loops (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <bit>
#include <cstdint>
#include <type_traits>
#include <immintrin.h>

#include "search/search_kernels.h"

namespace kwker::search_detail::avx512 {
#include "search/search_lanes-inl.h"
#include "search/search-inl.h"
}  // namespace kwker::search_detail::avx512
