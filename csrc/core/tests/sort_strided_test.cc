// kwker::sort_rows on strided problems: several rows over one or more outer dims, non-unit row
// strides (transposed layouts), outputs with gaps, a broadcast (stride 0) input, size-1 and size-0
// dims, misaligned starts; every output buffer is guarded and every byte outside the logical output
// positions must keep its canary. Also: rows spread over a real two-thread parallel_for.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "kwker/cpu.h"
#include "kwker/parallel.h"
#include "kwker/sort.h"
#include "sort_test_util.h"

namespace kwker_test {
namespace {

std::vector<Layout> strided_layouts(int64_t n) {
  std::vector<Layout> out;
  {
    Layout l;
    l.name = "rows3_contiguous";
    l.outer_sizes = {3};
    l.input = {1, {n}, 1};
    l.values = {1, {n}, 0};
    l.indices = {1, {n}, 1};
    out.push_back(l);
  }
  {
    // A contiguous [n, 5] tensor sorted along dim 0: rows are columns.
    Layout l;
    l.name = "transposed_2d";
    l.outer_sizes = {5};
    l.input = {5, {1}, 1};
    l.values = {5, {1}, 1};
    l.indices = {1, {n}, 0};  // indices row-major instead
    out.push_back(l);
  }
  {
    // Input physically [2][n][3] sorted along the middle dim; values with stride 2 and gaps
    // between rows; indices physically [n][3][2].
    Layout l;
    l.name = "3d_permuted";
    l.outer_sizes = {2, 3};
    l.input = {3, {3 * n, 1}, 1};
    l.values = {2, {3 * (2 * n + 1) + 7, 2 * n + 1}, 2};
    l.indices = {6, {1, 2}, 1};
    out.push_back(l);
  }
  {
    // Four outer dims (one of size 1), each tensor with its own physical dim order:
    // input [c][i][a][d][b], values [a][c][d][i] with gaps, indices [d][i][c][a].
    Layout l;
    l.name = "4d_outer_permuted";
    l.outer_sizes = {2, 1, 3, 2};
    l.input = {4, {2, 1, 4 * n, 1}, 1};
    const int64_t vd = n + 2, vc = 2 * vd + 1, va = 3 * vc + 3;
    l.values = {1, {va, 0, vc, vd}, 1};
    l.indices = {6, {1, 99, 2, 6 * n}, 0};
    out.push_back(l);
  }
  {
    Layout l;
    l.name = "broadcast_input";
    l.outer_sizes = {4};
    l.input = {1, {0}, 1};
    l.values = {1, {n + 1}, 1};
    l.indices = {1, {n}, 3};
    out.push_back(l);
  }
  {
    Layout l;
    l.name = "size1_dims";
    l.outer_sizes = {1, 3, 1};
    l.input = {1, {12345, n, 777}, 3};
    l.values = {1, {5, n + 3, 9}, 1};
    l.indices = {1, {0, n, 0}, 2};
    out.push_back(l);
  }
  {
    Layout l;
    l.name = "zero_rows";
    l.outer_sizes = {3, 0};
    l.input = {1, {n, 1}, 1};
    l.values = {1, {n, 1}, 1};
    l.indices = {1, {n, 1}, 1};
    out.push_back(l);
  }
  {
    Layout l;
    l.name = "strided_single_row";
    l.input = {3, {}, 2};
    l.values = {2, {}, 1};
    l.indices = {4, {}, 3};
    out.push_back(l);
  }
  {
    Layout l;
    l.name = "rows17_contiguous_aligned";
    l.outer_sizes = {17};
    l.input = {1, {n}, 0};
    l.values = {1, {n}, 0};
    l.indices = {1, {n}, 0};
    out.push_back(l);
  }
  return out;
}

using StridedParam = std::tuple<DType, SortOrder, TieOrder>;

class SortStrided : public ::testing::TestWithParam<StridedParam> {};

TEST_P(SortStrided, Layouts) {
  const auto [d, order, ties] = GetParam();
  std::mt19937_64 rng(0x57121DEull ^ (static_cast<uint64_t>(d) << 8) ^ (static_cast<uint64_t>(order) << 4) ^
                      static_cast<uint64_t>(ties));
  Generator gen(d, rng);
  const std::vector<Dist> dists = dists_for(d);
  int failures = 0;
  size_t next_dist = 0;
  for (int64_t n : {0, 1, 2, 16, 17, 100, 1000, 4097}) {
    for (const Layout& layout : strided_layouts(n)) {
      // Every row gets its own distribution.
      const size_t first = next_dist++;
      auto make_row = [&](int64_t r) {
        return gen.generate(dists[(first + static_cast<size_t>(r)) % dists.size()], n, order);
      };
      const std::string what = describe(d, order, ties, n, "per-row mix", layout.name);
      if (!check_sort(d, order, ties, n, layout, make_row, what)) {
        if (++failures >= 10) FAIL() << "giving up after 10 failing cases";
      }
    }
  }
}

std::string strided_name(const ::testing::TestParamInfo<StridedParam>& info) {
  const auto [d, o, t] = info.param;
  return std::string(dtype_name(d)) + "_" + order_name(o) + "_" + ties_name(t);
}

INSTANTIATE_TEST_SUITE_P(
    All, SortStrided,
    ::testing::Combine(::testing::ValuesIn(kAllDTypes),
                       ::testing::Values(SortOrder::kAscending, SortOrder::kDescending),
                       ::testing::Values(TieOrder::kStable, TieOrder::kIntrosort)),
    strided_name);

// A problem with no rows or empty rows writes nothing (the guards catch any write).
TEST(SortEdge, EmptyProblemsWriteNothing) {
  for (DType d : kAllDTypes) {
    for (auto sizes : {std::vector<int64_t>{0}, std::vector<int64_t>{4, 0, 2}, std::vector<int64_t>{3}}) {
      Layout l;
      l.name = "empty";
      l.outer_sizes = sizes;
      const std::vector<int64_t> strides(sizes.size(), 7);
      l.input = {1, strides, 1};
      l.values = {1, strides, 1};
      l.indices = {1, strides, 1};
      const int64_t n = row_count(sizes) == 0 ? 5 : 0;
      EXPECT_TRUE(check_sort(d, SortOrder::kAscending, TieOrder::kIntrosort, n, l,
                             [&](int64_t) { return std::vector<uint64_t>(static_cast<size_t>(n), 1); },
                             describe(d, SortOrder::kAscending, TieOrder::kIntrosort, n, "ones", l.name)));
    }
  }
}

// Within one call, a row with many equal keys makes later rows skip the radix attempt: rows without
// ties or with a few ties after rows with many (and the reverse) must still come out exactly as the
// oracle says.
TEST(SortRows, TieStateCarriedAcrossRows) {
  std::mt19937_64 rng(0x71E5);
  int failures = 0;
  for (DType d : {DType::kInt16, DType::kBFloat16, DType::kInt32, DType::kFloat32, DType::kInt64,
                  DType::kFloat64}) {
    for (SortOrder order : {SortOrder::kAscending, SortOrder::kDescending}) {
      for (int64_t n : {17, 64, 100, 1000, 4097}) {
        for (int pattern = 0; pattern < 3; ++pattern) {
          Generator gen(d, rng);
          Layout l;
          l.name = pattern == 0 ? "ties_then_distinct" : pattern == 1 ? "distinct_then_ties" : "alternating";
          const int64_t rows = 6;
          l.outer_sizes = {rows};
          l.input = {1, {n}, 1};
          l.values = {1, {n}, 0};
          l.indices = {1, {n}, 1};
          auto make_row = [&](int64_t r) {
            const bool ties_row = pattern == 0 ? r < 2 : pattern == 1 ? r >= 4 : r % 2 == 0;
            if (ties_row) return gen.generate(r % 4 == 0 ? Dist::kFewDistinct : Dist::kKillerTies, n, order);
            // Distinct keys (a shuffled strictly increasing sequence, or the killer), or a few ties.
            return gen.generate(r % 3 == 0 ? Dist::kKiller : r % 3 == 1 ? Dist::kPermutation : Dist::kSparseTies, n, order);
          };
          if (!check_sort(d, order, TieOrder::kIntrosort, n, l, make_row,
                          describe(d, order, TieOrder::kIntrosort, n, "ties/distinct rows", l.name))) {
            if (++failures >= 5) FAIL() << "giving up";
          }
        }
      }
    }
  }
}

// ---- a real multi-threaded parallel_for -----------------------------------------------------------

void two_thread_for(int64_t begin, int64_t end, int64_t grain, void* context, kwker::ParallelBody body) {
  std::vector<std::pair<int64_t, int64_t>> chunks;
  for (int64_t b = begin; b < end; b += grain) chunks.emplace_back(b, std::min(end, b + grain));
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t k; (k = next.fetch_add(1)) < chunks.size();) body(context, chunks[k].first, chunks[k].second);
  };
  std::thread other(worker);
  worker();
  other.join();
}

