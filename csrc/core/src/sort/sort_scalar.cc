// The sort and topk compiled for scalar: see sort_row-inl.h and topk_row-inl.h (algorithms) and simd-inl.h
// (the ISA-specific part).
#define KWKER_ISA_SCALAR 1

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "sort/sort_keys.h"
#include "sort/sort_row.h"

namespace kwker::sort_detail::scalar {
#include "sort/sort_row-inl.h"
#include "sort/topk_row-inl.h"
}  // namespace kwker::sort_detail::scalar
