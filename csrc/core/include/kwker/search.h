// torch's CPU searchsorted / bucketize with its exact results, for any boundaries: sorted or not,
// with NaNs, through a sorter.
//
// What torch returns (aten/src/ATen/native/Bucketization.cpp): for each value v, the end point of
// its own binary search over the value's row of boundaries b (through the sorter if one is given):
//   start = 0, end = m; while start < end: mid = start + (end - start) / 2;
//     if !(b[mid] >= v) (side kLeft) / !(b[mid] > v) (side kRight): start = mid + 1, else end = mid
// with the comparison of the element type (float16/bfloat16 as floats: a NaN on either side moves
// the search right). On sorted boundaries without NaN that is the usual lower/upper bound; on any
// other boundaries the answer depends on the probes, so Kwker does not search differently: it runs
// exactly these steps, branch-free, for many values at once (vector gathers), which gives torch's
// answer for every input. 8- and 16-bit values searched in one row, when there are at least twice as
// many values as bit patterns, are looked up in a table of every pattern's position (searched so).
//
// Memory: where one is needed, a copy of a boundary row (as 32-bit keys for 8- and 16-bit types, or in
// sorter order), one per thread for N-d boundaries, freed on return.
// Threads: values (1-d boundaries) or rows (N-d) are spread over kwker::parallel_for.
#pragma once

#include <cstdint>

#include "kwker/dtype.h"

namespace kwker {

enum class SearchSide : uint8_t { kLeft, kRight };

struct SearchSortedProblem {
  DType dtype;                 // of boundaries and values alike; any but kBool
  SearchSide side;
  const void* boundaries;      // contiguous, boundary_rows x row_length
  int64_t row_length;          // m: 1 .. kMaxSearchRowLength
  int64_t boundary_rows;       // 1 for 1-d boundaries (every value searches the one row)
  const int64_t* sorter;       // null, or contiguous like boundaries, each entry in [0, row_length)
  const void* values;          // contiguous, boundary_rows x values_per_row
  int64_t values_per_row;
  void* out;                   // contiguous, like values: int32 (out_int32) or int64 positions
  bool out_int32;
};

// Rows of more boundaries go to torch (Kwker's search indexes in 32 bits).
inline constexpr int64_t kMaxSearchRowLength = (int64_t{1} << 31) - 2;

// Writes every value's position and returns true; returns false, having written nothing, when a
// boundary row would have to be copied (8/16-bit types, a sorter) for fewer values than pay for the
// copy: torch's own search is then as fast.
bool search_sorted(const SearchSortedProblem& problem);

}  // namespace kwker
