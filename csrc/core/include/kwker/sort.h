// Sorting rows of a strided tensor, with torch's exact results.
//
// Order of keys: torch's comparators. Ascending puts every NaN after +inf; descending puts every NaN
// first. -0.0 and +0.0 are equal keys; all NaNs are equal keys. Values are copied bit for bit from the
// input (NaN payloads and the sign of zero are kept), indices are positions within the row.
//
// Order among equal keys (TieOrder):
//   kStable     the original order (what std::stable_sort gives, ascending and descending alike).
//   kIntrosort  exactly the order libstdc++'s std::sort gives with torch's comparator on
//               (value, index) pairs, i.e. what torch's CPU sort(stable=False) returns.
//
// Memory: per thread, about 16 bytes per element of the longest row, kept between calls.
// Threads: rows are spread over kwker::parallel_for; each row is sorted by one thread, so results
// never depend on the thread count.
#pragma once

#include <cstdint>
#include <span>

#include "kwker/dtype.h"
#include "kwker/strided_rows.h"

namespace kwker {

enum class SortOrder : uint8_t { kAscending, kDescending };
enum class TieOrder : uint8_t { kStable, kIntrosort };

struct SortRowsProblem {
  DType dtype;
  SortOrder order;
  TieOrder ties;
  int64_t row_length;                   // at most kMaxSortRowLength
  std::span<const int64_t> outer_sizes;  // product = number of rows
  StridedRows input;                    // read only
  StridedRows values;                   // dtype elements
  StridedRows indices;                  // int64 elements
};

// Rows longer than this go to torch (indices travel packed in 32 bits).
inline constexpr int64_t kMaxSortRowLength = (int64_t{1} << 32) - 1;

// Whether Kwker leaves this problem to the caller's (torch's) sort: when the tie order is kIntrosort
// and the first row's keys are already in order (or reverse order) with equal keys, libstdc++'s
// introsort meets only predictable branches and is as fast. Reads only the input (values and
// indices may be unset), so it can be asked before the outputs are allocated.
bool sort_declines(const SortRowsProblem& problem);

// Sorts every row. Input and outputs must not overlap.
void sort_rows(const SortRowsProblem& problem);

}  // namespace kwker
