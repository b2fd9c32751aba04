// The sort, topk and select compiled for avx2: see sort_row-inl.h, topk_row-inl.h and
// select_row-inl.h, select_keys-inl.h, select_lanes-inl.h (algorithms) and simd-inl.h (the ISA-specific part).
#define KWKER_ISA_AVX2 1

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <immintrin.h>

#include "sort/sort_keys.h"
#include "sort/sort_row.h"

namespace kwker::sort_detail::avx2 {
#include "sort/sort_row-inl.h"
#include "sort/short_row-inl.h"
#include "sort/select_keys-inl.h"
#include "sort/topk_row-inl.h"
#include "sort/select_row-inl.h"
#include "sort/select_lanes-inl.h"
}  // namespace kwker::sort_detail::avx2
