// The order statistics torch's quantile / nanquantile read: in rows of float32 or float64, the
// element of each requested rank in ascending order with NaN after every number.
//
// torch gathers these from its sorted rows (or, from torch 2.14, from an nth_element selection);
// which -0.0/+0.0 or which NaN lands at a rank depends on its algorithm. The caller (the adapter)
// serves only inputs where that cannot matter: one zero sign, and no NaN at a requested rank. There
// the element of a rank is one value with one bit pattern, whichever algorithm finds it.
//
// Algorithm: each row becomes order-preserving integer keys. Rows of 256 or more histogram the keys
// over the row's key range (up to 2048 buckets, about one per 4 elements), which puts each rank in a
// bucket, gather the keys of those buckets and select among them; shorter rows select in place. Selection is nested std::nth_element calls (the ranks
// sorted, each call splitting the rest), or an LSD radix sort of the keys for more than 16 ranks.
// Memory: one row of keys per thread, freed on return. Threads: rows are spread over
// kwker::parallel_for.
#pragma once

#include <cstdint>

#include "kwker/dtype.h"

namespace kwker {

struct RankSelectProblem {
  DType dtype;             // kFloat32 or kFloat64
  const void* rows;        // contiguous, row_count x row_length
  int64_t row_count;
  int64_t row_length;      // >= 1
  const int64_t* ranks;    // contiguous, row_count x ranks_per_row; each in [0, row_length)
  int64_t ranks_per_row;
  void* out;               // contiguous, row_count x ranks_per_row elements of dtype
};

void select_ranks(const RankSelectProblem& problem);

// What the adapter needs to know before it asks for ranks: each row's count of numbers (non-NaN
// elements) written to numbers[row], and whether there is a NaN, a row of NaNs, both zero signs.
struct RowsScan {
  bool any_nan = false;
  bool all_nan_row = false;
  bool both_zero_signs = false;
};
RowsScan scan_rows(DType dtype, const void* rows, int64_t row_count, int64_t row_length, int64_t* numbers);

}  // namespace kwker
