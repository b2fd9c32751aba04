// Sparse COO coalesce with torch's exact result (torch's _coalesce_sparse_cpu).
//
// torch flattens each column of indices to one int64 key (row-major over the sparse sizes), sorts the
// keys with its unstable sort, and walks the sorted order: the first element of each run of equal keys
// is copied, the later ones are added to it one at a time (y + x in the element type; 16-bit floats
// through float; integers wrap; bool is or). Kwker computes the same keys and the same sorted order
// (kwker/sort.h reproduces torch's tie order; for integer and bool values the order within a run cannot
// change a sum, so a stable sort serves), then the same walk, spread over kwker::parallel_for by runs.
#pragma once

#include <cstdint>

#include "kwker/dtype.h"

namespace kwker {

struct CoalesceProblem {
  DType dtype;  // of the values
  int64_t nnz;
  int64_t sparse_dim;
  const int64_t* sizes;  // the sparse_dim sparse sizes
  const int64_t* indices;  // sparse_dim x nnz, strides in elements
  int64_t indices_stride0, indices_stride1;
  const void* values;  // nnz contiguous blocks of block_elements
  int64_t block_elements;
  bool torch_sorts_stably;  // torch's sort of nnz int64 keys is its stable radix sort
  int64_t* new_indices;     // sparse_dim x nnz, contiguous: the first result-count columns written
  void* new_values;         // nnz blocks: the first result-count written
};

// The number of coalesced elements, or -1 (outputs unspecified) when Kwker leaves it to torch: an index
// outside its size (torch's keys could then alias), sizes whose product passes int64, more than 16
// sparse dimensions, or a NaN sum.
int64_t coalesce(const CoalesceProblem& problem);

}  // namespace kwker
