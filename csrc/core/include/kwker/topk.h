// The k largest (or smallest) elements of rows of a strided tensor, with torch's exact results.
//
// What torch's CPU topk returns, ties included: the elements and indices that libstdc++'s
// std::partial_sort (k * 64 <= n) or std::nth_element plus std::sort (otherwise) leave in the first
// k places, with torch's comparator: NaN above every number, -0.0 equal to +0.0, no tie-break by
// index. With sorted=false the first k are in nth_element's order, as torch leaves them (in the
// partial_sort regime they are sorted anyway). Values are copied bit for bit from the input, except
// bfloat16 NaNs, which come out as 0x7FC0 (torch converts through float).
//
// Memory: per thread, about 16 bytes per element of the row, kept between calls.
// Threads: rows are spread over kwker::parallel_for; each row is selected by one thread.
#pragma once

#include <cstdint>
#include <span>

#include "kwker/dtype.h"
#include "kwker/strided_rows.h"

namespace kwker {

struct TopKRowsProblem {
  DType dtype;                          // any but kBool (torch rejects bool)
  bool largest;
  bool sorted;
  int64_t k;                            // 0 <= k <= row_length
  int64_t row_length;                   // below 2^32
  std::span<const int64_t> outer_sizes;  // product = number of rows
  StridedRows input;                    // read only
  StridedRows values;                   // k dtype elements per row
  StridedRows indices;                  // k int64 elements per row
};

// Selects in every row. Input and outputs must not overlap.
void topk_rows(const TopKRowsProblem& problem);

}  // namespace kwker
