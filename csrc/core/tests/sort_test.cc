// kwker::sort_rows against the std::sort / std::stable_sort oracle: every dtype x order x tie order,
// sizes around the SIMD / insertion-sort / radix thresholds, and distributions that hit every path of
// the kernel (radix only, radix then introsort, direct introsort, heapsort fallback, rebased and wide
// 64-bit keys). Each case runs once per ISA the CPU supports (see for_each_isa).
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kwker/cpu.h"
#include "kwker/sort.h"
#include "sort_test_util.h"

namespace kwker_test {
namespace {

// Around: the leaf / insertion-sort threshold (16), the 64-element partition mask blocks, the 16-bit
// "ties likely" threshold (4096) and the length from which ties are assumed (16384).
constexpr int64_t kSizes[] = {0,   1,   2,    3,    7,    8,     9,     15,    16, 17,
                              31,  32,  33,   63,   64,   65,    100,   129,   1000,
                              4097, 16383, 16384, 70000};

uint64_t seed_for(DType d, SortOrder o, TieOrder t) {
  return 0x5EED0000ull ^ (static_cast<uint64_t>(d) << 8) ^ (static_cast<uint64_t>(o) << 4) ^
         static_cast<uint64_t>(t);
}

// ---- helpers checked on their own -----------------------------------------------------------------

TEST(SortTestHelpers, HalfToFloat) {
  EXPECT_EQ(half_to_float(0x3C00), 1.0f);
  EXPECT_EQ(half_to_float(0xC000), -2.0f);
  EXPECT_EQ(half_to_float(0x7BFF), 65504.0f);
  EXPECT_EQ(half_to_float(0x0400), std::ldexp(1.0f, -14));  // min normal
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));  // min subnormal
  EXPECT_EQ(half_to_float(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(half_to_float(0x3555), 0.25f * (1.0f + 0x155 / 1024.0f));  // 0.333252 (nearest half to 1/3)
  EXPECT_TRUE(std::signbit(half_to_float(0x8000)) && half_to_float(0x8000) == 0.0f);
  EXPECT_EQ(half_to_float(0x7C00), INFINITY);
  EXPECT_EQ(half_to_float(0xFC00), -INFINITY);
  EXPECT_TRUE(std::isnan(half_to_float(0x7C01)));
  EXPECT_TRUE(std::isnan(half_to_float(0xFE00)));
  // Strictly monotone over all finite positive halves.
  for (uint32_t b = 1; b < 0x7C00; ++b) ASSERT_LT(half_to_float(b - 1), half_to_float(b)) << b;
}

TEST(SortTestHelpers, BFloat16ToFloat) {
  EXPECT_EQ(bfloat16_to_float(0x3F80), 1.0f);
  EXPECT_EQ(bfloat16_to_float(0xC040), -3.0f);
  EXPECT_EQ(bfloat16_to_float(0x7F80), INFINITY);
  EXPECT_TRUE(std::isnan(bfloat16_to_float(0x7F81)));
  EXPECT_TRUE(std::isnan(bfloat16_to_float(0xFFC0)));
  EXPECT_EQ(bfloat16_to_float(0x0001), std::ldexp(1.0f, -133));
}

TEST(SortTestHelpers, IsaListStartsAtScalarAndEndsAtDetected) {
  const auto isas = supported_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), Isa::kScalar);
  EXPECT_EQ(isas.back(), kwker::detected_isa());
  std::string names;
  for (Isa i : isas) names += std::string(kwker::isa_name(i)) + " ";
  std::printf("[          ] ISAs under test: %s\n", names.c_str());
}

TEST(SortTestHelpers, SetIsaCapIsRestored) {
  const Isa before = kwker::active_isa();
  for_each_isa([&](Isa isa) { EXPECT_EQ(kwker::active_isa(), isa); });
  EXPECT_EQ(kwker::active_isa(), before);
}

// The killer inputs must really drive libstdc++'s introsort into its heapsort fallback, with and
// without ties, ascending and (mirrored) descending, or the fallback would go untested.
TEST(SortTestHelpers, KillerInputsReachHeapsortFallback) {
  for (int64_t n : {100, 1000, 4097, 70000}) {
    for (bool ties : {false, true}) {
      int64_t count = 0;
      const auto ranks = killer_ranks(n, ties, &count);
      EXPECT_TRUE(introsort_depth_runs_out(ranks)) << "n=" << n << " ties=" << ties;
      std::vector<int64_t> mirrored(ranks.size());
      for (size_t i = 0; i < ranks.size(); ++i) mirrored[i] = -(count - 1 - ranks[i]);  // desc == asc of -x
      EXPECT_TRUE(introsort_depth_runs_out(mirrored)) << "n=" << n << " ties=" << ties;
    }
  }
  // And a random permutation does not (so the probe is not trivially true).
  std::mt19937_64 rng(7);
  std::vector<int64_t> p(70000);
  std::iota(p.begin(), p.end(), 0);
  std::shuffle(p.begin(), p.end(), rng);
  EXPECT_FALSE(introsort_depth_runs_out(p));
}

// The oracle itself: std::sort ties differ from std::stable_sort on heavy-tie data (otherwise the
// kIntrosort tests would not distinguish the two orders).
TEST(SortTestHelpers, IntrosortTiesDifferFromStable) {
  std::mt19937_64 rng(3);
  Generator g(DType::kInt32, rng);
  const auto v = g.generate(Dist::kFewDistinct, 1000, SortOrder::kAscending);
  EXPECT_NE(oracle_permutation(DType::kInt32, v, SortOrder::kAscending, TieOrder::kStable),
            oracle_permutation(DType::kInt32, v, SortOrder::kAscending, TieOrder::kIntrosort));
}

