// kwker::UniqueSorted against torch's algorithm run literally (Unique.cpp's unique_cpu_sorted_template:
// sort, keep the first of every run of != values, inverse = run number, counts = run lengths), with
// std::sort on (value, index) pairs as its sort: every dtype x the sort tests' distributions x sizes
// on both sides of the counting table's limits. Inputs with a NaN or both zeros must be declined;
// every other input must give torch's answer, whatever order its sort left equal keys in.
#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kwker/unique.h"
#include "sort_test_util.h"

namespace kwker_test {
namespace {

struct UniqueAnswer {
  std::vector<uint64_t> values;  // bits
  std::vector<int64_t> inverse, counts;
};

template <typename C, typename Convert>
UniqueAnswer torch_unique(const std::vector<uint64_t>& bits, const Convert& convert) {
  const auto perm = oracle_typed<C>(bits, convert, SortOrder::kAscending, TieOrder::kIntrosort);
  UniqueAnswer a;
  a.inverse.resize(bits.size());
  int64_t run_start = 0;
  for (size_t i = 0; i < perm.size(); ++i) {
    if (i == 0 || convert(bits[perm[i]]) != convert(bits[perm[i - 1]])) {
      if (i > 0) a.counts.push_back(static_cast<int64_t>(i) - run_start);
      a.values.push_back(bits[perm[i]]);
      run_start = static_cast<int64_t>(i);
    }
    a.inverse[perm[i]] = static_cast<int64_t>(a.values.size()) - 1;
  }
  a.counts.push_back(static_cast<int64_t>(perm.size()) - run_start);
  return a;
}

UniqueAnswer torch_unique(DType d, const std::vector<uint64_t>& bits) {
  switch (d) {
    case DType::kUInt8: return torch_unique<uint8_t>(bits, [](uint64_t b) { return static_cast<uint8_t>(b); });
    case DType::kInt8: return torch_unique<int8_t>(bits, [](uint64_t b) { return static_cast<int8_t>(b); });
    case DType::kInt16: return torch_unique<int16_t>(bits, [](uint64_t b) { return static_cast<int16_t>(b); });
    case DType::kInt32: return torch_unique<int32_t>(bits, [](uint64_t b) { return static_cast<int32_t>(b); });
    case DType::kInt64: return torch_unique<int64_t>(bits, [](uint64_t b) { return static_cast<int64_t>(b); });
    case DType::kFloat16:
      return torch_unique<float>(bits, [](uint64_t b) { return half_to_float(static_cast<uint16_t>(b)); });
    case DType::kBFloat16:
      return torch_unique<float>(bits, [](uint64_t b) { return bfloat16_to_float(static_cast<uint16_t>(b)); });
    case DType::kFloat32: return torch_unique<float>(bits, [](uint64_t b) { return bits_to_float(b); });
    case DType::kFloat64: return torch_unique<double>(bits, [](uint64_t b) { return bits_to_double(b); });
    case DType::kBool: break;
  }
  return {};
}

// Whether torch's answer depends on its sort's tie order: a NaN, or both -0.0 and +0.0.
bool depends_on_tie_order(DType d, const std::vector<uint64_t>& bits) {
  if (!kwker::is_floating(d)) return false;
  const auto f = float_format(d);
  bool nan = false, negative_zero = false, positive_zero = false;
  for (uint64_t b : bits) {
    nan |= (b & ~f.sign()) > f.inf();
    negative_zero |= b == f.sign();
    positive_zero |= b == 0;
  }
  return nan || (negative_zero && positive_zero);
}

// Runs one input on every ISA (the sort path dispatches), with and without ranks wanted; false on the
// first mismatch.
bool check(DType d, const std::vector<uint64_t>& bits, const std::string& name) {
  const size_t es = kwker::dtype_size(d);
  const int64_t n = static_cast<int64_t>(bits.size());
  std::vector<uint8_t> data(bits.size() * es);
  for (int64_t i = 0; i < n; ++i) store_element(d, data.data(), i, bits[i]);
  const bool declines = depends_on_tie_order(d, bits);
  const UniqueAnswer want = declines ? UniqueAnswer{} : torch_unique(d, bits);
  bool ok = true;
  for_each_isa([&](Isa) {
    for (const auto ranks : {kwker::UniqueRanks::kWanted, kwker::UniqueRanks::kNotWanted}) {
      if (!ok) return;
      const bool with_ranks = ranks == kwker::UniqueRanks::kWanted;
      kwker::UniqueSorted unique;
      const bool prepared = unique.prepare(d, data.data(), n, ranks);
      if (prepared == declines) {
        ADD_FAILURE() << name << ": prepare() returned " << prepared;
        ok = false;
        return;
      }
      if (!prepared) continue;
      const int64_t u = unique.count();
      if (u != static_cast<int64_t>(want.values.size())) {
        ADD_FAILURE() << name << ": " << u << " values, torch " << want.values.size();
        ok = false;
        return;
      }
      std::vector<uint8_t> values((u + 1) * es, 0xEE);
      std::vector<int64_t> inverse(n + 1, -7), counts(u + 1, -7);
      unique.write(values.data(), with_ranks ? inverse.data() : nullptr, counts.data());
      for (int64_t i = 0; i < u && ok; ++i) {
        if (load_element(d, values.data(), i) != want.values[i] || counts[i] != want.counts[i]) {
          ADD_FAILURE() << name << ": value " << i << " " << hex(load_element(d, values.data(), i)) << " x" << counts[i]
                        << ", torch " << hex(want.values[i]) << " x" << want.counts[i];
          ok = false;
        }
      }
      for (int64_t i = 0; i < n && ok && with_ranks; ++i) {
        if (inverse[i] != want.inverse[i]) {
          ADD_FAILURE() << name << ": inverse[" << i << "] " << inverse[i] << ", torch " << want.inverse[i];
          ok = false;
        }
      }
      if (inverse[n] != -7 || counts[u] != -7 || values[u * es] != 0xEE) {
        ADD_FAILURE() << name << ": wrote past the outputs";
        ok = false;
      }
    }
  });
  return ok;
}

TEST(UniqueSorted, EveryDtypeDistributionAndSize) {
  std::mt19937_64 rng(31);
  for (DType d : kAllDTypes) {
    if (d == DType::kBool) continue;
    Generator g(d, rng);
    for (Dist dist : dists_for(d)) {
      for (int64_t n : {1, 2, 3, 17, 300, 5000, 70000}) {
        const auto bits = g.generate(dist, n, SortOrder::kAscending);
        ASSERT_TRUE(check(d, bits, std::string(dtype_name(d)) + " " + dist_name(dist) + " n=" + std::to_string(n)));
      }
    }
  }
}

// Integers around the limits of the counting table (a range of 2^16: always; twice the input, up to
// 2^22) and the bitmap (64 values per element, up to 2^28), and wider (sorted), offset to the types'
// extremes.
TEST(UniqueSorted, IntegerRangesAroundTheTableLimits) {
  std::mt19937_64 rng(5);
  for (DType d : {DType::kInt32, DType::kInt64}) {
    const int64_t low = d == DType::kInt32 ? INT32_MIN : INT64_MIN;
    for (int64_t n : {1000, 100000}) {
      for (int64_t range : {int64_t{1} << 16, (int64_t{1} << 16) + 1, 2 * n, 2 * n + 1, int64_t{1} << 22,
                            (int64_t{1} << 22) + 1, 64 * n, 64 * n + 1, int64_t{1} << 28, (int64_t{1} << 28) + 1,
                            int64_t{1} << 30}) {
        for (int64_t base : {low, int64_t{-5}, (d == DType::kInt32 ? INT32_MAX : INT64_MAX) - range + 1}) {
          std::vector<uint64_t> bits(n);
          for (auto& b : bits) b = static_cast<uint64_t>(base + static_cast<int64_t>(rng() % range)) & dtype_mask(d);
          bits[0] = static_cast<uint64_t>(base) & dtype_mask(d);
          bits[1] = static_cast<uint64_t>(base + range - 1) & dtype_mask(d);
          ASSERT_TRUE(check(d, bits, std::string(dtype_name(d)) + " range=" + std::to_string(range) +
                                         " base=" + std::to_string(base) + " n=" + std::to_string(n)));
        }
      }
    }
  }
}

TEST(UniqueSorted, FloatsOfOneZeroSignAreServed) {
  std::mt19937_64 rng(9);
  for (DType d : {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64}) {
    Generator g(d, rng);
    const auto f = float_format(d);
    for (uint64_t zero : {uint64_t{0}, f.sign()}) {
      auto bits = g.generate(Dist::kRandomFinite, 3000, SortOrder::kAscending);
      for (size_t i = 0; i < bits.size(); i += 7) bits[i] = zero;
      for (auto& b : bits) {
        if (b == (zero ^ f.sign())) b = zero;
      }
      ASSERT_TRUE(check(d, bits, std::string(dtype_name(d)) + " zeros " + hex(zero)));
    }
  }
}

// Floats whose keys span a narrow range (counted or marked, not sorted): values around +-1 and
// around zero from both signs (one zero sign only), for every table/bitmap/sort choice.
TEST(UniqueSorted, FloatsOfNarrowKeyRanges) {
  std::mt19937_64 rng(13);
  for (DType d : {DType::kFloat32, DType::kFloat64}) {
    const auto f = float_format(d);
    const uint64_t one = d == DType::kFloat32 ? 0x3F800000u : 0x3FF0000000000000ull;
    for (int64_t span : {int64_t{50}, int64_t{1} << 15, int64_t{1} << 20, int64_t{1} << 24, int64_t{1} << 34}) {
      for (int64_t n : {1000, 50000}) {
        std::vector<uint64_t> bits(n);
        for (auto& b : bits) {
          const uint64_t magnitude = rng() % 3 == 0 ? rng() % span : one + rng() % span;
          b = (rng() & 1) ? (magnitude | f.sign()) : magnitude;
          if ((b & ~f.sign()) == 0) b = 0;  // +0.0 only
        }
        ASSERT_TRUE(check(d, bits, std::string(dtype_name(d)) + " span=" + std::to_string(span) + " n=" +
                                       std::to_string(n)));
      }
    }
  }
}

}  // namespace
}  // namespace kwker_test

