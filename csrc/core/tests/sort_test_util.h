// Shared helpers for the kwker::sort_rows tests: dtype bit helpers, the independent oracle (libstdc++'s
// std::sort / std::stable_sort on (value, index) pairs with torch's comparator), input distributions,
// guarded (red-zone) buffers, strided layouts and the run-and-compare harness that loops over every ISA
// the CPU supports.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "kwker/cpu.h"
#include "kwker/dtype.h"
#include "kwker/sort.h"

namespace kwker_test {

using kwker::DType;
using kwker::Isa;
using kwker::SortOrder;
using kwker::TieOrder;

// ---- ISAs ---------------------------------------------------------------------------------------

inline std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (int i = 0; i <= static_cast<int>(kwker::detected_isa()); ++i) out.push_back(static_cast<Isa>(i));
  return out;
}

// Restores the ISA that was active on construction.
class IsaCapGuard {
 public:
  IsaCapGuard() : saved_(kwker::active_isa()) {}
  ~IsaCapGuard() { kwker::set_isa_cap(saved_); }
  IsaCapGuard(const IsaCapGuard&) = delete;
  IsaCapGuard& operator=(const IsaCapGuard&) = delete;

 private:
  Isa saved_;
};

// Calls f(isa) once per supported ISA with the cap set to it (and a SCOPED_TRACE naming it).
template <typename F>
void for_each_isa(const F& f) {
  for (Isa isa : supported_isas()) {
    IsaCapGuard guard;
    SCOPED_TRACE(std::string("isa=") + std::string(kwker::isa_name(isa)));
    ASSERT_EQ(kwker::set_isa_cap(isa), isa);
    ASSERT_EQ(kwker::active_isa(), isa);
    f(isa);
  }
}

// ---- dtypes -------------------------------------------------------------------------------------

inline constexpr DType kAllDTypes[] = {
    DType::kBool,    DType::kUInt8,    DType::kInt8,    DType::kInt16,   DType::kInt32,
    DType::kInt64,   DType::kFloat16,  DType::kBFloat16, DType::kFloat32, DType::kFloat64,
};

inline const char* dtype_name(DType d) {
  switch (d) {
    case DType::kBool: return "Bool";
    case DType::kUInt8: return "UInt8";
    case DType::kInt8: return "Int8";
    case DType::kInt16: return "Int16";
    case DType::kInt32: return "Int32";
    case DType::kInt64: return "Int64";
    case DType::kFloat16: return "Float16";
    case DType::kBFloat16: return "BFloat16";
    case DType::kFloat32: return "Float32";
    case DType::kFloat64: return "Float64";
  }
  return "?";
}

inline const char* order_name(SortOrder o) { return o == SortOrder::kAscending ? "Ascending" : "Descending"; }
inline const char* ties_name(TieOrder t) { return t == TieOrder::kStable ? "Stable" : "Introsort"; }

inline int dtype_bits(DType d) { return static_cast<int>(kwker::dtype_size(d)) * 8; }
inline uint64_t dtype_mask(DType d) {
  const int b = dtype_bits(d);
  return b == 64 ? ~uint64_t{0} : (uint64_t{1} << b) - 1;
}
inline bool is_signed_int(DType d) {
  return d == DType::kInt8 || d == DType::kInt16 || d == DType::kInt32 || d == DType::kInt64;
}
inline bool is_integer(DType d) { return !kwker::is_floating(d); }  // bool included

// Bit layout of a floating dtype.
struct FloatFormat {
  int bits;
  int mantissa_bits;
  uint64_t sign() const { return uint64_t{1} << (bits - 1); }
  uint64_t mantissa_mask() const { return (uint64_t{1} << mantissa_bits) - 1; }
  uint64_t inf() const { return sign() - (uint64_t{1} << mantissa_bits); }  // exponent all ones
  uint64_t max_finite() const { return inf() - 1; }
  uint64_t min_normal() const { return uint64_t{1} << mantissa_bits; }
  uint64_t quiet_nan() const { return inf() | (uint64_t{1} << (mantissa_bits - 1)); }
  bool is_nan(uint64_t b) const { return (b & ~sign()) > inf(); }
};

inline FloatFormat float_format(DType d) {
  switch (d) {
    case DType::kFloat16: return {16, 10};
    case DType::kBFloat16: return {16, 7};
    case DType::kFloat32: return {32, 23};
    case DType::kFloat64: return {64, 52};
    default: break;
  }
  return {0, 0};
}

