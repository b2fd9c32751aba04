// Internal: walking the rows of a row problem (SortRowsProblem, TopKRowsProblem: anything with
// outer_sizes and input/values/indices StridedRows).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kwker/strided_rows.h"

namespace kwker::sort_detail {

// Walks rows in order, keeping each tensor's offset (in elements) up to date without a division per
// row: an N-d counter over outer_sizes.
template <typename Problem>
class RowCursor {
 public:
  RowCursor(const Problem& p, int64_t row) : p_(p), index_(p.outer_sizes.size()) {
    for (size_t d = index_.size(); d-- > 0;) {
      index_[d] = row % p.outer_sizes[d];
      row /= p.outer_sizes[d];
      input_ += index_[d] * p.input.outer_strides[d];
      values_ += index_[d] * p.values.outer_strides[d];
      indices_ += index_[d] * p.indices.outer_strides[d];
    }
  }

  void next() {
    for (size_t d = index_.size(); d-- > 0;) {
      input_ += p_.input.outer_strides[d];
      values_ += p_.values.outer_strides[d];
      indices_ += p_.indices.outer_strides[d];
      if (++index_[d] < p_.outer_sizes[d]) return;
      input_ -= index_[d] * p_.input.outer_strides[d];
      values_ -= index_[d] * p_.values.outer_strides[d];
      indices_ -= index_[d] * p_.indices.outer_strides[d];
      index_[d] = 0;
    }
  }

  int64_t input() const { return input_; }
  int64_t values() const { return values_; }
  int64_t indices() const { return indices_; }

 private:
  const Problem& p_;
  std::vector<int64_t> index_;
  int64_t input_ = 0, values_ = 0, indices_ = 0;
};

inline char* element_at(const StridedRows& rows, size_t element_size, int64_t offset) {
  return static_cast<char*>(rows.data) + offset * static_cast<int64_t>(element_size);
}

// Rows of a problem: the product of its outer sizes.
template <typename Problem>
int64_t row_count(const Problem& p) {
  int64_t rows = 1;
  for (int64_t s : p.outer_sizes) rows *= s;
  return rows;
}

}  // namespace kwker::sort_detail