namespace kwker_test {
namespace {

using kwker::RowRuns;

// torch's _unique_dim_cpu_template, literally: (sorted) std::sort of row indices by lexicographic <,
// then runs of rows == their run's first row; values are the run's first row, as bits.
template <typename C, typename Convert>
UniqueAnswer torch_unique_rows(const std::vector<uint64_t>& bits, int64_t rows, int64_t k, RowRuns runs,
                               const Convert& convert) {
  std::vector<int64_t> order(rows);
  std::iota(order.begin(), order.end(), 0);
  auto at = [&](int64_t r, int64_t i) { return convert(bits[r * k + i]); };
  if (runs == RowRuns::kSorted) {
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      for (int64_t i = 0; i < k; ++i) {
        if (at(a, i) < at(b, i)) return true;
        if (at(a, i) > at(b, i)) return false;
      }
      return false;
    });
  }
  auto equal = [&](int64_t a, int64_t b) {
    for (int64_t i = 0; i < k; ++i) {
      if (!(at(a, i) == at(b, i))) return false;
    }
    return true;
  };
  UniqueAnswer answer;
  answer.inverse.resize(rows);
  int64_t first = order[0], run_start = 0;
  for (int64_t i = 0; i < rows; ++i) {
    if (i == 0 || !equal(first, order[i])) {
      if (i > 0) answer.counts.push_back(i - run_start);
      first = order[i];
      run_start = i;
      for (int64_t j = 0; j < k; ++j) answer.values.push_back(bits[first * k + j]);
    }
    answer.inverse[order[i]] = static_cast<int64_t>(answer.counts.size());
  }
  answer.counts.push_back(rows - run_start);
  return answer;
}

