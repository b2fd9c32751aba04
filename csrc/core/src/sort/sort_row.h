// Internal: one row of a sort, and the per-ISA entry points that sort it (sort_<isa>.cc).
#pragma once

#include <cstdint>

#include "kwker/select.h"
#include "kwker/sort.h"

namespace kwker::sort_detail {

// Slack, in uint64 elements, before and after each work buffer: SIMD scans may read a few elements
// past the ones they look at (up to 63 elements of 16 bytes).
inline constexpr int64_t kPad = 128;

struct RowJob {
  DType dtype;
  SortOrder order;
  TieOrder ties;
  int64_t n;
  const void* input;
  int64_t input_stride;
  void* values;
  int64_t values_stride;
  int64_t* indices;
  int64_t indices_stride;
  // Two work buffers of 2 * n uint64 each, with kPad readable elements before and after.
  uint64_t* buffer_a;
  uint64_t* buffer_b;
  // Shared by the rows of one call: set (atomically) once a row in torch's unstable order has many
  // equal keys, so later rows skip the radix attempt.
  int* many_ties_seen;
};

// One row of a topk: `row` as for a sort (n = the row's length, order descending for largest),
// except that values and indices receive k elements.
struct TopKJob {
  RowJob row;
  int64_t k;
  bool sorted;
};

// One row of a select (kwker/select.h): `row` as for an ascending sort, except that values and
// indices receive one element. `whole`: torch's median()/nanmedian() of a whole tensor, whose NaN
// answer is the type's quiet NaN and whose index is not used; `ambiguous` is then set when torch's
// value bits depend on its algorithm.
struct SelectJob {
  RowJob row;
  SelectRule rule;
  int64_t k;
  bool whole;
  bool* ambiguous;
};

// Rows up to this long whose neighbours are adjacent in memory (a select along dim 0 of a
// contiguous tensor, unfolded patches) are selected up to kMaxLaneRows at a time (select_lanes).
inline constexpr int64_t kMaxLaneRowLength = 64;
inline constexpr int kMaxLaneRows = 16;

// Up to kMaxLaneRows rows of a select (kwker/select.h) with adjacent neighbours: `row` as for
// SelectJob (values, indices and buffers unused), input pointing at row 0; row t's element j is at
// input + t + j * input_stride (elements); its outputs at values + values_offsets[t] and indices +
// indices_offsets[t]. Keys of up to 32 bits.
struct SelectLanesJob {
  RowJob row;
  SelectRule rule;
  int64_t k;
  int rows;
  void* values;
  const int64_t* values_offsets;
  int64_t* indices;
  const int64_t* indices_offsets;
};

// sort_row sorts the job's row; declines says whether Kwker leaves a row like it to torch
// (see kwker::sort_rows); topk_row selects (see kwker::topk_rows); select_row picks one element
// (see kwker::select_rows); select_lanes picks one element of each row and returns a bit mask of the
// rows (bit t: row t) it leaves to select_row.
namespace scalar {
void sort_row(const RowJob& job);
bool declines(const RowJob& job);
void topk_row(const TopKJob& job);
void select_row(const SelectJob& job);
uint32_t select_lanes(const SelectLanesJob& job);
}  // namespace scalar
namespace avx2 {
void sort_row(const RowJob& job);
bool declines(const RowJob& job);
void topk_row(const TopKJob& job);
void select_row(const SelectJob& job);
uint32_t select_lanes(const SelectLanesJob& job);
}  // namespace avx2
namespace avx512 {
void sort_row(const RowJob& job);
bool declines(const RowJob& job);
void topk_row(const TopKJob& job);
void select_row(const SelectJob& job);
uint32_t select_lanes(const SelectLanesJob& job);
}  // namespace avx512

}  // namespace kwker::sort_detail