class ParallelForGuard {
 public:
  explicit ParallelForGuard(kwker::ParallelForImpl impl) { kwker::set_parallel_for(impl); }
  ~ParallelForGuard() { kwker::set_parallel_for(nullptr); }
};

TEST(SortThreads, RowsOverTwoThreadsMatchOracle) {
  ParallelForGuard guard(&two_thread_for);
  std::mt19937_64 rng(0x7437);
  int failures = 0;
  // Long rows first, then short rows, then long again: thread workspaces are grown and reused.
  for (int64_t n : {40000, 100, 5000, 17, 40000}) {
    for (DType d : {DType::kInt16, DType::kFloat32, DType::kInt64, DType::kFloat64, DType::kUInt8}) {
      for (TieOrder ties : {TieOrder::kStable, TieOrder::kIntrosort}) {
        const SortOrder order = (n % 2) ? SortOrder::kDescending : SortOrder::kAscending;
        Generator gen(d, rng);
        const std::vector<Dist> dists = dists_for(d);
        Layout l;
        l.name = "rows_over_threads";
        const int64_t rows = n >= 40000 ? 6 : n >= 5000 ? 24 : 40;
        l.outer_sizes = {rows};
        l.input = {1, {n}, 1};
        l.values = {1, {n}, 1};
        l.indices = {rows, {1}, 1};  // transposed indices
        auto make_row = [&](int64_t r) { return gen.generate(dists[r % dists.size()], n, order); };
        if (!check_sort(d, order, ties, n, l, make_row, describe(d, order, ties, n, "per-row mix", l.name))) {
          if (++failures >= 5) FAIL() << "giving up";
        }
      }
    }
  }
}

