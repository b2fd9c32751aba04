// One element per row of a strided tensor, chosen by rank: torch's CPU kthvalue, median and
// nanmedian along a dim, and median()/nanmedian() of a whole tensor, with torch's exact results.
//
// What torch returns (aten/src/ATen/native/Sorting.cpp), ties included:
//  kKthValue   the element at position k - 1 after torch's Sedgewick quickselect with NaN above every
//              number and no tie-break: when its key is unique in the row that is the k-th smallest
//              element whatever the algorithm; when it is not, Kwker replays the quickselect.
//  kMedian     the first NaN of the row (value and index) if there is one; else the element of rank
//              (n - 1) / 2 in (value, index) order, a total order, so the answer is unique.
//  kNanMedian  NaNs set aside: rank (n - #NaN - 1) / 2 in (value, index) order among the numbers; a
//              row of NaNs only gives the NaN libstdc++'s nth_element leaves first (replayed).
// -0.0 equals +0.0 and all NaNs are equal, as in torch's comparisons. Values are copied bit for bit
// from the input element chosen.
//
// Memory: per thread, about 32 bytes per element of the longest row, kept between calls.
// Threads: rows are spread over kwker::parallel_for; each row is handled by one thread.
#pragma once

#include <cstdint>
#include <span>

#include "kwker/dtype.h"
#include "kwker/strided_rows.h"

namespace kwker {

enum class SelectRule : uint8_t { kKthValue, kMedian, kNanMedian };

struct SelectRowsProblem {
  DType dtype;                          // any but kBool (torch rejects bool)
  SelectRule rule;
  int64_t k;                            // kKthValue: 1 <= k <= row_length
  int64_t row_length;                   // 1 .. kMaxSelectRowLength
  std::span<const int64_t> outer_sizes;  // product = number of rows
  StridedRows input;                    // read only
  StridedRows values;                   // one dtype element per row (row_stride unused)
  StridedRows indices;                  // one int64 element per row (row_stride unused)
};

// Rows longer than this go to torch (replays index in 32 bits).
inline constexpr int64_t kMaxSelectRowLength = (int64_t{1} << 32) - 1;

// Selects in every row; input and outputs must not overlap.
void select_rows(const SelectRowsProblem& problem);

// torch's median() (ignore_nan false) or nanmedian() of n contiguous elements, 1 <= n <=
// kMaxSelectRowLength, written to *value. median(): any NaN gives the type's quiet NaN; otherwise the
// value of rank (n - 1) / 2. nanmedian(): the rank among the numbers, as for rows. Returns false, and
// writes nothing, when torch's bits depend on its algorithm: a zero median in a tensor holding both
// -0.0 and +0.0, or nanmedian() of NaNs with different bits.
bool median_of_all(DType dtype, bool ignore_nan, const void* data, int64_t n, void* value);

}  // namespace kwker
