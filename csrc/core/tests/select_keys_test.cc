// White-box tests of the bare-key selection (sort/select_keys-inl.h), compiled here for the scalar
// ISA: select_key and its worst-case fallback rank_by_radix against std::sort, for uint32 and uint64
// keys with ties, runs of equal top bytes, the extreme keys and falling keys, at small and middle
// ranks. (The public kernels reach the fallback only on inputs whose median-of-three pivots keep
// failing.)
#define KWKER_ISA_SCALAR 1

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "sort/sort_keys.h"
#include "sort/sort_row.h"

namespace kwker::sort_detail::keys_test {
#include "sort/sort_row-inl.h"
#include "sort/select_keys-inl.h"
}  // namespace kwker::sort_detail::keys_test

namespace kwker_test {
namespace {

namespace kt = kwker::sort_detail::keys_test;

enum class Keys { kRandom, kFewDistinct, kSharedTopBytes, kExtremes, kFalling };

template <typename K>
std::vector<K> make_keys(Keys kind, int64_t n, std::mt19937_64& rng) {
  std::vector<K> keys(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    K& k = keys[static_cast<size_t>(i)];
    const uint64_t x = rng();
    switch (kind) {
      case Keys::kRandom: k = static_cast<K>(x); break;
      case Keys::kFewDistinct: k = static_cast<K>(x % 5) * static_cast<K>(0x0101010101010101ull); break;
      case Keys::kSharedTopBytes: k = static_cast<K>(~K{0} - (x % 300)); break;
      case Keys::kExtremes: k = x % 2 == 0 ? K{0} : static_cast<K>(~K{0}); break;
      case Keys::kFalling: k = static_cast<K>(~K{0} - static_cast<K>(i) - x % 3); break;
    }
  }
  return keys;
}

template <typename K, typename Select>
void check_ranks(const char* what, const Select& select) {
  std::mt19937_64 rng(0x5E1EC7);
  for (Keys kind : {Keys::kRandom, Keys::kFewDistinct, Keys::kSharedTopBytes, Keys::kExtremes, Keys::kFalling}) {
    for (int64_t n : {1, 2, 16, 17, 100, 1000, 4099}) {
      const std::vector<K> keys = make_keys<K>(kind, n, rng);
      std::vector<K> sorted = keys;
      std::sort(sorted.begin(), sorted.end());
      // Small ranks too: topk's sample thresholds and boundaries.
      for (int64_t r : {int64_t{0}, std::min<int64_t>(3, n - 1), std::min<int64_t>(15, n - 1), n / 3, n / 2, n - 1}) {
        const kt::KeyRank<K> got = select(keys, r);
        const K want = sorted[static_cast<size_t>(r)];
        const auto less = std::lower_bound(sorted.begin(), sorted.end(), want) - sorted.begin();
        const auto equal = std::upper_bound(sorted.begin(), sorted.end(), want) - sorted.begin() - less;
        const std::string at = std::string(what) + " keys of " + std::to_string(sizeof(K)) + " bytes, kind " +
                               std::to_string(static_cast<int>(kind)) + " n=" + std::to_string(n) +
                               " r=" + std::to_string(r);
        EXPECT_EQ(got.key, want) << at;
        EXPECT_EQ(got.less, less) << at;
        EXPECT_EQ(got.equal, equal) << at;
      }
    }
  }
}

template <typename K>
void check_select_key() {
  check_ranks<K>("select_key", [](const std::vector<K>& keys, int64_t r) {
    const auto n = static_cast<int64_t>(keys.size());
    std::vector<K> scratch(static_cast<size_t>(2 * n + 2 * kt::kPartitionGap));
    std::vector<K> input = keys;
    const kt::KeyRank<K> got = kt::select_key(input.data(), n, r, scratch.data());
    EXPECT_TRUE(input == keys) << "select_key changed its input";
    return got;
  });
}

template <typename K>
void check_rank_by_radix() {
  check_ranks<K>("rank_by_radix", [](const std::vector<K>& keys, int64_t r) {
    std::vector<K> work(keys.size());
    return kt::rank_by_radix(keys.data(), static_cast<int64_t>(keys.size()), r, work.data());
  });
}

TEST(SelectKeys, SelectKey32) { check_select_key<uint32_t>(); }
TEST(SelectKeys, SelectKey64) { check_select_key<uint64_t>(); }
TEST(SelectKeys, RankByRadix32) { check_rank_by_radix<uint32_t>(); }
TEST(SelectKeys, RankByRadix64) { check_rank_by_radix<uint64_t>(); }

}  // namespace
}  // namespace kwker_test
