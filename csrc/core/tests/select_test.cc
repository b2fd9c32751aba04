// kwker::select_rows and kwker::median_of_all against torch's algorithms run literally
// (Sorting.cpp): the Sedgewick quickselect of kthvalue, std::nth_element on indices with the
// (value, index) comparators of median / nanmedian along a dim, std::nth_element on the values for
// median() / nanmedian(). Every dtype torch takes x the sort tests' distributions (heavy ties, NaN
// payloads, signed zeros, median-of-3 killers) x row lengths around the sampled path's threshold x
// k across [1, n], on every ISA the CPU supports; strided rows and tiles; outputs between canaries.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kwker/select.h"
#include "sort_test_util.h"

namespace kwker_test {
namespace {

using kwker::SelectRule;

constexpr int64_t kRowLengths[] = {1, 2, 3, 4, 5, 7, 9, 15, 16, 17, 31, 32, 33, 48, 49, 63, 64, 65, 100, 255, 1000, 2047, 2048, 5000, 20000};

constexpr DType kSelectDTypes[] = {DType::kUInt8,   DType::kInt8,     DType::kInt16,   DType::kInt32,  DType::kInt64,
                                   DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64};

std::vector<int64_t> ks_for(int64_t n) {
  std::vector<int64_t> ks = {1, 2, n / 3, (n + 1) / 2, n - 1, n};
  std::sort(ks.begin(), ks.end());
  ks.erase(std::unique(ks.begin(), ks.end()), ks.end());
  std::erase_if(ks, [n](int64_t k) { return k < 1 || k > n; });
  return ks;
}

// Calls f.template operator()<C>(convert) with the type torch compares dtype d's elements as
// (float for float16 / bfloat16) and the bits -> C conversion.
template <typename F>
decltype(auto) with_compare_type(DType d, const F& f) {
  switch (d) {
    case DType::kUInt8: return f.template operator()<uint8_t>([](uint64_t b) { return static_cast<uint8_t>(b); });
    case DType::kInt8: return f.template operator()<int8_t>([](uint64_t b) { return static_cast<int8_t>(b); });
    case DType::kInt16: return f.template operator()<int16_t>([](uint64_t b) { return static_cast<int16_t>(b); });
    case DType::kInt32: return f.template operator()<int32_t>([](uint64_t b) { return static_cast<int32_t>(b); });
    case DType::kInt64: return f.template operator()<int64_t>([](uint64_t b) { return static_cast<int64_t>(b); });
    case DType::kFloat16:
      return f.template operator()<float>([](uint64_t b) { return half_to_float(static_cast<uint16_t>(b)); });
    case DType::kBFloat16:
      return f.template operator()<float>([](uint64_t b) { return bfloat16_to_float(static_cast<uint16_t>(b)); });
    case DType::kFloat32: return f.template operator()<float>([](uint64_t b) { return bits_to_float(b); });
    case DType::kFloat64:
    case DType::kBool: break;
  }
  return f.template operator()<double>([](uint64_t b) { return bits_to_double(b); });
}

// torch's answer along a dim: the index it returns (the value is that element's bits).
int64_t torch_select(DType d, SelectRule rule, int64_t k, const std::vector<uint64_t>& bits) {
  return with_compare_type(d, [&]<typename C>(const auto& convert) -> int64_t {
    const auto n = static_cast<int64_t>(bits.size());
    std::vector<C> v(bits.size());
    for (size_t i = 0; i < bits.size(); ++i) v[i] = convert(bits[i]);
    if (rule == SelectRule::kKthValue) {
      // quick_select_template, with values and indices swapped together.
      std::vector<int64_t> idx(bits.size());
      std::iota(idx.begin(), idx.end(), 0);
      auto gt = [](C x, C y) { return (oracle_isnan(x) && !oracle_isnan(y)) || x > y; };
      auto swap = [&](int64_t i, int64_t j) {
        std::swap(v[i], v[j]);
        std::swap(idx[i], idx[j]);
      };
      const int64_t t = k - 1;
      int64_t L = 0, R = n - 1;
      while (true) {
        if (R <= L) break;
        if (R == L + 1) {
          if (gt(v[L], v[R])) swap(L, R);
          break;
        }
        const int64_t P = (L + R) >> 1;
        swap(P, L + 1);
        if (gt(v[L + 1], v[R])) swap(L + 1, R);
        if (gt(v[L], v[R])) swap(L, R);
        if (gt(v[L + 1], v[L])) swap(L + 1, L);
        int64_t i = L + 1, j = R;
        const C piv = v[L];
        while (true) {
          do i++; while (gt(piv, v[i]));
          do j--; while (gt(v[j], piv));
          if (j < i) break;
          swap(i, j);
        }
        swap(L, j);
        if (j <= t) L = i;
        if (j >= t) R = j - 1;
      }
      return idx[t];
    }
    if (rule == SelectRule::kMedian) {
      for (int64_t i = 0; i < n; ++i) {
        if (oracle_isnan(v[i])) return i;
      }
    }
    std::vector<int64_t> idx(bits.size());
    std::iota(idx.begin(), idx.end(), 0);
    auto nth = idx.begin();
    if (rule == SelectRule::kMedian) {
      nth += (n - 1) / 2;
      std::nth_element(idx.begin(), nth, idx.end(),
                       [&v](int64_t i, int64_t j) { return v[i] < v[j] || (v[i] == v[j] && i < j); });
    } else {
      const auto nans = std::count_if(v.begin(), v.end(), [](C x) { return oracle_isnan(x); });
      nth += (n - nans - 1) / 2;
      std::nth_element(idx.begin(), nth, idx.end(), [&v](int64_t i, int64_t j) {
        return v[i] < v[j] || (v[i] == v[j] && i < j) || (oracle_isnan(v[j]) && !oracle_isnan(v[i]));
      });
    }
    return *nth;
  });
}

// torch's median() / nanmedian() bits.
uint64_t torch_median_of_all(DType d, bool ignore_nan, const std::vector<uint64_t>& bits) {
  return with_compare_type(d, [&]<typename C>(const auto& convert) -> uint64_t {
    using Element = std::pair<C, uint64_t>;  // compared by value, carrying the bits
    std::vector<Element> v(bits.size());
    for (size_t i = 0; i < bits.size(); ++i) v[i] = {convert(bits[i]), bits[i]};
    const auto n = static_cast<int64_t>(bits.size());
    if (!ignore_nan && std::any_of(v.begin(), v.end(), [](const Element& e) { return oracle_isnan(e.first); })) {
      return float_format(d).quiet_nan();
    }
    auto nth = v.begin();
    if (!ignore_nan) {
      nth += (n - 1) / 2;
      std::nth_element(v.begin(), nth, v.end(), [](const Element& a, const Element& b) { return a.first < b.first; });
    } else {
      const auto nans = std::count_if(v.begin(), v.end(), [](const Element& e) { return oracle_isnan(e.first); });
      nth += (n - nans - 1) / 2;
      std::nth_element(v.begin(), nth, v.end(), [](const Element& a, const Element& b) {
        return a.first < b.first || (oracle_isnan(b.first) && !oracle_isnan(a.first));
      });
    }
    return nth->second;
  });
}

const char* rule_name(SelectRule rule) {
  switch (rule) {
    case SelectRule::kKthValue: return "kthvalue";
    case SelectRule::kMedian: return "median";
    case SelectRule::kNanMedian: break;
  }
  return "nanmedian";
}

constexpr uint8_t kCanary = 0xA5;

// Runs select_rows on `columns` rows of `data.size() / columns` elements each: row c holds data[i *
// columns + c] (columns == 1: one contiguous row; more: the rows run along dim 0 of a row-major
// matrix, the tiled path). With a window, the rows are instead the data's sliding windows of that
// length (row c holds data[c + i], as unfold makes them). Outputs are written `out_stride` apart between canaries. Compares every
// row with torch; returns whether all agree.
bool check_select(DType d, SelectRule rule, int64_t k, const std::vector<uint64_t>& data, int64_t columns,
                  int64_t out_stride, const std::string& what, int64_t window = 0) {
  const int64_t n = window > 0 ? window : static_cast<int64_t>(data.size()) / columns;
  const int64_t element_stride = window > 0 ? 1 : columns;
  if (window > 0) columns = static_cast<int64_t>(data.size()) - window + 1;
  const size_t size = kwker::dtype_size(d);
  std::vector<uint8_t> input(data.size() * size);
  for (size_t i = 0; i < data.size(); ++i) store_element(d, input.data(), static_cast<int64_t>(i), data[i]);
  const int64_t out_span = columns * out_stride + 1;
  std::vector<uint8_t> values(static_cast<size_t>(out_span) * size, kCanary);
  std::vector<int64_t> indices(static_cast<size_t>(out_span));
  std::memset(indices.data(), kCanary, indices.size() * sizeof(int64_t));
  const std::vector<int64_t> outer_sizes = {columns}, input_strides = {1}, out_strides = {out_stride};
  kwker::SelectRowsProblem p{};
  p.dtype = d;
  p.rule = rule;
  p.k = k;
  p.row_length = n;
  p.outer_sizes = outer_sizes;
  p.input = {input.data(), element_stride, input_strides};
  p.values = {values.data(), 0, out_strides};
  p.indices = {indices.data(), 0, out_strides};
  kwker::select_rows(p);
  for (int64_t c = 0; c < columns; ++c) {
    std::vector<uint64_t> row(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) row[i] = data[i * element_stride + c];
    const int64_t expected = torch_select(d, rule, k, row);
    const int64_t got = indices[c * out_stride];
    if (got != expected) {
      ADD_FAILURE() << what << " row " << c << ": index " << got << ", torch " << expected;
      return false;
    }
    if (load_element(d, values.data(), c * out_stride) != row[expected]) {
      ADD_FAILURE() << what << " row " << c << ": value differs from torch's";
      return false;
    }
  }
  for (int64_t o = 0; o < out_span; ++o) {
    if (o % out_stride == 0 && o < columns * out_stride) continue;
    const uint64_t canaries = 0xA5A5A5A5A5A5A5A5ull;
    if (static_cast<uint64_t>(indices[o]) != canaries || load_element(d, values.data(), o) != (canaries & dtype_mask(d))) {
      ADD_FAILURE() << what << ": wrote outside the outputs";
      return false;
    }
  }
  return true;
}

class SelectMatrix : public ::testing::TestWithParam<DType> {};

TEST_P(SelectMatrix, AllRulesLengthsKsAndDistributions) {
  const DType d = GetParam();
  std::mt19937_64 rng(0x5E1Eull ^ static_cast<uint64_t>(d));
  Generator gen(d, rng);
  for_each_isa([&](Isa) {
    int failures = 0;
    for (int64_t n : kRowLengths) {
      for (Dist dist : dists_for(d)) {
        const std::vector<uint64_t> data = gen.generate(dist, n, SortOrder::kAscending);
        auto check = [&](SelectRule rule, int64_t k) {
          const std::string what = std::string(rule_name(rule)) + " " + dtype_name(d) + " n=" + std::to_string(n) +
                                   " k=" + std::to_string(k) + " " + dist_name(dist);
          if (!check_select(d, rule, k, data, 1, 1, what) && ++failures >= 10) FAIL() << "giving up after 10";
        };
        check(SelectRule::kMedian, 0);
        check(SelectRule::kNanMedian, 0);
        for (int64_t k : ks_for(n)) check(SelectRule::kKthValue, k);
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(All, SelectMatrix, ::testing::ValuesIn(kSelectDTypes),
                         [](const ::testing::TestParamInfo<DType>& info) { return dtype_name(info.param); });

// Rows along dim 0 of a matrix (tiles of 16 columns, with a partial last tile), outputs strided.
TEST(Select, ColumnsOfAMatrix) {
  std::mt19937_64 rng(0xC01);
  for_each_isa([&](Isa) {
    for (DType d : {DType::kFloat32, DType::kInt64, DType::kBFloat16, DType::kFloat64}) {
      Generator gen(d, rng);
      for (Dist dist : {Dist::kRandom, Dist::kFewDistinct, Dist::kNaNMixed, Dist::kSignedZeros}) {
        if (!kwker::is_floating(d) && dist != Dist::kFewDistinct && dist != Dist::kRandom) continue;
        for (int64_t n : {int64_t{300}, int64_t{3000}}) {
          const std::vector<uint64_t> data = gen.generate(dist, n * 37, SortOrder::kAscending);
          const std::string what = std::string(dtype_name(d)) + " " + dist_name(dist) + " columns n=" + std::to_string(n);
          check_select(d, SelectRule::kMedian, 0, data, 37, 3, what);
          check_select(d, SelectRule::kNanMedian, 0, data, 37, 1, what);
          check_select(d, SelectRule::kKthValue, n / 4 + 1, data, 37, 2, what);
          const std::vector<uint64_t> seven(data.begin(), data.begin() + n * 7);
          check_select(d, SelectRule::kKthValue, n / 4 + 1, seven, 7, 1, what + " 7 columns");
        }
      }
    }
  });
}

// Short rows along dim 0 of a matrix and sliding windows, selected a vector lane per row
// (select_lanes): every dtype and distribution, lengths up to and past the lanes' limit (64), partial
// groups of lanes (7, 37 columns), tied kthvalues and nanmedians of NaNs left to the row kernel.
TEST(Select, ShortColumns) {
  std::mt19937_64 rng(0x1A9E5);
  for_each_isa([&](Isa) {
    for (DType d : kSelectDTypes) {
      Generator gen(d, rng);
      int failures = 0;
      for (int64_t n : {1, 2, 3, 4, 5, 9, 16, 17, 25, 31, 32, 33, 63, 64, 65}) {
        for (Dist dist : dists_for(d)) {
          for (int64_t columns : {7, 37}) {
            const std::vector<uint64_t> data = gen.generate(dist, n * columns, SortOrder::kAscending);
            const std::string what = std::string(dtype_name(d)) + " " + dist_name(dist) + " n=" + std::to_string(n) +
                                     " columns=" + std::to_string(columns);
            bool ok = check_select(d, SelectRule::kMedian, 0, data, columns, 2, what + " median");
            ok &= check_select(d, SelectRule::kNanMedian, 0, data, columns, 1, what + " nanmedian");
            for (int64_t k : {int64_t{1}, (n + 1) / 2, n}) {
              ok &= check_select(d, SelectRule::kKthValue, k, data, columns, 1, what + " k=" + std::to_string(k));
            }
            if (columns == 7) {  // n * 7 - n + 1 windows
              ok &= check_select(d, SelectRule::kMedian, 0, data, 1, 1, what + " windows median", n);
              ok &= check_select(d, SelectRule::kNanMedian, 0, data, 1, 1, what + " windows nanmedian", n);
              ok &= check_select(d, SelectRule::kKthValue, (n + 1) / 2, data, 1, 1, what + " windows kthvalue", n);
            }
            if (!ok && ++failures >= 10) FAIL() << "giving up after 10";
          }
        }
      }
    }
  });
}

// Rows whose evenly spaced sample misleads the bracket of long rows: the sampled elements (at j * n / s,
// s as select_row-inl.h's sample_size) are the row's largest, so the bracket around the median of the
// sample holds none of the middle ranks and Kwker must redo the pass keeping every element.
TEST(Select, RowsWhoseSampleMisleads) {
  for_each_isa([&](Isa) {
    for (DType d : {DType::kFloat32, DType::kInt32, DType::kFloat64, DType::kInt64}) {
      for (int64_t n : {int64_t{5000}, int64_t{100000}}) {
        const double root = std::cbrt(static_cast<double>(n));
        const int64_t s = std::clamp<int64_t>(static_cast<int64_t>(root * root), 64, 4096);
        std::vector<bool> sampled(static_cast<size_t>(n), false);
        for (int64_t j = 0; j < s; ++j) sampled[static_cast<size_t>(j * n / s)] = true;
        std::vector<uint64_t> data(static_cast<size_t>(n));
        int64_t small = 0, large = n - s;
        for (int64_t i = 0; i < n; ++i) data[i] = value_of_rank(d, sampled[i] ? large++ : small++, n);
        const std::string what = std::string(dtype_name(d)) + " n=" + std::to_string(n) + " misleading sample";
        check_select(d, SelectRule::kMedian, 0, data, 1, 1, what);
        check_select(d, SelectRule::kNanMedian, 0, data, 1, 1, what);
        check_select(d, SelectRule::kKthValue, n / 3, data, 1, 1, what);
      }
    }
  });
}

// median_of_all: torch's bits where they do not depend on the algorithm, false (nothing written)
// exactly where they do.
TEST(Select, MedianOfAll) {
  std::mt19937_64 rng(0xA11);
  for_each_isa([&](Isa) {
    for (DType d : kSelectDTypes) {
      Generator gen(d, rng);
      for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{5}, int64_t{64}, int64_t{1000}, int64_t{5000}}) {
        for (Dist dist : dists_for(d)) {
          const std::vector<uint64_t> data = gen.generate(dist, n, SortOrder::kAscending);
          std::vector<uint8_t> input(data.size() * kwker::dtype_size(d));
          for (size_t i = 0; i < data.size(); ++i) store_element(d, input.data(), static_cast<int64_t>(i), data[i]);
          for (bool ignore_nan : {false, true}) {
            const std::string what = std::string(ignore_nan ? "nanmedian() " : "median() ") + dtype_name(d) +
                                     " n=" + std::to_string(n) + " " + dist_name(dist);
            uint64_t got = 0xA5A5A5A5A5A5A5A5ull & dtype_mask(d);
            const uint64_t untouched = got;
            const bool served = kwker::median_of_all(d, ignore_nan, input.data(), n, &got);
            const uint64_t expected = torch_median_of_all(d, ignore_nan, data);
            if (served) {
              EXPECT_EQ(got, expected) << what;
              continue;
            }
            EXPECT_EQ(got, untouched) << what << ": declined but wrote";
            // Declining is allowed only where torch's bits are algorithm-dependent.
            const FloatFormat f = float_format(d);
            const bool all_nan = std::all_of(data.begin(), data.end(), [&f](uint64_t b) { return f.is_nan(b); });
            const bool both_zeros = std::count(data.begin(), data.end(), 0) > 0 &&
                                    std::count(data.begin(), data.end(), f.sign()) > 0;
            EXPECT_TRUE(kwker::is_floating(d) && ((ignore_nan && all_nan) || both_zeros)) << what << ": declined";
          }
        }
      }
    }
  });
}

}  // namespace
}  // namespace kwker_test
