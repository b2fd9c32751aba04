// sort_rows: splits the rows over kwker::parallel_for and hands each to the ISA variant in use.
#include <algorithm>
#include <vector>

#include "kwker/cpu.h"
#include "kwker/parallel.h"
#include "kwker/sort.h"
#include "sort/sort_row.h"

namespace kwker {
namespace {

using sort_detail::kPad;
using sort_detail::RowJob;

struct RowKernels {
  void (*sort_row)(const RowJob&);
  bool (*declines)(const RowJob&);
};

RowKernels row_kernels_for(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return {&sort_detail::avx512::sort_row, &sort_detail::avx512::declines};
    case Isa::kAvx2: return {&sort_detail::avx2::sort_row, &sort_detail::avx2::declines};
    case Isa::kScalar: break;
  }
  return {&sort_detail::scalar::sort_row, &sort_detail::scalar::declines};
}

// Per-thread work buffers, grown to the longest row seen and kept.
struct Workspace {
  std::vector<uint64_t> a, b;
  void reserve(int64_t n) {
    const size_t need = static_cast<size_t>(2 * n + 2 * kPad);
    if (a.size() < need) {
      a.assign(need, 0);
      b.assign(need, 0);
    }
  }
};

Workspace& thread_workspace() {
  thread_local Workspace ws;
  return ws;
}

// Walks rows in order, keeping each tensor's offset (in elements) up to date without a division per
// row: an N-d counter over outer_sizes.
class RowCursor {
 public:
  RowCursor(const SortRowsProblem& p, int64_t row) : p_(p), index_(p.outer_sizes.size()) {
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
  const SortRowsProblem& p_;
  std::vector<int64_t> index_;
  int64_t input_ = 0, values_ = 0, indices_ = 0;
};

char* element_at(const StridedRows& rows, size_t element_size, int64_t offset) {
  return static_cast<char*>(rows.data) + offset * static_cast<int64_t>(element_size);
}

// A job for the problem's rows, with the given work buffers; row pointers are set per row.
RowJob job_for(const SortRowsProblem& p, Workspace& ws, int* ties_seen) {
  RowJob job;
  job.dtype = p.dtype;
  job.order = p.order;
  job.ties = p.ties;
  job.n = p.row_length;
  job.input_stride = p.input.row_stride;
  job.values_stride = p.values.row_stride;
  job.indices_stride = p.indices.row_stride;
  job.buffer_a = ws.a.data() + kPad;
  job.buffer_b = ws.b.data() + kPad;
  job.ties_seen = ties_seen;
  return job;
}

void point_at_row(RowJob& job, const SortRowsProblem& p, const RowCursor& cursor) {
  const size_t element_size = dtype_size(p.dtype);
  job.input = element_at(p.input, element_size, cursor.input());
  job.values = element_at(p.values, element_size, cursor.values());
  job.indices = reinterpret_cast<int64_t*>(element_at(p.indices, sizeof(int64_t), cursor.indices()));
}

}  // namespace

bool sort_declines(const SortRowsProblem& p) {
  int64_t rows = 1;
  for (int64_t s : p.outer_sizes) rows *= s;
  if (rows == 0 || p.row_length == 0) return false;
  RowJob first = job_for(p, thread_workspace(), nullptr);
  first.input = element_at(p.input, dtype_size(p.dtype), RowCursor(p, 0).input());
  return row_kernels_for(active_isa()).declines(first);
}

void sort_rows(const SortRowsProblem& p) {
  int64_t rows = 1;
  for (int64_t s : p.outer_sizes) rows *= s;
  if (rows == 0 || p.row_length == 0) return;
  const RowKernels kernels = row_kernels_for(active_isa());
  int ties_seen = 0;
  // As torch: about 32768 elements of work per task, so thread count never changes a result.
  const int64_t grain = std::max<int64_t>(1, 32768 / p.row_length);
  parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    Workspace& ws = thread_workspace();
    ws.reserve(p.row_length);
    RowJob job = job_for(p, ws, &ties_seen);
    RowCursor cursor(p, begin);
    for (int64_t r = begin; r < end; ++r, cursor.next()) {
      point_at_row(job, p, cursor);
      kernels.sort_row(job);
    }
  });
}

}  // namespace kwker
