// What search.cc hands each ISA variant (search_<isa>.cc): one row of boundaries as keys (float,
// double, int32 or int64: 8- and 16-bit types are widened first) and a run of values of that key type.
#pragma once

#include <cstdint>

#include "kwker/search.h"

namespace kwker::search_detail {

// Writes the positions of values[0, n) in row[0, m) (torch's binary search, kwker/search.h) to out:
// int32_t positions if out_int32, else int64_t.
template <typename Key>
using SearchFn = void (*)(const Key* row, int32_t m, const Key* values, int64_t n, SearchSide side,
                          bool out_int32, void* out);

struct SearchKernels {
  SearchFn<float> f32;
  SearchFn<double> f64;
  SearchFn<int32_t> i32;
  SearchFn<int64_t> i64;
};

namespace scalar { extern const SearchKernels kKernels; }
namespace avx2 { extern const SearchKernels kKernels; }
namespace avx512 { extern const SearchKernels kKernels; }

}  // namespace kwker::search_detail