UniqueAnswer torch_unique_rows(DType d, const std::vector<uint64_t>& bits, int64_t rows, int64_t k, RowRuns runs) {
  auto run = [&](auto convert) {
    using C = decltype(convert(uint64_t{}));
    return torch_unique_rows<C>(bits, rows, k, runs, convert);
  };
  switch (d) {
    case DType::kBool: return run([](uint64_t b) { return b != 0; });
    case DType::kUInt8: return run([](uint64_t b) { return static_cast<uint8_t>(b); });
    case DType::kInt8: return run([](uint64_t b) { return static_cast<int8_t>(b); });
    case DType::kInt16: return run([](uint64_t b) { return static_cast<int16_t>(b); });
    case DType::kInt32: return run([](uint64_t b) { return static_cast<int32_t>(b); });
    case DType::kInt64: return run([](uint64_t b) { return static_cast<int64_t>(b); });
    case DType::kFloat16: return run([](uint64_t b) { return half_to_float(static_cast<uint16_t>(b)); });
    case DType::kBFloat16: return run([](uint64_t b) { return bfloat16_to_float(static_cast<uint16_t>(b)); });
    case DType::kFloat32: return run([](uint64_t b) { return bits_to_float(b); });
    case DType::kFloat64: return run([](uint64_t b) { return bits_to_double(b); });
  }
  return {};
}