// ---- the matrix ---------------------------------------------------------------------------------

using MatrixParam = std::tuple<DType, SortOrder, TieOrder>;

class SortMatrix : public ::testing::TestWithParam<MatrixParam> {};

TEST_P(SortMatrix, AllSizesAndDistributions) {
  const auto [d, order, ties] = GetParam();
  std::mt19937_64 rng(seed_for(d, order, ties));
  Generator gen(d, rng);
  int failures = 0;
  for (int64_t n : kSizes) {
    for (Dist dist : dists_for(d)) {
      const std::vector<uint64_t> data = gen.generate(dist, n, order);
      const Layout layout = single_row_layout(/*offset=*/1);
      if (!check_sort(d, order, ties, n, layout, [&](int64_t) { return data; },
                      describe(d, order, ties, n, dist_name(dist), layout.name))) {
        if (++failures >= 10) FAIL() << "giving up after 10 failing cases";
      }
    }
  }
}

std::string matrix_name(const ::testing::TestParamInfo<MatrixParam>& info) {
  const auto [d, o, t] = info.param;
  return std::string(dtype_name(d)) + "_" + order_name(o) + "_" + ties_name(t);
}

INSTANTIATE_TEST_SUITE_P(
    All, SortMatrix,
    ::testing::Combine(::testing::ValuesIn(kAllDTypes),
                       ::testing::Values(SortOrder::kAscending, SortOrder::kDescending),
                       ::testing::Values(TieOrder::kStable, TieOrder::kIntrosort)),
    matrix_name);

// ---- ~1M-element rows (a few combinations only, to bound the runtime) ---------------------------

struct LargeCase {
  DType dtype;
  SortOrder order;
  TieOrder ties;
  Dist dist;
};

void PrintTo(const LargeCase& c, std::ostream* os) {
  *os << dtype_name(c.dtype) << "/" << order_name(c.order) << "/" << ties_name(c.ties) << "/"
      << dist_name(c.dist);
}

class SortLarge : public ::testing::TestWithParam<LargeCase> {};

TEST_P(SortLarge, OneMillionElements) {
  const LargeCase c = GetParam();
  constexpr int64_t n = (int64_t{1} << 20) + 3;
  std::mt19937_64 rng(0xB16 ^ static_cast<uint64_t>(c.dist));
  Generator gen(c.dtype, rng);
  const auto data = gen.generate(c.dist, n, c.order);
  const Layout layout = single_row_layout(1);
  EXPECT_TRUE(check_sort(c.dtype, c.order, c.ties, n, layout, [&](int64_t) { return data; },
                         describe(c.dtype, c.order, c.ties, n, dist_name(c.dist), layout.name)));
}

std::string large_name(const ::testing::TestParamInfo<LargeCase>& info) {
  const LargeCase& c = info.param;
  std::string dist = dist_name(c.dist);
  for (char& ch : dist) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return std::string(dtype_name(c.dtype)) + "_" + order_name(c.order) + "_" + ties_name(c.ties) + "_" + dist;
}

INSTANTIATE_TEST_SUITE_P(
    All, SortLarge,
    ::testing::Values(
        // Random float32: a few birthday ties, so radix then the full introsort.
        LargeCase{DType::kFloat32, SortOrder::kAscending, TieOrder::kIntrosort, Dist::kRandomFinite},
        LargeCase{DType::kFloat32, SortOrder::kDescending, TieOrder::kStable, Dist::kNaNMixed},
        LargeCase{DType::kFloat32, SortOrder::kAscending, TieOrder::kIntrosort, Dist::kKillerTies},
        // A few ties among distinct keys: only the introsort's ranges that hold them are replayed.
        LargeCase{DType::kFloat32, SortOrder::kDescending, TieOrder::kIntrosort, Dist::kSparseTies},
        LargeCase{DType::kInt64, SortOrder::kAscending, TieOrder::kIntrosort, Dist::kSparseTies},
        // Sorted rows with a few ties: the key order is the input's (ascending) or its reverse.
        LargeCase{DType::kFloat32, SortOrder::kAscending, TieOrder::kIntrosort, Dist::kSortedTies},
        LargeCase{DType::kInt64, SortOrder::kDescending, TieOrder::kIntrosort, Dist::kSortedTies},
        // int64: wide keys with ties (scalar wide introsort), and rebased keys.
        LargeCase{DType::kInt64, SortOrder::kDescending, TieOrder::kIntrosort, Dist::kWideTies},
        LargeCase{DType::kInt64, SortOrder::kAscending, TieOrder::kStable, Dist::kRebase},
        // Keys spanning 2^32, with 21-bit positions: key and position packed into one integer.
        LargeCase{DType::kInt64, SortOrder::kDescending, TieOrder::kStable, Dist::kSpanMinWide},
        LargeCase{DType::kFloat64, SortOrder::kAscending, TieOrder::kStable, Dist::kSpanMinWide},
        LargeCase{DType::kInt64, SortOrder::kAscending, TieOrder::kIntrosort, Dist::kRebaseTies}),
    large_name);

}  // namespace
}  // namespace kwker_test
