// kwker::search_sorted against torch's binary search run literally (Bucketization.cpp's
// cus_lower_bound / cus_upper_bound, through the sorter when there is one): every dtype torch's
// searchsorted takes x side x int32/int64 positions x boundaries sorted, with ties, unsorted, with
// NaNs, signed zeros, integer extremes x row lengths around the vector widths and powers of two x
// values drawn from the boundaries and at random. 1-d and N-d boundaries; sorters. Each case runs
// once per ISA the CPU supports; outputs sit between canaries.
#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kwker/search.h"
#include "sort_test_util.h"

namespace kwker_test {
namespace {

using kwker::SearchSide;
using kwker::SearchSortedProblem;

constexpr int64_t kRowLengths[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 100, 255, 256, 1000, 4097};
constexpr int64_t kValueCounts[] = {0, 1, 3, 4, 7, 8, 15, 16, 31, 33, 63, 64, 65, 127, 129, 700};

// torch's loop, literally; `key` turns element bits into what torch compares (float for 16-bit floats).
template <typename C, typename Key>
int64_t torch_position(const std::vector<uint64_t>& boundaries, int64_t row_start, int64_t m,
                       const int64_t* sorter, uint64_t value, SearchSide side, const Key& key) {
  const C v = key(value);
  int64_t start = row_start, end = row_start + m;
  while (start < end) {
    const int64_t mid = start + ((end - start) >> 1);
    const C mid_val = key(boundaries[sorter ? sorter[mid] + row_start : mid]);
    const bool go_right = side == SearchSide::kLeft ? !(mid_val >= v) : !(mid_val > v);
    if (go_right) start = mid + 1;
    else end = mid;
  }
  return start - row_start;
}

int64_t torch_position(DType d, const std::vector<uint64_t>& boundaries, int64_t row_start, int64_t m,
                       const int64_t* sorter, uint64_t value, SearchSide side) {
  auto run = [&]<typename C>(C, auto key) {
    return torch_position<C>(boundaries, row_start, m, sorter, value, side, key);
  };
  switch (d) {
    case DType::kUInt8: return run(uint8_t{}, [](uint64_t b) { return static_cast<uint8_t>(b); });
    case DType::kInt8: return run(int8_t{}, [](uint64_t b) { return static_cast<int8_t>(b); });
    case DType::kInt16: return run(int16_t{}, [](uint64_t b) { return static_cast<int16_t>(b); });
    case DType::kInt32: return run(int32_t{}, [](uint64_t b) { return static_cast<int32_t>(b); });
    case DType::kInt64: return run(int64_t{}, [](uint64_t b) { return static_cast<int64_t>(b); });
    case DType::kFloat16: return run(float{}, [](uint64_t b) { return half_to_float(static_cast<uint16_t>(b)); });
    case DType::kBFloat16:
      return run(float{}, [](uint64_t b) { return bfloat16_to_float(static_cast<uint16_t>(b)); });
    case DType::kFloat32: return run(float{}, [](uint64_t b) { return bits_to_float(b); });
    case DType::kFloat64: return run(double{}, [](uint64_t b) { return bits_to_double(b); });
    case DType::kBool: break;
  }
  return -1;
}

struct SearchCase {
  DType dtype;
  SearchSide side;
  bool out_int32;
  int64_t rows;         // boundary rows (1: 1-d boundaries)
  int64_t m;
  int64_t per_row;      // values per boundary row
  std::vector<uint64_t> boundaries, values;
  std::vector<int64_t> sorter;  // empty: none
  std::string name;
};

// Runs the case on every ISA; checks positions and canaries. Returns false on the first mismatch.
bool check(const SearchCase& c) {
  const size_t es = kwker::dtype_size(c.dtype);
  const int64_t n = c.rows * c.per_row;
  GuardedBuffer boundaries(es, 1, c.rows * c.m, 0x11), values(es, 3, n, 0x22);
  for (int64_t i = 0; i < c.rows * c.m; ++i) store_element(c.dtype, boundaries.data(), i, c.boundaries[i]);
  for (int64_t i = 0; i < n; ++i) store_element(c.dtype, values.data(), i, c.values[i]);
  std::vector<int64_t> want(n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = i / std::max<int64_t>(c.per_row, 1);
    want[i] = torch_position(c.dtype, c.boundaries, r * c.m, c.m, c.sorter.empty() ? nullptr : c.sorter.data(),
                             c.values[i], c.side);
  }
  bool ok = true;
  for_each_isa([&](Isa) {
    if (!ok) return;
    const size_t out_size = c.out_int32 ? 4 : 8;
    GuardedBuffer out(out_size, 5, n, 0x33);
    const std::vector<uint8_t> canaries(out.bytes(), out.bytes() + out.size());
    SearchSortedProblem p{};
    p.dtype = c.dtype;
    p.side = c.side;
    p.boundaries = boundaries.data();
    p.row_length = c.m;
    p.boundary_rows = c.rows;
    p.sorter = c.sorter.empty() ? nullptr : c.sorter.data();
    p.values = values.data();
    p.values_per_row = c.per_row;
    p.out = out.data();
    p.out_int32 = c.out_int32;
    if (!kwker::search_sorted(p)) {
      ADD_FAILURE() << c.name << ": declined";
      ok = false;
      return;
    }
    for (int64_t i = 0; i < n && ok; ++i) {
      int64_t got;
      if (c.out_int32) {
        int32_t x;
        std::memcpy(&x, out.element(i), 4);
        got = x;
      } else {
        std::memcpy(&got, out.element(i), 8);
      }
      if (got != want[i]) {
        ADD_FAILURE() << c.name << ": value " << i << " (bits " << hex(c.values[i]) << ") at " << got
                      << ", torch " << want[i];
        ok = false;
      }
    }
    for (size_t b = 0; b < out.size() && ok; ++b) {
      const bool inside = b >= out.data_offset() && b < out.data_offset() + n * out_size;
      if (!inside && out.bytes()[b] != canaries[b]) {
        ADD_FAILURE() << c.name << ": byte " << b << " outside the output written";
        ok = false;
      }
    }
  });
  return ok;
}

// Boundary rows of each distribution: sorted (NaNs last, as torch.sort leaves them), sorted with
// heavy ties, unsorted, all equal.
enum class Rows { kSorted, kSortedTies, kUnsorted, kAllEqual, kSortedFinite };
constexpr Rows kRowKinds[] = {Rows::kSorted, Rows::kSortedTies, Rows::kUnsorted, Rows::kAllEqual, Rows::kSortedFinite};
const char* rows_name(Rows r) {
  switch (r) {
    case Rows::kSorted: return "sorted";
    case Rows::kSortedTies: return "sorted_ties";
    case Rows::kUnsorted: return "unsorted";
    case Rows::kAllEqual: return "all_equal";
    case Rows::kSortedFinite: return "sorted_finite";
  }
  return "?";
}

std::vector<uint64_t> boundary_row(Generator& g, DType d, Rows kind, int64_t m) {
  switch (kind) {
    case Rows::kSorted: return g.generate(Dist::kSorted, m, SortOrder::kAscending);
    case Rows::kSortedTies: {
      auto row = g.generate(Dist::kFewDistinct, m, SortOrder::kAscending);
      const auto perm = oracle_permutation(d, row, SortOrder::kAscending, TieOrder::kStable);
      std::vector<uint64_t> sorted(m);
      for (int64_t i = 0; i < m; ++i) sorted[i] = row[perm[i]];
      return sorted;
    }
    case Rows::kUnsorted: return g.generate(kwker::is_floating(d) ? Dist::kNaNMixed : Dist::kExtremes, m,
                                            SortOrder::kAscending);
    case Rows::kAllEqual: return g.generate(Dist::kAllEqual, m, SortOrder::kAscending);
    case Rows::kSortedFinite: {
      auto row = g.generate(Dist::kRandomFinite, m, SortOrder::kAscending);
      const auto perm = oracle_permutation(d, row, SortOrder::kAscending, TieOrder::kStable);
      std::vector<uint64_t> sorted(m);
      for (int64_t i = 0; i < m; ++i) sorted[i] = row[perm[i]];
      return sorted;
    }
  }
  return {};
}

// Values: boundaries themselves (exact hits), random bits (NaNs, infinities), signed zeros.
std::vector<uint64_t> search_values(Generator& g, DType d, const std::vector<uint64_t>& boundaries, int64_t n) {
  std::vector<uint64_t> v(n);
  const auto f = float_format(d);
  for (auto& x : v) {
    const uint64_t pick = g.uniform(8);
    if (pick < 4 && !boundaries.empty()) x = boundaries[g.uniform(boundaries.size())];
    else if (pick == 4 && kwker::is_floating(d)) x = g.chance(0.5) ? 0 : f.sign();
    else if (pick == 5 && kwker::is_floating(d)) x = g.random_nan();
    else x = g.random_bits();
  }
  return v;
}

TEST(SearchSorted, OneRowEveryDtypeSideAndLength) {
  std::mt19937_64 rng(20261203);
  for (DType d : kAllDTypes) {
    if (d == DType::kBool) continue;
    Generator g(d, rng);
    for (Rows kind : kRowKinds) {
      for (int64_t m : kRowLengths) {
        const auto row = boundary_row(g, d, kind, m);
        for (int64_t n : kValueCounts) {
          // Narrow types with long rows and few values are declined (tested below).
          if (kwker::dtype_size(d) < 4 && n * std::bit_width(static_cast<uint64_t>(m)) * 4 < m) continue;
          for (SearchSide side : {SearchSide::kLeft, SearchSide::kRight}) {
            SearchCase c{d, side, (n & 1) != 0, 1, m, n, row, search_values(g, d, row, n), {}, ""};
            c.name = std::string(dtype_name(d)) + " " + rows_name(kind) + " m=" + std::to_string(m) +
                     " n=" + std::to_string(n) + (side == SearchSide::kLeft ? " left" : " right");
            ASSERT_TRUE(check(c));
          }
        }
      }
    }
  }
}

TEST(SearchSorted, SorterGivesTheOrder) {
  std::mt19937_64 rng(7);
  for (DType d : kAllDTypes) {
    if (d == DType::kBool) continue;
    Generator g(d, rng);
    for (int64_t m : {1, 5, 16, 33, 300}) {
      for (bool argsorted : {true, false}) {
        auto row = g.generate(kwker::is_floating(d) ? Dist::kNaNMixed : Dist::kFewDistinct, m, SortOrder::kAscending);
        std::vector<int64_t> sorter(m);
        if (argsorted) {
          sorter = oracle_permutation(d, row, SortOrder::kAscending, TieOrder::kStable);
        } else {
          std::iota(sorter.begin(), sorter.end(), 0);
          std::shuffle(sorter.begin(), sorter.end(), rng);
        }
        for (SearchSide side : {SearchSide::kLeft, SearchSide::kRight}) {
          SearchCase c{d, side, false, 1, m, 257, row, search_values(g, d, row, 257), sorter, ""};
          c.name = std::string(dtype_name(d)) + " sorter m=" + std::to_string(m) + (argsorted ? " argsort" : " random");
          ASSERT_TRUE(check(c));
        }
      }
    }
  }
}

TEST(SearchSorted, RowsOfBoundariesEachWithTheirValues) {
  std::mt19937_64 rng(11);
  for (DType d : kAllDTypes) {
    if (d == DType::kBool) continue;
    Generator g(d, rng);
    for (auto [rows, m, per_row] : {std::tuple{5, 16, 37}, {3, 100, 200}, {64, 8, 9}, {2, 1, 40}, {7, 33, 0}}) {
      for (bool with_sorter : {false, true}) {
        std::vector<uint64_t> boundaries, values;
        std::vector<int64_t> sorter;
        for (int r = 0; r < rows; ++r) {
          auto row = boundary_row(g, d, kRowKinds[r % std::size(kRowKinds)], m);
          auto v = search_values(g, d, row, per_row);
          boundaries.insert(boundaries.end(), row.begin(), row.end());
          values.insert(values.end(), v.begin(), v.end());
          std::vector<int64_t> order(m);
          std::iota(order.begin(), order.end(), 0);
          std::shuffle(order.begin(), order.end(), rng);
          sorter.insert(sorter.end(), order.begin(), order.end());
        }
        for (SearchSide side : {SearchSide::kLeft, SearchSide::kRight}) {
          SearchCase c{d, side, with_sorter, rows, m, per_row, boundaries, values, with_sorter ? sorter : std::vector<int64_t>{}, ""};
          c.name = std::string(dtype_name(d)) + " rows=" + std::to_string(rows) + " m=" + std::to_string(m) +
                   (with_sorter ? " sorter" : "");
          ASSERT_TRUE(check(c));
        }
      }
    }
  }
}

// 16-bit values numerous enough (2 per bit pattern) for the table of every pattern's position; the
// table is searched with the row's sorter too. (8-bit tables are reached above, from 512 values.)
TEST(SearchSorted, SixteenBitValuesThroughThePatternTable) {
  std::mt19937_64 rng(3);
  for (DType d : {DType::kInt16, DType::kFloat16, DType::kBFloat16}) {
    Generator g(d, rng);
    for (Rows kind : {Rows::kSorted, Rows::kUnsorted}) {
      const auto row = boundary_row(g, d, kind, 100);
      const int64_t n = 2 * 65536 + 17;
      std::vector<uint64_t> values(n);
      for (auto& v : values) v = g.random_bits();
      for (SearchSide side : {SearchSide::kLeft, SearchSide::kRight}) {
        std::vector<int64_t> sorter(100);
        std::iota(sorter.begin(), sorter.end(), 0);
        std::shuffle(sorter.begin(), sorter.end(), rng);
        SearchCase c{d, side, side == SearchSide::kRight, 1, 100, n, row, values, kind == Rows::kUnsorted ? sorter : std::vector<int64_t>{}, ""};
        c.name = std::string(dtype_name(d)) + " table " + rows_name(kind);
        ASSERT_TRUE(check(c));
      }
    }
  }
}

// A row copy (8/16-bit types, a sorter) that fewer values would not pay for: declined, nothing written.
TEST(SearchSorted, DeclinesCopiesFewValuesWouldNotPayFor) {
  std::vector<int16_t> boundaries(4096);
  std::iota(boundaries.begin(), boundaries.end(), 0);
  std::vector<int16_t> values = {5, 70};
  std::vector<int64_t> out(2, -7);
  SearchSortedProblem p{};
  p.dtype = DType::kInt16;
  p.side = SearchSide::kLeft;
  p.boundaries = boundaries.data();
  p.row_length = 4096;
  p.boundary_rows = 1;
  p.values = values.data();
  p.values_per_row = 2;
  p.out = out.data();
  EXPECT_FALSE(kwker::search_sorted(p));
  EXPECT_EQ(out, (std::vector<int64_t>{-7, -7}));
  std::vector<int32_t> wide_boundaries(boundaries.begin(), boundaries.end()), wide_values(values.begin(), values.end());
  p.dtype = DType::kInt32;  // no copy needed: served
  p.boundaries = wide_boundaries.data();
  p.values = wide_values.data();
  EXPECT_TRUE(kwker::search_sorted(p));
  EXPECT_EQ(out, (std::vector<int64_t>{5, 70}));
}

}  // namespace
}  // namespace kwker_test