bool check_rows(DType d, const std::vector<uint64_t>& bits, int64_t rows, int64_t k, RowRuns runs,
                const std::string& name) {
  const size_t es = kwker::dtype_size(d);
  std::vector<uint8_t> data(bits.size() * es);
  for (size_t i = 0; i < bits.size(); ++i) store_element(d, data.data(), static_cast<int64_t>(i), bits[i]);
  const bool declines = runs == RowRuns::kSorted && depends_on_tie_order(d, bits);
  kwker::UniqueRows unique;
  if (unique.prepare(d, runs, data.data(), rows, k) == declines) {
    ADD_FAILURE() << name << ": prepare() returned " << !declines;
    return false;
  }
  if (declines) return true;
  const UniqueAnswer want = torch_unique_rows(d, bits, rows, k, runs);
  const int64_t u = unique.count();
  if (u * k != static_cast<int64_t>(want.values.size())) {
    ADD_FAILURE() << name << ": " << u << " rows, torch " << want.values.size() / k;
    return false;
  }
  std::vector<uint8_t> values((u * k + 1) * es, 0xEE);
  std::vector<int64_t> inverse(rows + 1, -7), counts(u + 1, -7);
  unique.write(values.data(), inverse.data(), counts.data());
  for (int64_t i = 0; i < u * k; ++i) {
    if (load_element(d, values.data(), i) != want.values[i]) {
      ADD_FAILURE() << name << ": value " << i << " " << hex(load_element(d, values.data(), i)) << ", torch "
                    << hex(want.values[i]);
      return false;
    }
  }
  if (std::vector<int64_t>(inverse.begin(), inverse.end() - 1) != want.inverse ||
      std::vector<int64_t>(counts.begin(), counts.end() - 1) != want.counts) {
    ADD_FAILURE() << name << ": inverse or counts differ";
    return false;
  }
  if (inverse[rows] != -7 || counts[u] != -7 || values[u * k * es] != 0xEE) {
    ADD_FAILURE() << name << ": wrote past the outputs";
    return false;
  }
  return true;
}

