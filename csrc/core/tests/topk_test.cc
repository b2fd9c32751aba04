// kwker::topk_rows against torch's algorithm run literally (TopKImpl.h: libstdc++'s std::partial_sort,
// or std::nth_element plus std::sort, on (value, index) pairs with torch's comparator): every dtype
// torch's topk takes x largest x sorted, row lengths and k around the partial_sort / nth_element
// switch (k * 64 <= n), the heap's 64-element blocks and the introselect's small ranges, and the
// sort tests' distributions (heavy ties, NaN payloads, signed zeros, median-of-3 killers). Each case
// runs once per ISA the CPU supports; outputs sit between canaries.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kwker/topk.h"
#include "sort_test_util.h"

namespace kwker_test {
namespace {

constexpr int64_t kRowLengths[] = {1, 2, 3, 4, 5, 8, 9, 16, 17, 63, 64, 65, 100, 128, 129, 191, 255, 256, 257, 640, 1000, 4097};

std::vector<int64_t> ks_for(int64_t n) {
  std::vector<int64_t> ks = {0, 1, 2, 3, 4, n / 64, n / 64 + 1, n / 8, n / 2, n - 1, n};
  std::sort(ks.begin(), ks.end());
  ks.erase(std::unique(ks.begin(), ks.end()), ks.end());
  std::erase_if(ks, [n](int64_t k) { return k < 0 || k > n; });
  return ks;
}

// The indices torch's topk_impl_loop leaves in the first k places.
template <typename C, typename Convert>
std::vector<int64_t> torch_topk_typed(const std::vector<uint64_t>& bits, const Convert& convert, int64_t k,
                                      bool largest, bool sorted) {
  using Pair = std::pair<C, int64_t>;
  std::vector<Pair> queue(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) queue[i] = {convert(bits[i]), static_cast<int64_t>(i)};
  auto greater = [](const Pair& x, const Pair& y) {
    return (oracle_isnan(x.first) && !oracle_isnan(y.first)) || x.first > y.first;
  };
  auto less = [](const Pair& x, const Pair& y) {
    return (!oracle_isnan(x.first) && oracle_isnan(y.first)) || x.first < y.first;
  };
  const auto n = static_cast<int64_t>(bits.size());
  auto run = [&](const auto& comp) {
    if (k * 64 <= n) {
      std::partial_sort(queue.begin(), queue.begin() + k, queue.end(), comp);
    } else {
      std::nth_element(queue.begin(), queue.begin() + k - 1, queue.end(), comp);
      if (sorted) std::sort(queue.begin(), queue.begin() + k - 1, comp);
    }
  };
  if (k > 0) {
    if (largest) run(greater);
    else run(less);
  }
  std::vector<int64_t> indices(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) indices[i] = queue[i].second;
  return indices;
}

std::vector<int64_t> torch_topk(DType d, const std::vector<uint64_t>& bits, int64_t k, bool largest, bool sorted) {
  switch (d) {
    case DType::kUInt8:
      return torch_topk_typed<uint8_t>(bits, [](uint64_t b) { return static_cast<uint8_t>(b); }, k, largest, sorted);
    case DType::kInt8:
      return torch_topk_typed<int8_t>(bits, [](uint64_t b) { return static_cast<int8_t>(b); }, k, largest, sorted);
    case DType::kInt16:
      return torch_topk_typed<int16_t>(bits, [](uint64_t b) { return static_cast<int16_t>(b); }, k, largest, sorted);
    case DType::kInt32:
      return torch_topk_typed<int32_t>(bits, [](uint64_t b) { return static_cast<int32_t>(b); }, k, largest, sorted);
    case DType::kInt64:
      return torch_topk_typed<int64_t>(bits, [](uint64_t b) { return static_cast<int64_t>(b); }, k, largest, sorted);
    case DType::kFloat16:
      return torch_topk_typed<float>(bits, [](uint64_t b) { return half_to_float(static_cast<uint16_t>(b)); },
                                     k, largest, sorted);
    case DType::kBFloat16:
      return torch_topk_typed<float>(bits, [](uint64_t b) { return bfloat16_to_float(static_cast<uint16_t>(b)); },
                                     k, largest, sorted);
    case DType::kFloat32:
      return torch_topk_typed<double>(bits, [](uint64_t b) { return double{bits_to_float(b)}; }, k, largest, sorted);
    case DType::kFloat64:
      return torch_topk_typed<double>(bits, [](uint64_t b) { return bits_to_double(b); }, k, largest, sorted);
    case DType::kBool: break;
  }
  ADD_FAILURE() << "no topk for bool";
  return {};
}

// The value torch writes for an input element: its bits, except bfloat16 NaNs (0x7FC0 after float).
uint64_t torch_topk_value(DType d, uint64_t bits) {
  if (d == DType::kBFloat16 && float_format(d).is_nan(bits)) return 0x7FC0;
  return bits;
}

constexpr int64_t kCanaries = 8;
constexpr uint8_t kCanary = 0xA5;

// Runs kwker on one row (elements `stride` apart, outputs `out_stride` apart, canaries after the
// outputs) and compares with torch's algorithm; returns whether they agree.
bool check_topk(DType d, const std::vector<uint64_t>& data, int64_t k, bool largest, bool sorted,
                int64_t stride, int64_t out_stride, const std::string& what) {
  const auto n = static_cast<int64_t>(data.size());
  const size_t size = kwker::dtype_size(d);
  std::vector<uint8_t> input(static_cast<size_t>(std::max<int64_t>(1, n * stride)) * size, 0);
  for (int64_t i = 0; i < n; ++i) store_element(d, input.data(), i * stride, data[i]);
  const int64_t out_span = k * out_stride + kCanaries;
  std::vector<uint8_t> values(static_cast<size_t>(out_span) * size, kCanary);
  std::vector<int64_t> indices(static_cast<size_t>(out_span));
  std::memset(indices.data(), kCanary, indices.size() * sizeof(int64_t));
  kwker::TopKRowsProblem p{};
  p.dtype = d;
  p.largest = largest;
  p.sorted = sorted;
  p.k = k;
  p.row_length = n;
  p.input = {input.data(), stride, {}};
  p.values = {values.data(), out_stride, {}};
  p.indices = {indices.data(), out_stride, {}};
  kwker::topk_rows(p);

  const std::vector<int64_t> expected = torch_topk(d, data, k, largest, sorted);
  for (int64_t i = 0; i < k; ++i) {
    const int64_t got = indices[i * out_stride];
    if (got != expected[i]) {
      ADD_FAILURE() << what << ": index " << i << " is " << got << ", torch " << expected[i];
      return false;
    }
    if (load_element(d, values.data(), i * out_stride) != torch_topk_value(d, data[expected[i]])) {
      ADD_FAILURE() << what << ": value " << i << " differs from torch's";
      return false;
    }
  }
  for (size_t b = static_cast<size_t>(k * out_stride) * size; b < values.size(); ++b) {
    if (values[b] != kCanary) {
      ADD_FAILURE() << what << ": wrote past the values";
      return false;
    }
  }
  return true;
}

using TopKParam = std::tuple<DType, bool>;  // dtype, largest

class TopKMatrix : public ::testing::TestWithParam<TopKParam> {};

TEST_P(TopKMatrix, AllLengthsKsAndDistributions) {
  const auto [d, largest] = GetParam();
  std::mt19937_64 rng(0x70C0000ull ^ (static_cast<uint64_t>(d) << 4) ^ largest);
  Generator gen(d, rng);
  const SortOrder order = largest ? SortOrder::kDescending : SortOrder::kAscending;
  for_each_isa([&](Isa) {
    int failures = 0;
    for (int64_t n : kRowLengths) {
      for (Dist dist : dists_for(d)) {
        const std::vector<uint64_t> data = gen.generate(dist, n, order);
        for (int64_t k : ks_for(n)) {
          for (bool sorted : {true, false}) {
            const std::string what = std::string(dtype_name(d)) + " n=" + std::to_string(n) + " k=" +
                                     std::to_string(k) + " " + dist_name(dist) + (sorted ? " sorted" : " unsorted");
            if (!check_topk(d, data, k, largest, sorted, 1, 1, what) && ++failures >= 10) {
              FAIL() << "giving up after 10 failing cases";
            }
          }
        }
      }
    }
  });
}

constexpr DType kTopKDTypes[] = {DType::kUInt8,   DType::kInt8,     DType::kInt16,   DType::kInt32,  DType::kInt64,
                                 DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64};

INSTANTIATE_TEST_SUITE_P(All, TopKMatrix, ::testing::Combine(::testing::ValuesIn(kTopKDTypes), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<TopKParam>& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) +
                                  (std::get<1>(info.param) ? "_Largest" : "_Smallest");
                         });

TEST(TopK, StridedRowsAndOutputs) {
  std::mt19937_64 rng(0x57D);
  for_each_isa([&](Isa) {
    for (DType d : {DType::kFloat32, DType::kInt64, DType::kBFloat16}) {
      Generator gen(d, rng);
      for (int64_t n : {int64_t{100}, int64_t{1000}, int64_t{4097}}) {
        const std::vector<uint64_t> data = gen.generate(Dist::kFewDistinct, n, SortOrder::kDescending);
        for (int64_t k : {int64_t{1}, int64_t{5}, n / 3}) {
          check_topk(d, data, k, true, true, 3, 2, std::string(dtype_name(d)) + " strided n=" + std::to_string(n));
        }
      }
    }
  });
}

// A long row of heavy ties in the partial_sort regime: the heap replaces its top only on strictly
// smaller keys, so the first occurrences must win exactly as in libstdc++.
TEST(TopK, LongRowsOfTiesAndVocabularies) {
  std::mt19937_64 rng(0x10C);
  for_each_isa([&](Isa) {
    for (DType d : {DType::kFloat32, DType::kBFloat16, DType::kFloat16, DType::kInt32, DType::kFloat64, DType::kInt64}) {
      Generator gen(d, rng);
      for (Dist dist : {Dist::kRandomFinite, Dist::kFewDistinct, Dist::kAllEqual, Dist::kNaNMixed, Dist::kSorted,
                        Dist::kReversed}) {
        if (!kwker::is_floating(d) && (dist == Dist::kRandomFinite || dist == Dist::kNaNMixed)) continue;
        const std::vector<uint64_t> data = gen.generate(dist, 128256, SortOrder::kDescending);
        for (int64_t k : {1, 2, 10, 50, 2000, 2004}) {
          for (bool largest : {true, false}) {
            check_topk(d, data, k, largest, true, 1, 1,
                       std::string(dtype_name(d)) + " vocabulary " + dist_name(dist) + " k=" + std::to_string(k));
          }
        }
      }
    }
  });
}

// Rows whose sample misleads topk's threshold: the sampled runs (16 consecutive keys from j * (n - 16)
// / runs rounded down to a multiple of 16, runs = select_keys-inl.h's sample_size(n) / 16) hold the
// row's smallest keys, so the threshold keeps fewer than k + 1 keys and Kwker must fall back to
// libstdc++'s moves.
TEST(TopK, RowsWhoseSampleMisleads) {
  for_each_isa([&](Isa) {
    for (DType d : {DType::kFloat32, DType::kInt32, DType::kFloat64, DType::kInt64}) {
      for (int64_t n : {int64_t{1000}, int64_t{32000}}) {
        const double root = std::cbrt(static_cast<double>(n));
        const int64_t runs = std::clamp<int64_t>(static_cast<int64_t>(root * root), 64, 4096) / 16;
        std::vector<bool> sampled(static_cast<size_t>(n), false);
        for (int64_t j = 0; j < runs; ++j) {
          for (int64_t i = 0; i < 16; ++i) sampled[static_cast<size_t>(j * (n - 16) / runs / 16 * 16 + i)] = true;
        }
        const int64_t in_sample = std::count(sampled.begin(), sampled.end(), true);
        std::vector<uint64_t> data(static_cast<size_t>(n));
        int64_t small = 0, large = in_sample;
        for (int64_t i = 0; i < n; ++i) data[i] = value_of_rank(d, sampled[i] ? small++ : large++, n);
        for (int64_t k : {int64_t{10}, n / 64}) {
          check_topk(d, data, k, false, true, 1, 1, std::string(dtype_name(d)) + " misleading sample n=" +
                                                       std::to_string(n) + " k=" + std::to_string(k));
        }
      }
    }
  });
}

}  // namespace
}  // namespace kwker_test