// IEEE binary16 bits -> float (exact; NaN stays NaN, sign kept).
inline float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exponent = (h >> 10) & 0x1F;
  const uint32_t mantissa = h & 0x3FF;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: mantissa * 2^-24, exactly representable as a float
      const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
      std::memcpy(&bits, &magnitude, 4);
      bits |= sign;
    }
  } else if (exponent == 31) {
    bits = sign | 0x7F800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline float bfloat16_to_float(uint16_t b) {
  const uint32_t bits = uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline float bits_to_float(uint64_t b) {
  const uint32_t u = static_cast<uint32_t>(b);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline double bits_to_double(uint64_t b) {
  double f;
  std::memcpy(&f, &b, 8);
  return f;
}

// Element i of a dtype array, as zero-extended bits, and back.
inline void store_element(DType d, void* base, int64_t i, uint64_t bits) {
  std::memcpy(static_cast<char*>(base) + i * static_cast<int64_t>(kwker::dtype_size(d)), &bits,
              kwker::dtype_size(d));
}
inline uint64_t load_element(DType d, const void* base, int64_t i) {
  uint64_t bits = 0;
  std::memcpy(&bits, static_cast<const char*>(base) + i * static_cast<int64_t>(kwker::dtype_size(d)),
              kwker::dtype_size(d));
  return bits;
}

// ---- oracle -------------------------------------------------------------------------------------

template <typename C>
bool oracle_isnan(C x) {
  if constexpr (std::is_floating_point_v<C>) {
    return std::isnan(x);
  } else {
    return false;
  }
}

// Permutation torch gives: std::stable_sort (kStable) or libstdc++ std::sort (kIntrosort) of
// (value, index) pairs with torch's comparator. Only comparator outcomes decide the permutation.
template <typename C, typename Convert>
std::vector<int64_t> oracle_typed(const std::vector<uint64_t>& bits, const Convert& convert,
                                  SortOrder order, TieOrder ties) {
  struct Pair {
    C value;
    int64_t index;
  };
  std::vector<Pair> pairs(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) pairs[i] = {convert(bits[i]), static_cast<int64_t>(i)};
  auto ascending = [](const Pair& l, const Pair& r) {
    return (!oracle_isnan(l.value) && oracle_isnan(r.value)) || l.value < r.value;
  };
  auto descending = [](const Pair& l, const Pair& r) {
    return (oracle_isnan(l.value) && !oracle_isnan(r.value)) || l.value > r.value;
  };
  if (ties == TieOrder::kStable) {
    if (order == SortOrder::kAscending) std::stable_sort(pairs.begin(), pairs.end(), ascending);
    else std::stable_sort(pairs.begin(), pairs.end(), descending);
  } else {
    if (order == SortOrder::kAscending) std::sort(pairs.begin(), pairs.end(), ascending);
    else std::sort(pairs.begin(), pairs.end(), descending);
  }
  std::vector<int64_t> perm(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) perm[i] = pairs[i].index;
  return perm;
}

// `bits` holds each element's bits, zero-extended.
inline std::vector<int64_t> oracle_permutation(DType d, const std::vector<uint64_t>& bits,
                                               SortOrder order, TieOrder ties) {
  switch (d) {
    case DType::kBool:
      return oracle_typed<bool>(bits, [](uint64_t b) { return b != 0; }, order, ties);
    case DType::kUInt8:
      return oracle_typed<uint8_t>(bits, [](uint64_t b) { return static_cast<uint8_t>(b); }, order, ties);
    case DType::kInt8:
      return oracle_typed<int8_t>(bits, [](uint64_t b) { return static_cast<int8_t>(b); }, order, ties);
    case DType::kInt16:
      return oracle_typed<int16_t>(bits, [](uint64_t b) { return static_cast<int16_t>(b); }, order, ties);
    case DType::kInt32:
      return oracle_typed<int32_t>(bits, [](uint64_t b) { return static_cast<int32_t>(b); }, order, ties);
    case DType::kInt64:
      return oracle_typed<int64_t>(bits, [](uint64_t b) { return static_cast<int64_t>(b); }, order, ties);
    case DType::kFloat16:
      return oracle_typed<float>(bits, [](uint64_t b) { return half_to_float(static_cast<uint16_t>(b)); },
                                 order, ties);
    case DType::kBFloat16:
      return oracle_typed<float>(
          bits, [](uint64_t b) { return bfloat16_to_float(static_cast<uint16_t>(b)); }, order, ties);
    case DType::kFloat32:
      return oracle_typed<float>(bits, [](uint64_t b) { return bits_to_float(b); }, order, ties);
    case DType::kFloat64:
      return oracle_typed<double>(bits, [](uint64_t b) { return bits_to_double(b); }, order, ties);
  }
  return {};
}

// ---- distributions ------------------------------------------------------------------------------

enum class Dist {
  kRandom,         // uniformly random bits (floats: includes NaN / inf / subnormals)
  kRandomFinite,   // floats: random bits, no NaN / inf
  kPermutation,    // a shuffled strictly increasing sequence: distinct keys where the dtype allows
  kSorted,         // random values, sorted ascending
  kReversed,       // random values, sorted descending
  kAllEqual,
  kFewDistinct,    // 2..5 distinct values: ties heavy
  kSparseTies,     // random values, about 1 in 64 of them a copy of another: a few ties among distinct keys
  kSortedTies,     // kSparseTies sorted ascending: the key order (or its reverse) is the input's
  kSawtooth,       // i % 17
  kOrganPipe,      // min(i, n - 1 - i)
  kKiller,         // McIlroy's adversary against libstdc++ std::sort: distinct keys
  kKillerTies,     // the adversary's ranks halved: pairs of ties, still drives introsort to heapsort
  kNaNMixed,       // floats: ~15% NaNs of several payloads (both signs, quiet and signalling)
  kNaNHeavy,       // floats: ~60% NaNs
  kInfMixed,       // floats: +-inf, +-max finite, a few NaNs
  kSignedZeros,    // floats: mostly -0.0 / +0.0
  kDenormals,      // floats: mostly subnormals, +-0, +-min normal
  kNearZero,       // floats: tiny magnitudes of both signs (64-bit: key span < 2^32 around zero)
  kExtremes,       // integers: min, min + 1, -1, 0, 1, max - 1, max mixed with random
  kWideTies,       // int64 / float64: a small pool of values spanning >= 2^32: wide path, ties
  kRebase,         // int64 / float64: span < 2^31 at a large offset: rebased path
  kRebaseTies,     // same with heavy ties
  kSpanMaxRebase,  // int64 / float64: key span exactly 2^32 - 1 (largest rebased span)
  kSpanMinWide,    // int64 / float64: key span exactly 2^32 (smallest wide span)
};

inline const char* dist_name(Dist d) {
  switch (d) {
    case Dist::kRandom: return "random";
    case Dist::kRandomFinite: return "random_finite";
    case Dist::kPermutation: return "permutation";
    case Dist::kSorted: return "sorted";
    case Dist::kReversed: return "reversed";
    case Dist::kAllEqual: return "all_equal";
    case Dist::kFewDistinct: return "few_distinct";
    case Dist::kSparseTies: return "sparse_ties";
    case Dist::kSortedTies: return "sorted_ties";
    case Dist::kSawtooth: return "sawtooth";
    case Dist::kOrganPipe: return "organ_pipe";
    case Dist::kKiller: return "median3_killer";
    case Dist::kKillerTies: return "median3_killer_ties";
    case Dist::kNaNMixed: return "nan_mixed";
    case Dist::kNaNHeavy: return "nan_heavy";
    case Dist::kInfMixed: return "inf_mixed";
    case Dist::kSignedZeros: return "signed_zeros";
    case Dist::kDenormals: return "denormals";
    case Dist::kNearZero: return "near_zero";
    case Dist::kExtremes: return "int_extremes";
    case Dist::kWideTies: return "wide_ties";
    case Dist::kRebase: return "rebase";
    case Dist::kRebaseTies: return "rebase_ties";
    case Dist::kSpanMaxRebase: return "span_2^32-1";
    case Dist::kSpanMinWide: return "span_2^32";
  }
  return "?";
}

inline std::vector<Dist> dists_for(DType d) {
  std::vector<Dist> out = {Dist::kRandom,   Dist::kPermutation, Dist::kSorted,    Dist::kReversed,
                           Dist::kAllEqual, Dist::kFewDistinct, Dist::kSparseTies, Dist::kSortedTies,
                           Dist::kSawtooth, Dist::kOrganPipe, Dist::kKiller,   Dist::kKillerTies};
  if (kwker::is_floating(d)) {
    for (Dist x : {Dist::kRandomFinite, Dist::kNaNMixed, Dist::kNaNHeavy, Dist::kInfMixed,
                   Dist::kSignedZeros, Dist::kDenormals, Dist::kNearZero}) {
      out.push_back(x);
    }
  } else if (d != DType::kBool) {
    out.push_back(Dist::kExtremes);
  }
  if (d == DType::kInt64 || d == DType::kFloat64) {
    for (Dist x : {Dist::kWideTies, Dist::kRebase, Dist::kRebaseTies, Dist::kSpanMaxRebase,
                   Dist::kSpanMinWide}) {
      out.push_back(x);
    }
  }
  return out;
}

// McIlroy, "A killer adversary for quicksort" (1999), run against this libstdc++'s std::sort: returns
// ranks 0..n-1 that make std::sort's quicksort partitions degenerate, so its depth limit runs out and
// the heapsort fallback runs. Memoised per n.
inline const std::vector<int64_t>& antiqsort_ranks(int64_t n) {
  static std::map<int64_t, std::vector<int64_t>> cache;
  auto it = cache.find(n);
  if (it != cache.end()) return it->second;
  std::vector<int64_t> val(n, n);
  const int64_t gas = n;
  int64_t solid = 0, candidate = -1;
  std::vector<int64_t> ptr(n);
  std::iota(ptr.begin(), ptr.end(), 0);
  std::sort(ptr.begin(), ptr.end(), [&](int64_t x, int64_t y) {
    if (val[x] == gas && val[y] == gas) val[x == candidate ? x : y] = solid++;
    if (val[x] == gas) candidate = x;
    else if (val[y] == gas) candidate = y;
    return val[x] < val[y];
  });
  for (int64_t& v : val) {
    if (v == gas) v = solid++;
  }
  return cache.emplace(n, std::move(val)).first->second;
}

// A step-for-step model of libstdc++'s __introsort_loop that reports whether the depth limit ran out
// on a subrange longer than 16 (i.e. whether std::sort falls back to heapsort). Test-coverage probe
// only: it proves the killer inputs do reach the fallback; it is not used as an oracle.
inline bool introsort_depth_runs_out(std::vector<int64_t> a) {
  const int64_t n = static_cast<int64_t>(a.size());
  if (n < 2) return false;
  bool ran_out = false;
  auto loop = [&](auto&& self, int64_t* first, int64_t* last, int depth) -> void {
    while (last - first > 16) {
      if (depth == 0) {
        ran_out = true;
        return;
      }
      --depth;
      int64_t* a1 = first + 1;
      int64_t* b = first + (last - first) / 2;
      int64_t* c = last - 1;
      if (*a1 < *b) {
        if (*b < *c) std::swap(*first, *b);
        else if (*a1 < *c) std::swap(*first, *c);
        else std::swap(*first, *a1);
      } else if (*a1 < *c) {
        std::swap(*first, *a1);
      } else if (*b < *c) {
        std::swap(*first, *c);
      } else {
        std::swap(*first, *b);
      }
      int64_t* lo = first + 1;
      int64_t* hi = last;
      const int64_t pivot = *first;
      while (true) {
        while (*lo < pivot) ++lo;
        --hi;
        while (pivot < *hi) --hi;
        if (!(lo < hi)) break;
        std::swap(*lo, *hi);
        ++lo;
      }
      self(self, lo, last, depth);
      last = lo;
    }
  };
  loop(loop, a.data(), a.data() + n, 2 * (63 - __builtin_clzll(static_cast<unsigned long long>(n))));
  return ran_out;
}

inline std::vector<int64_t> killer_ranks(int64_t n, bool ties, int64_t* rank_count) {
  std::vector<int64_t> r = antiqsort_ranks(n);
  if (ties) {
    for (int64_t& v : r) v /= 2;
    *rank_count = (n + 1) / 2;
  } else {
    *rank_count = n;
  }
  return r;
}

// Monotone map rank (0 <= r < count) -> element bits of dtype d: non-decreasing in r, and strictly
// increasing when `count` fits the dtype (it is quantised otherwise).
inline uint64_t value_of_rank(DType d, int64_t r, int64_t count) {
  auto quantise = [&](int64_t capacity, int64_t* used) {
    *used = std::min(count, capacity);
    return count <= capacity ? r : static_cast<int64_t>((static_cast<__int128>(r) * capacity) / count);
  };
  int64_t used = 0;
  switch (d) {
    case DType::kBool: return static_cast<uint64_t>(quantise(2, &used));
    case DType::kUInt8: return static_cast<uint64_t>(quantise(256, &used));
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64: {
      const int64_t capacity = d == DType::kInt8 ? 256 : d == DType::kInt16 ? 65536 : (int64_t{1} << 40);
      const int64_t q = quantise(capacity, &used);
      return static_cast<uint64_t>(q - used / 2) & dtype_mask(d);
    }
    case DType::kFloat16:
    case DType::kBFloat16: {
      const FloatFormat f = float_format(d);
      const int64_t max_magnitude = static_cast<int64_t>(f.max_finite());
      const int64_t q = quantise(2 * max_magnitude + 1, &used);
      const int64_t s = q - used / 2;
      return s >= 0 ? static_cast<uint64_t>(s) : (f.sign() | static_cast<uint64_t>(-s));
    }
    case DType::kFloat32: {
      const int64_t q = quantise(int64_t{1} << 24, &used);
      const float v = static_cast<float>(q - used / 2);
      uint32_t b;
      std::memcpy(&b, &v, 4);
      return b;
    }
    case DType::kFloat64: {
      const int64_t q = quantise(int64_t{1} << 52, &used);
      const double v = static_cast<double>(q - used / 2);
      uint64_t b;
      std::memcpy(&b, &v, 8);
      return b;
    }
  }
  return 0;
}

class Generator {
 public:
  Generator(DType d, std::mt19937_64& rng) : d_(d), rng_(rng), f_(float_format(d)) {}

  uint64_t random_bits() {
    if (d_ == DType::kBool) return rng_() & 1;
    return rng_() & dtype_mask(d_);
  }
  uint64_t random_finite() {
    if (!kwker::is_floating(d_)) return random_bits();
    while (true) {
      const uint64_t b = rng_() & dtype_mask(d_);
      if ((b & ~f_.sign()) < f_.inf()) return b;
    }
  }
  uint64_t uniform(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  uint64_t random_nan() {
    const uint64_t s = f_.sign();
    const uint64_t payloads[] = {
        f_.quiet_nan(),                        // canonical quiet NaN
        s | f_.quiet_nan(),                    // negative quiet NaN
        f_.inf() | 1,                          // signalling NaN, payload 1
        s | f_.inf() | 1,                      // negative signalling NaN
        f_.inf() | f_.mantissa_mask(),         // all-ones payload
        s | f_.inf() | f_.mantissa_mask(),     // all ones
        f_.inf() | (random_bits() & f_.mantissa_mask()) | 1,  // random payload
    };
    return payloads[uniform(std::size(payloads))];
  }

  // Reorders `v` into the dtype's ascending (stable) order.
  void sort_ascending(std::vector<uint64_t>& v) const {
    const auto perm = oracle_permutation(d_, v, SortOrder::kAscending, TieOrder::kStable);
    const std::vector<uint64_t> unsorted = v;
    for (size_t i = 0; i < v.size(); ++i) v[i] = unsorted[perm[i]];
  }

  std::vector<uint64_t> generate(Dist dist, int64_t n, SortOrder order) {
    std::vector<uint64_t> v(static_cast<size_t>(n));
    const uint64_t sign = kwker::is_floating(d_) ? f_.sign() : 0;
    switch (dist) {
      case Dist::kRandom:
        for (auto& x : v) x = random_bits();
        break;
      case Dist::kRandomFinite:
        for (auto& x : v) x = random_finite();
        break;
      case Dist::kPermutation: {
        std::vector<int64_t> ranks(v.size());
        std::iota(ranks.begin(), ranks.end(), 0);
        std::shuffle(ranks.begin(), ranks.end(), rng_);
        for (int64_t i = 0; i < n; ++i) v[i] = value_of_rank(d_, ranks[i], n);
        break;
      }
      case Dist::kSorted:
      case Dist::kReversed:
        for (auto& x : v) x = random_bits();
        sort_ascending(v);
        if (dist == Dist::kReversed) std::reverse(v.begin(), v.end());
        break;
      case Dist::kAllEqual: {
        const uint64_t x = random_bits();
        std::fill(v.begin(), v.end(), x);
        break;
      }
      case Dist::kFewDistinct: {
        std::vector<uint64_t> pool(2 + uniform(4));
        for (auto& x : pool) x = random_bits();
        for (auto& x : v) x = pool[uniform(pool.size())];
        break;
      }
      case Dist::kSparseTies:
      case Dist::kSortedTies: {
        for (auto& x : v) x = kwker::is_floating(d_) ? random_finite() : random_bits();
        for (int64_t i = 0; n > 1 && i < n / 64 + 1; ++i) v[uniform(n)] = v[uniform(n)];
        if (dist == Dist::kSortedTies) sort_ascending(v);
        break;
      }
      case Dist::kSawtooth:
        for (int64_t i = 0; i < n; ++i) v[i] = value_of_rank(d_, i % 17, 17);
        break;
      case Dist::kOrganPipe:
        for (int64_t i = 0; i < n; ++i) v[i] = value_of_rank(d_, std::min(i, n - 1 - i), n / 2 + 1);
        break;
      case Dist::kKiller:
      case Dist::kKillerTies: {
        int64_t count = 0;
        const auto ranks = killer_ranks(n, dist == Dist::kKillerTies, &count);
        // The adversary targets the ascending comparator; mirror the ranks for descending.
        for (int64_t i = 0; i < n; ++i) {
          const int64_t r = order == SortOrder::kAscending ? ranks[i] : count - 1 - ranks[i];
          v[i] = value_of_rank(d_, r, count);
        }
        break;
      }
      case Dist::kNaNMixed:
        for (auto& x : v) x = chance(0.15) ? random_nan() : random_finite();
        break;
      case Dist::kNaNHeavy:
        for (auto& x : v) {
          x = chance(0.6) ? random_nan() : chance(0.3) ? (rng_() & 1 ? sign : 0) : random_finite();
        }
        break;
      case Dist::kInfMixed:
        for (auto& x : v) {
          const uint64_t k = uniform(100);
          x = k < 20   ? f_.inf()
              : k < 40 ? sign | f_.inf()
              : k < 45 ? ((rng_() & 1) ? sign : 0) | f_.max_finite()
              : k < 47 ? random_nan()
                       : random_finite();
        }
        break;
      case Dist::kSignedZeros:
        for (auto& x : v) {
          const uint64_t k = uniform(100);
          x = k < 40 ? sign : k < 80 ? 0 : k < 90 ? ((rng_() & 1) ? sign : 0) | 1 : random_finite();
        }
        break;
      case Dist::kDenormals:
        for (auto& x : v) {
          const uint64_t s = (rng_() & 1) ? sign : 0;
          const uint64_t k = uniform(100);
          x = k < 70   ? s | (1 + uniform(f_.mantissa_mask()))  // subnormal
              : k < 80 ? s
              : k < 90 ? s | f_.min_normal()
                       : s | f_.mantissa_mask();  // largest subnormal
        }
        break;
      case Dist::kNearZero: {
        const uint64_t range = uint64_t{1} << std::min(f_.mantissa_bits, 20);
        for (auto& x : v) x = ((rng_() & 1) ? sign : 0) | uniform(range);
        break;
      }
      case Dist::kExtremes: {
        const uint64_t m = dtype_mask(d_);
        std::vector<uint64_t> pool;
        if (is_signed_int(d_)) {
          const uint64_t min = (m >> 1) + 1, max = m >> 1;
          pool = {min, min + 1, m /* -1 */, 0, 1, max - 1, max};
        } else {
          pool = {0, 1, m - 1, m};
        }
        for (auto& x : v) x = chance(0.5) ? pool[uniform(pool.size())] : random_bits();
        break;
      }
      case Dist::kWideTies: {
        std::vector<uint64_t> pool(static_cast<size_t>(std::max<int64_t>(2, n / 8)));
        for (auto& x : pool) x = d_ == DType::kFloat64 ? random_finite() : random_bits();
        if (pool.size() >= 2) {  // make sure the span is wide
          pool[0] = d_ == DType::kFloat64 ? 0xC000000000000000ull : 0x8000000000000123ull;
          pool[1] = d_ == DType::kFloat64 ? 0x4000000000000000ull : 0x7000000000000000ull;
        }
        for (auto& x : v) x = pool[uniform(pool.size())];
        if (d_ == DType::kFloat64 && n > 4) v[uniform(n)] = random_nan();
        break;
      }
      case Dist::kRebase:
      case Dist::kRebaseTies:
      case Dist::kSpanMaxRebase:
      case Dist::kSpanMinWide: {
        // Keys of a 64-bit type are rebased when their span is < 2^32. int64: a large positive or
        // negative offset. float64: doubles of one sign whose bits share the high half.
        const bool negative = rng_() & 1;
        uint64_t base;
        if (d_ == DType::kFloat64) {
          base = 0x4123456700000000ull + (rng_() & 0xFFFFFFFull);
        } else {
          base = negative ? 0xA000000000000000ull + (rng_() >> 8) : 0x6000000000000000ull + (rng_() >> 8);
        }
        uint64_t span = 0;
        if (dist == Dist::kRebase) span = uint64_t{1} << 31;
        else if (dist == Dist::kRebaseTies) span = static_cast<uint64_t>(n / 4 + 1) * 4099;
        else if (dist == Dist::kSpanMaxRebase) span = (uint64_t{1} << 32) - 1;
        else span = uint64_t{1} << 32;
        for (auto& x : v) {
          if (dist == Dist::kRebaseTies) x = base + uniform(n / 4 + 1) * 4099;
          else if (dist == Dist::kRebase) x = base + uniform(span);
          else x = base + (chance(0.3) ? (rng_() & 1 ? span : 0) : uniform(span + 1));
        }
        if ((dist == Dist::kSpanMaxRebase || dist == Dist::kSpanMinWide) && n >= 2) {
          const uint64_t lo_at = uniform(n);
          const uint64_t hi_at = (lo_at + 1 + uniform(n - 1)) % n;  // a different position
          v[lo_at] = base;
          v[hi_at] = base + span;
        }
        if (d_ == DType::kFloat64 && negative) {
          for (auto& x : v) x |= sign;
        }
        break;
      }
    }
    return v;
  }

 private:
  DType d_;
  std::mt19937_64& rng_;
  FloatFormat f_;
};

// ---- guarded buffers and layouts ----------------------------------------------------------------

inline constexpr size_t kGuardBytes = 256;
inline constexpr size_t kAlignment = 64;

// [guard][offset elements][extent elements][guard], the allocation 64-byte aligned, every byte filled
// with a position-dependent canary.
class GuardedBuffer {
 public:
  GuardedBuffer(size_t element_size, int64_t offset_elements, int64_t extent_elements, uint8_t salt)
      : element_size_(element_size),
        data_offset_(kGuardBytes + static_cast<size_t>(offset_elements) * element_size),
        bytes_(data_offset_ + static_cast<size_t>(extent_elements) * element_size + kGuardBytes) {
    const size_t rounded = (bytes_ + kAlignment - 1) / kAlignment * kAlignment;
    storage_.reset(static_cast<uint8_t*>(std::aligned_alloc(kAlignment, rounded)));
    for (size_t i = 0; i < bytes_; ++i) {
      storage_.get()[i] = static_cast<uint8_t>(0xA5 ^ salt ^ (i * 0x3B) ^ (i >> 7));
    }
  }
  uint8_t* bytes() { return storage_.get(); }
  const uint8_t* bytes() const { return storage_.get(); }
  size_t size() const { return bytes_; }
  void* data() { return storage_.get() + data_offset_; }
  uint8_t* element(int64_t offset) { return storage_.get() + data_offset_ + offset * element_size_; }
  size_t data_offset() const { return data_offset_; }
  size_t element_size() const { return element_size_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  size_t element_size_;
  size_t data_offset_;
  size_t bytes_;
  std::unique_ptr<uint8_t, Free> storage_;
};

struct TensorLayout {
  int64_t row_stride = 1;
  std::vector<int64_t> outer_strides;  // one per outer dim
  int64_t offset = 1;                  // elements between the aligned allocation and element 0
};

struct Layout {
  std::string name;
  std::vector<int64_t> outer_sizes;
  TensorLayout input, values, indices;
};

inline int64_t row_count(const std::vector<int64_t>& outer_sizes) {
  int64_t rows = 1;
  for (int64_t s : outer_sizes) rows *= s;
  return rows;
}

// Offset of element 0 of row r (row-major unravel over outer_sizes).
inline int64_t row_offset(int64_t r, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  int64_t offset = 0;
  for (size_t d = sizes.size(); d-- > 0;) {
    offset += (r % sizes[d]) * strides[d];
    r /= sizes[d];
  }
  return offset;
}

inline int64_t extent_of(const TensorLayout& t, const std::vector<int64_t>& sizes, int64_t n) {
  if (row_count(sizes) == 0 || n == 0) return 0;
  int64_t last = (n - 1) * t.row_stride;
  for (size_t d = 0; d < sizes.size(); ++d) last += (sizes[d] - 1) * t.outer_strides[d];
  return last + 1;
}

// A single contiguous row, every buffer starting one element past a 64-byte boundary.
inline Layout single_row_layout(int64_t offset = 1) {
  Layout l;
  l.name = "single_row";
  l.input.offset = l.values.offset = l.indices.offset = offset;
  return l;
}

// ---- the harness --------------------------------------------------------------------------------

inline std::string hex(uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

// Generates one row of data per logical row with `make_row(row_index)`, writes them into a guarded
// strided input buffer, reads the rows back (so broadcast strides are handled), computes the oracle,
// then for every ISA sorts into fresh guarded output buffers and compares everything bit for bit.
// Returns false (after one ADD_FAILURE with the first difference) on mismatch.
template <typename MakeRow>
bool check_sort(DType d, SortOrder order, TieOrder ties, int64_t n, const Layout& layout,
                const MakeRow& make_row, const std::string& what) {
  SCOPED_TRACE(what);
  const size_t es = kwker::dtype_size(d);
  const int64_t rows = row_count(layout.outer_sizes);
  const auto& sizes = layout.outer_sizes;

  // Input.
  GuardedBuffer input(es, layout.input.offset, extent_of(layout.input, sizes, n), 0x11);
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<uint64_t> row = make_row(r);
    const int64_t base = row_offset(r, sizes, layout.input.outer_strides);
    for (int64_t i = 0; i < n; ++i) std::memcpy(input.element(base + i * layout.input.row_stride), &row[i], es);
  }
  std::vector<std::vector<uint64_t>> row_bits(static_cast<size_t>(rows));
  std::vector<std::vector<int64_t>> perms(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = row_offset(r, sizes, layout.input.outer_strides);
    row_bits[r].assign(static_cast<size_t>(n), 0);
    for (int64_t i = 0; i < n; ++i) std::memcpy(&row_bits[r][i], input.element(base + i * layout.input.row_stride), es);
    perms[r] = oracle_permutation(d, row_bits[r], order, ties);
  }
  const std::vector<uint8_t> input_before(input.bytes(), input.bytes() + input.size());

  const int64_t values_extent = extent_of(layout.values, sizes, n);
  const int64_t indices_extent = extent_of(layout.indices, sizes, n);
  bool ok = true;
  for_each_isa([&](Isa) {
    if (!ok) return;
    GuardedBuffer values(es, layout.values.offset, values_extent, 0x22);
    GuardedBuffer indices(8, layout.indices.offset, indices_extent, 0x33);
    // What the buffers must hold afterwards: canaries everywhere but the logical output positions.
    std::vector<uint8_t> want_values(values.bytes(), values.bytes() + values.size());
    std::vector<uint8_t> want_indices(indices.bytes(), indices.bytes() + indices.size());
    std::vector<uint8_t> logical_values(values.size(), 0), logical_indices(indices.size(), 0);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t vb = row_offset(r, sizes, layout.values.outer_strides);
      const int64_t ib = row_offset(r, sizes, layout.indices.outer_strides);
      for (int64_t i = 0; i < n; ++i) {
        const size_t vo = values.data_offset() + static_cast<size_t>(vb + i * layout.values.row_stride) * es;
        const size_t io = indices.data_offset() + static_cast<size_t>(ib + i * layout.indices.row_stride) * 8;
        if (logical_values[vo] || logical_indices[io]) {
          ADD_FAILURE() << "test bug: output layout " << layout.name << " overlaps itself";
          ok = false;
          return;
        }
        logical_values[vo] = logical_indices[io] = 1;
        std::memcpy(&want_values[vo], &row_bits[r][perms[r][i]], es);
        std::memcpy(&want_indices[io], &perms[r][i], 8);
      }
    }

    std::vector<int64_t> in_strides = layout.input.outer_strides, v_strides = layout.values.outer_strides,
                         i_strides = layout.indices.outer_strides;
    kwker::SortRowsProblem p{};
    p.dtype = d;
    p.order = order;
    p.ties = ties;
    p.row_length = n;
    p.outer_sizes = sizes;
    p.input = {input.data(), layout.input.row_stride, in_strides};
    p.values = {values.data(), layout.values.row_stride, v_strides};
    p.indices = {indices.data(), layout.indices.row_stride, i_strides};
    if (kwker::sort_declines(p)) {
      // Declining is allowed only for torch's unstable order of a first row already in (or in
      // reverse) order with equal keys. sort_rows must still sort such problems correctly (below).
      auto is_identity = [](const std::vector<int64_t>& perm) {
        for (size_t i = 0; i < perm.size(); ++i) {
          if (perm[i] != static_cast<int64_t>(i)) return false;
        }
        return true;
      };
      const SortOrder reverse = order == SortOrder::kAscending ? SortOrder::kDescending : SortOrder::kAscending;
      const bool in_order = is_identity(oracle_permutation(d, row_bits[0], order, TieOrder::kStable)) ||
                            is_identity(oracle_permutation(d, row_bits[0], reverse, TieOrder::kStable));
      if (ties != TieOrder::kIntrosort || n <= 256 || !in_order) {
        ADD_FAILURE() << "sort_declines declined a row that is not presorted with equal keys";
        ok = false;
        return;
      }
    }
    kwker::sort_rows(p);

    // Logical positions first, in row order, so the first reported difference is meaningful.
    for (int64_t r = 0; r < rows && ok; ++r) {
      const int64_t vb = row_offset(r, sizes, layout.values.outer_strides);
      const int64_t ib = row_offset(r, sizes, layout.indices.outer_strides);
      for (int64_t i = 0; i < n; ++i) {
        const size_t vo = values.data_offset() + static_cast<size_t>(vb + i * layout.values.row_stride) * es;
        const size_t io = indices.data_offset() + static_cast<size_t>(ib + i * layout.indices.row_stride) * 8;
        int64_t got_index;
        std::memcpy(&got_index, indices.bytes() + io, 8);
        uint64_t got_value = 0;
        std::memcpy(&got_value, values.bytes() + vo, es);
        const uint64_t want_value = row_bits[r][perms[r][i]];
        if (got_index != perms[r][i] || std::memcmp(values.bytes() + vo, &want_values[vo], es) != 0) {
          std::ostringstream msg;
          msg << "first difference at row " << r << " position " << i << ": index " << got_index
              << " (want " << perms[r][i] << "), value bits " << hex(got_value) << " (want "
              << hex(want_value) << ")";
          if (n <= 40) {
            msg << "\n  input:";
            for (int64_t k = 0; k < n; ++k) msg << " " << hex(row_bits[r][k]);
          }
          ADD_FAILURE() << msg.str();
          ok = false;
          break;
        }
      }
    }
    if (!ok) return;
    auto check_rest = [&](const GuardedBuffer& buf, const std::vector<uint8_t>& want, const char* which) {
      for (size_t b = 0; b < buf.size(); ++b) {
        if (buf.bytes()[b] != want[b]) {
          const size_t data_end = buf.size() - kGuardBytes;
          const char* where = b < kGuardBytes ? "guard before the buffer"
                              : b < buf.data_offset() ? "padding before element 0"
                              : b >= data_end ? "guard after the buffer"
                                              : "gap between logical positions";
          ADD_FAILURE() << which << " buffer: byte " << b << " (" << where << ", element offset "
                        << (static_cast<int64_t>(b) - static_cast<int64_t>(buf.data_offset())) /
                               static_cast<int64_t>(buf.element_size())
                        << ") was overwritten";
          return false;
        }
      }
      return true;
    };
    ok = check_rest(values, want_values, "values") && check_rest(indices, want_indices, "indices");
    if (ok && std::memcmp(input.bytes(), input_before.data(), input.size()) != 0) {
      ADD_FAILURE() << "input buffer was modified";
      ok = false;
    }
  });
  return ok;
}

inline std::string describe(DType d, SortOrder o, TieOrder t, int64_t n, const char* dist,
                            const std::string& layout) {
  std::ostringstream s;
  s << "dtype=" << dtype_name(d) << " order=" << order_name(o) << " ties=" << ties_name(t) << " n=" << n
    << " dist=" << dist << " layout=" << layout;
  return s.str();
}

}  // namespace kwker_test

// Readable test parameters in gtest's output (found by argument-dependent lookup).
namespace kwker {
inline void PrintTo(DType d, std::ostream* os) { *os << kwker_test::dtype_name(d); }
inline void PrintTo(SortOrder o, std::ostream* os) { *os << kwker_test::order_name(o); }
inline void PrintTo(TieOrder t, std::ostream* os) { *os << kwker_test::ties_name(t); }
}  // namespace kwker