TEST(UniqueRows, SortedAndConsecutiveEveryDtype) {
  std::mt19937_64 rng(17);
  for (DType d : kAllDTypes) {
    Generator g(d, rng);
    for (Dist dist : dists_for(d)) {
      for (auto [rows, k] : {std::pair<int64_t, int64_t>{1, 1}, {5, 3}, {200, 2}, {1000, 1}, {300, 7}, {64, 16}}) {
        // Rows drawn from a small pool of rows (repeats, adjacent too), each of the distribution.
        const auto pool = g.generate(dist, 6 * k, SortOrder::kAscending);
        std::vector<uint64_t> bits;
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t p = static_cast<int64_t>(g.uniform(g.chance(0.3) ? 2 : 6));
          bits.insert(bits.end(), pool.begin() + p * k, pool.begin() + (p + 1) * k);
        }
        for (RowRuns runs : {RowRuns::kSorted, RowRuns::kConsecutive}) {
          ASSERT_TRUE(check_rows(d, bits, rows, k, runs,
                                 std::string(dtype_name(d)) + " " + dist_name(dist) + " " + std::to_string(rows) +
                                     "x" + std::to_string(k) + (runs == RowRuns::kSorted ? " sorted" : " consecutive")));
        }
      }
    }
  }
}

// Integer rows packed into one key (column ranges multiplying below 2^63) and rows that are not:
// ranges at the limit, negative values, the first column most significant.
TEST(UniqueRows, PackedIntegerRowsAroundTheLimit) {
  std::mt19937_64 rng(23);
  for (auto [first_range, second_range] : {std::pair<uint64_t, uint64_t>{3, 5}, {uint64_t{1} << 31, uint64_t{1} << 32},
                                           {uint64_t{1} << 32, uint64_t{1} << 31}, {uint64_t{1} << 32, uint64_t{1} << 32},
                                           {1, uint64_t{1} << 62}, {2, uint64_t{1} << 62}}) {
    std::vector<uint64_t> pool;
    for (int p = 0; p < 8; ++p) {
      pool.push_back(static_cast<uint64_t>(-int64_t(first_range / 2) + int64_t(rng() % first_range)));
      pool.push_back(static_cast<uint64_t>(int64_t(rng() % second_range) - 7));
    }
    pool[0] = static_cast<uint64_t>(-int64_t(first_range / 2));  // the extremes of both columns occur
    pool[2] = static_cast<uint64_t>(-int64_t(first_range / 2) + int64_t(first_range) - 1);
    pool[1] = static_cast<uint64_t>(int64_t{-7});
    pool[3] = static_cast<uint64_t>(int64_t(second_range) - 8);
    std::vector<uint64_t> bits;
    for (int r = 0; r < 500; ++r) {
      const size_t p = rng() % 8;
      bits.insert(bits.end(), pool.begin() + 2 * p, pool.begin() + 2 * p + 2);
    }
    ASSERT_TRUE(check_rows(DType::kInt64, bits, 500, 2, RowRuns::kSorted,
                           "ranges " + std::to_string(first_range) + " x " + std::to_string(second_range)));
  }
}

// Rows of one element in their own order (the branch-free scan with block skips): long runs, short
// runs, runs ending at block edges.
TEST(UniqueRows, ConsecutiveSingleElementsAcrossBlocks) {
  std::mt19937_64 rng(19);
  for (DType d : {DType::kUInt8, DType::kInt32, DType::kInt64, DType::kFloat32, DType::kBFloat16}) {
    Generator g(d, rng);
    for (int64_t run : {1, 2, 15, 16, 17, 33, 1000}) {
      std::vector<uint64_t> bits;
      while (bits.size() < 5000) bits.insert(bits.end(), run + g.uniform(3), g.random_bits());
      ASSERT_TRUE(check_rows(d, bits, static_cast<int64_t>(bits.size()), 1, RowRuns::kConsecutive,
                             std::string(dtype_name(d)) + " runs of " + std::to_string(run)));
    }
  }
}

}  // namespace
}  // namespace kwker_test
