// kwker::select_ranks against a sort: the element of each requested rank in ascending order with
// NaN last, bit for bit, on rows torch's quantile would have Kwker serve (one zero sign; NaNs only
// above the requested ranks): lengths around the bucketed path's threshold, repeated and many ranks,
// heavy ties, narrow and wide key ranges, infinities, subnormals, several rows per call; every ISA.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kwker/cpu.h"
#include "kwker/quantile.h"

namespace {

template <typename Float>
std::vector<Float> make_row(std::mt19937_64& rng, int64_t n, int kind) {
  std::normal_distribution<double> normal;
  std::vector<Float> row(n);
  for (auto& v : row) {
    switch (kind) {
      case 0: v = static_cast<Float>(normal(rng)); break;                                        // spread
      case 1: v = static_cast<Float>(static_cast<int>(rng() % 5));                               // ties, +0.0
      case 2: v = static_cast<Float>(1 + (rng() % 1000) * std::numeric_limits<Float>::epsilon()); break;  // narrow
      case 3: v = static_cast<Float>(normal(rng) * 1e300); break;                                // huge / inf
      case 4: v = -static_cast<Float>(std::abs(normal(rng))) * std::numeric_limits<Float>::denorm_min() * 7; break;
      default: v = static_cast<Float>(normal(rng)); if (rng() % 4 == 0) v = std::numeric_limits<Float>::quiet_NaN();
    }
    if (kind == 1 && v == 0) v = 0;
  }
  if (kind == 4) {
    for (auto& v : row) {
      if (v == 0) v = -Float(0);  // one zero sign: -0.0
    }
  }
  return row;
}

template <typename Float>
void check_all(kwker::DType dtype) {
  std::mt19937_64 rng(41);
  for (int64_t n : {1, 2, 5, 100, 255, 256, 257, 1000, 5000, 70000}) {
    for (int kind = 0; kind < 6; ++kind) {
      for (int64_t per_row : {1, 3, 6, 40}) {
        const int64_t rows = n > 5000 ? 1 : 3;
        std::vector<Float> data;
        std::vector<int64_t> ranks;
        std::vector<Float> want;
        for (int64_t r = 0; r < rows; ++r) {
          auto row = make_row<Float>(rng, n, kind);
          if (std::isnan(row[0])) row[0] = 1;  // no all-NaN rows: the adapter never asks for them
          auto sorted = row;
          std::sort(sorted.begin(), sorted.end(), [](Float a, Float b) { return a < b || (std::isnan(b) && !std::isnan(a)); });
          const int64_t numbers = std::count_if(row.begin(), row.end(), [](Float v) { return !std::isnan(v); });
          for (int64_t j = 0; j < per_row; ++j) {
            const int64_t rank = j == 0 || numbers == 0 ? 0 : static_cast<int64_t>(rng() % std::max<int64_t>(numbers, 1));
            ranks.push_back(j == 1 ? ranks.back() : rank);  // a repeated rank too
            want.push_back(sorted[ranks.back()]);
          }
          data.insert(data.end(), row.begin(), row.end());
        }
        std::vector<Float> out(ranks.size());
        kwker::RankSelectProblem p{dtype, data.data(), rows, n, ranks.data(), per_row, out.data()};
        kwker::select_ranks(p);
        for (size_t j = 0; j < out.size(); ++j) {
          ASSERT_EQ(std::memcmp(&out[j], &want[j], sizeof(Float)), 0)
              << "n=" << n << " kind=" << kind << " ranks/row=" << per_row << " #" << j << ": " << out[j] << " vs "
              << want[j];
        }
      }
    }
  }
}

// Every ISA the CPU supports (the element-wise passes are per ISA).
template <typename Float>
void check_every_isa(kwker::DType dtype) {
  const kwker::Isa saved = kwker::active_isa();
  for (int isa = 0; isa <= static_cast<int>(kwker::detected_isa()); ++isa) {
    SCOPED_TRACE(std::string(kwker::isa_name(static_cast<kwker::Isa>(isa))));
    kwker::set_isa_cap(static_cast<kwker::Isa>(isa));
    check_all<Float>(dtype);
  }
  kwker::set_isa_cap(saved);
}

TEST(SelectRanks, Float32) { check_every_isa<float>(kwker::DType::kFloat32); }
TEST(SelectRanks, Float64) { check_every_isa<double>(kwker::DType::kFloat64); }

}  // namespace
