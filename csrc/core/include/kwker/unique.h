// torch's CPU unique (aten::_unique2: torch.unique with or without inverse and counts, sorted or not)
// with its exact results.
//
// What torch returns (aten/src/ATen/native/Unique.cpp, unique_cpu_sorted_template): it sorts the
// flattened input (unstable), keeps the first element of every run of equal values (!=, so every NaN
// is a run of its own and -0.0 joins +0.0), gives each input element the number of its run (inverse)
// and each run its length (counts); `sorted` is ignored. Only two things depend on the order in which
// its sort leaves equal keys: the NaNs (their order, bits and inverse) and which zero represents a run
// holding both -0.0 and +0.0. Kwker declines those inputs; for all others the answer is determined by
// the values alone: the distinct values ascending, each element's rank among them, their multiplicities.
//
// Algorithm: on order-preserving integer keys of the values, a small key range (8- and 16-bit types
// always) is counted in a table indexed by key; a wider one (up to 64 keys per element) is marked in a
// bitmap with a running rank per 64-bit word; otherwise the elements are sorted with their positions
// (kwker::sort_rows, stable) when ranks are wanted, or just their keys (an LSD radix sort), and
// scanned for runs.
// Memory: the table (4 bytes per value of the range), the bitmap (1.5 bits per value of the range) or
// the sorted elements and positions (dtype size + 8 bytes per element; keys only: the dtype's size),
// held by the UniqueSorted object until it is destroyed.
// Threads: the calling thread; sort_rows as it runs.
#pragma once

#include <cstdint>
#include <vector>

#include "kwker/dtype.h"

namespace kwker {

// More elements go to torch (the counting table holds 32-bit counts).
inline constexpr int64_t kMaxUniqueElements = (int64_t{1} << 32) - 1;

// Whether each element's rank among the distinct values (torch's inverse) will be wanted.
enum class UniqueRanks : uint8_t { kNotWanted, kWanted };

class UniqueSorted {
 public:
  // Reads n contiguous elements (1 <= n <= kMaxUniqueElements; dtype not kBool) and finds their
  // distinct values. Returns false, having kept nothing, for a float input with a NaN or with both
  // -0.0 and +0.0 (torch's answer then depends on its sort).
  // `ranks`: whether write() will be asked for the inverse (it picks how a wide key range is sorted).
  bool prepare(DType dtype, const void* data, int64_t n, UniqueRanks ranks);

  // How many distinct values prepare() found.
  int64_t count() const { return count_; }

  // Writes the distinct values ascending (count() dtype elements), each input element's rank among
  // them (inverse: n int64, or null) and their multiplicities (counts: count() int64, or null). Once.
  void write(void* values, int64_t* inverse, int64_t* counts);

 private:
  template <typename K> bool prepare_typed(const typename K::T* data);
  template <typename K> void write_typed(typename K::T* values, int64_t* inverse, int64_t* counts);
  template <typename K> void count_in_table(const typename K::T* data, uint64_t range);
  template <typename K> void mark_in_bitmap(const typename K::T* data, uint64_t range);
  template <typename K> void sort_and_count_runs(const typename K::T* data);
  template <typename K> void sort_keys_and_count_runs(const typename K::T* data);

  DType dtype_ = DType::kBool;
  UniqueRanks ranks_ = UniqueRanks::kWanted;
  const void* data_ = nullptr;
  int64_t n_ = 0;
  int64_t count_ = 0;
  uint64_t low_ = 0;                  // counting and marking: the smallest key
  std::vector<uint32_t> table_;       // counting: occurrences of key low_ + j, then its rank
  std::vector<uint64_t> bitmap_;      // marking: bit j set if key low_ + j occurs
  std::vector<uint32_t> word_ranks_;  // marking: distinct values below each 64-bit word of bitmap_
  std::vector<uint8_t> sorted_;       // sorting: the elements (or, without ranks, their keys) ascending
  std::vector<int64_t> permutation_;  // sorting with ranks: where each sorted element came from
};

// torch's unique along a dim (aten::unique_dim: sorted; aten::unique_dim_consecutive and
// unique_consecutive: consecutive) on the rows of a contiguous (rows x row_length) array, the dim moved
// first as torch moves it.
//
// What torch returns (Unique.cpp, _unique_dim_cpu_template): for consecutive, runs of adjacent rows
// equal elementwise (==: a NaN never equal, -0.0 equal to +0.0), each represented by its first row;
// sorted, the rows std::sort-ed lexicographically by < first, then the same runs. The sorted answer
// depends on std::sort's order of equal rows only through NaNs (< treats them as equal to anything)
// and mixed zero signs: Kwker declines float inputs holding a NaN or both zeros, and otherwise its
// answer is determined by the values: the distinct rows ascending, each row's run (inverse), run
// lengths (counts). Consecutive answers never depend on an order and are never declined.
// Algorithm: integer rows whose columns' value ranges multiply below 2^63 are packed into one int64
// key per row and uniqued as UniqueSorted does; other rows are std::sort-ed by a row comparator.
// Memory: 8 bytes per row (the sorted order or the packed keys) and 8 per run. Threads: the calling
// thread.
enum class RowRuns : uint8_t { kSorted, kConsecutive };

class UniqueRows {
 public:
  // Reads rows x row_length contiguous elements (rows >= 1, row_length >= 1; any dtype, bool
  // included) and finds the runs. Returns false, having kept nothing, where kSorted declines (above).
  bool prepare(DType dtype, RowRuns runs, const void* data, int64_t rows, int64_t row_length);

  int64_t count() const { return count_; }

  // Writes the run representatives (count() x row_length elements), every input row's run (inverse:
  // rows int64, or null) and the run lengths (counts: count() int64, or null). Once.
  void write(void* values, int64_t* inverse, int64_t* counts);

 private:
  template <typename View> bool pack_rows(const View& view);

  DType dtype_ = DType::kBool;
  const uint8_t* data_ = nullptr;
  int64_t rows_ = 0, row_length_ = 0, count_ = 0;
  std::vector<int64_t> order_;   // kSorted: the rows in sorted order (empty: their own order)
  std::vector<int64_t> starts_;  // position in order_ where each run starts, then rows
  // kSorted integer rows whose columns' ranges multiply below 2^63: one int64 key per row (columns
  // offset to their minimum, mixed-radix, first column most significant: the same order), uniqued.
  std::vector<int64_t> packed_keys_;
  UniqueSorted packed_;
};

}  // namespace kwker