// Chunks of rows that start in the middle of a multi-dim outer index (grain 32768 / n rows).
TEST(SortThreads, ChunksStartingMidOuterIndex) {
  ParallelForGuard guard(&two_thread_for);
  std::mt19937_64 rng(0xC4A2);
  int failures = 0;
  for (int64_t n : {6000, 33000, 1000}) {  // grain 5, 1, 32
    for (DType d : {DType::kInt32, DType::kFloat64, DType::kBFloat16}) {
      for (TieOrder ties : {TieOrder::kStable, TieOrder::kIntrosort}) {
        Generator gen(d, rng);
        const std::vector<Dist> dists = dists_for(d);
        Layout l;
        l.name = "3d_outer_over_threads";
        l.outer_sizes = n == 1000 ? std::vector<int64_t>{5, 7, 3} : std::vector<int64_t>{2, 3, 2};
        const int64_t s0 = l.outer_sizes[0], s1 = l.outer_sizes[1], s2 = l.outer_sizes[2];
        // input [i][d2][d0][d1]; values [d1][d0][d2][i]; indices [d2][d1][d0][i]
        l.input = {s2 * s0 * s1, {s1, 1, s0 * s1}, 1};
        l.values = {1, {s2 * n, s0 * s2 * n, n}, 1};
        l.indices = {1, {n, s0 * n, s0 * s1 * n}, 0};
        auto make_row = [&](int64_t r) { return gen.generate(dists[(r * 5) % dists.size()], n, SortOrder::kAscending); };
        if (!check_sort(d, SortOrder::kAscending, ties, n, l, make_row,
                        describe(d, SortOrder::kAscending, ties, n, "per-row mix", l.name))) {
          if (++failures >= 5) FAIL() << "giving up";
        }
      }
    }
  }
}

}  // namespace
}  // namespace kwker_test
