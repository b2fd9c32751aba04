// UniqueSorted (kwker/unique.h). Every element has an order-preserving unsigned key (integers offset
// by the sign bit; floats the usual sign-magnitude flip, which orders them as their values once NaNs
// and mixed zero signs are excluded, so distinct keys are distinct values). Keys spanning a small
// range are counted in a table, a wider range is marked in a bitmap, others are sorted and scanned
// for runs. All three give the distinct values ascending, ranks and multiplicities: torch's answer
// whenever it does not depend on its sort's order of equal keys (prepare() checks that).
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <type_traits>

#include "key_radix_sort.h"
#include "kwker/cpu.h"
#include "kwker/sort.h"
#include "kwker/unique.h"

namespace kwker {
namespace {

// A range this small is always counted (8- and 16-bit types); a larger one if it is at most
// kTableElementsPerInput times the input and at most kMaxTable values (the table then stays in L2
// cache, where counting beats sorting).
constexpr uint64_t kAlwaysTable = uint64_t{1} << 16;
constexpr uint64_t kMaxTable = uint64_t{1} << 22;
constexpr uint64_t kTableElementsPerInput = 2;
// Wider ranges, up to kBitmapBitsPerInput bits per input element and kMaxBitmap values, are marked in a
// bitmap (a bit per value, a 32-bit rank per 64 values): a few passes over a map that stays in cache
// beat a sort of the elements.
constexpr uint64_t kMaxBitmap = uint64_t{1} << 28;
constexpr uint64_t kBitmapBitsPerInput = 64;

// Integers: the value offset by the sign bit of int64.
// Order: a type of T's width whose order is the keys' (T itself for integers, the key for floats).
template <typename Int>
struct IntegerKey {
  using T = Int;
  using Order = Int;
  static Order order(T x) { return x; }
  static uint64_t key_of_order(Order x) { return key(x); }
  static uint64_t key(T x) { return static_cast<uint64_t>(static_cast<int64_t>(x)) ^ (uint64_t{1} << 63); }
  static T value(uint64_t k) { return static_cast<T>(static_cast<int64_t>(k ^ (uint64_t{1} << 63))); }
  // The same order in T's width (what the radix sort sorts).
  using Narrow = std::make_unsigned_t<Int>;
  static constexpr Narrow kNarrowFlip = std::is_signed_v<Int> ? static_cast<Narrow>(Narrow{1} << (8 * sizeof(Int) - 1)) : 0;
  static Narrow narrow_key(T x) { return static_cast<Narrow>(static_cast<Narrow>(x) ^ kNarrowFlip); }
  static T narrow_value(Narrow k) { return static_cast<T>(static_cast<Narrow>(k ^ kNarrowFlip)); }
};

// Float bits: non-negative values get the sign bit set, negative ones all bits flipped.
template <typename Bits>
struct FloatKey {
  using T = Bits;
  using Order = Bits;
  static constexpr Bits kSign = static_cast<Bits>(Bits{1} << (8 * sizeof(Bits) - 1));
  static constexpr uint64_t kAll = static_cast<Bits>(~Bits{0});
  static Order order(T b) { return static_cast<Bits>((b & kSign) ? ~b : (b | kSign)); }
  static uint64_t key_of_order(Order x) { return x; }
  static uint64_t key(T b) { return order(b); }
  static T value(uint64_t k) { return static_cast<T>((k & kSign) ? (k & ~uint64_t{kSign}) : (~k & kAll)); }
  using Narrow = Bits;
  static Narrow narrow_key(T b) { return order(b); }
  static T narrow_value(Narrow k) { return value(k); }
};

struct FloatFormat {
  uint64_t sign, exponent, mantissa;
};

FloatFormat float_format(DType d) {
  switch (d) {
    case DType::kFloat16: return {0x8000, 0x7C00, 0x03FF};
    case DType::kBFloat16: return {0x8000, 0x7F80, 0x007F};
    case DType::kFloat32: return {0x80000000u, 0x7F800000u, 0x007FFFFFu};
    default: return {uint64_t{1} << 63, uint64_t{0x7FF} << 52, (uint64_t{1} << 52) - 1};
  }
}

// Whether torch's unique of these float bits depends on its sort's order of equal keys.
template <typename Bits>
bool depends_on_tie_order(DType dtype, const Bits* data, int64_t n) {
  const FloatFormat f = float_format(dtype);
  bool nan = false, negative_zero = false, positive_zero = false;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t b = data[i];
    nan |= (b & f.exponent) == f.exponent && (b & f.mantissa) != 0;
    negative_zero |= b == f.sign;
    positive_zero |= b == 0;
  }
  return nan || (negative_zero && positive_zero);
}

// How many runs of equal neighbours sorted[0, n) has (equal bits: equal keys).
template <typename E>
int64_t count_runs(const E* sorted, int64_t n) {
  int64_t runs = 1;
  for (int64_t i = 1; i < n; ++i) runs += sorted[i] != sorted[i - 1];
  return runs;
}

// Over the runs of sorted[0, n): values[run] = value_of(its first element), counts[run] = its length
// (counts may be null), and at_run(i, run) for every position i.
template <typename E, typename V, typename ValueOf, typename AtRun>
void write_runs(const E* sorted, int64_t n, const ValueOf& value_of, V* values, int64_t* counts, const AtRun& at_run) {
  int64_t run = 0, run_start = 0;
  values[0] = value_of(sorted[0]);
  at_run(0, 0);
  for (int64_t i = 1; i < n; ++i) {
    if (sorted[i] != sorted[i - 1]) {
      if (counts) counts[run] = i - run_start;
      values[++run] = value_of(sorted[i]);
      run_start = i;
    }
    at_run(i, run);
  }
  if (counts) counts[run] = n - run_start;
}

// Calls counts_bits(), inlined into a function compiled with the popcnt instruction where the active
// ISA has it (AVX2, AVX-512). This file is built for any x86-64, where std::popcount is a libgcc
// call: that made the bitmap's ranks of 1M user ids over 10M take twice as long (20-25 ms against
// 9-15 on an AMD Zen 4).
template <typename F>
[[gnu::target("popcnt")]] void call_with_popcnt(const F& counts_bits) { counts_bits(); }

template <typename F>
void call_counting_bits(const F& counts_bits) {
  if (active_isa() != Isa::kScalar) {
    call_with_popcnt(counts_bits);
  } else {
    counts_bits();
  }
}

}  // namespace

template <typename K>
void UniqueSorted::count_in_table(const typename K::T* data, uint64_t range) {
  table_.assign(static_cast<size_t>(range), 0);
  uint32_t* table = table_.data();
  for (int64_t i = 0; i < n_; ++i) ++table[K::key(data[i]) - low_];
  count_ = static_cast<int64_t>(range) - std::count(table_.begin(), table_.end(), 0u);
}

template <typename K>
void UniqueSorted::mark_in_bitmap(const typename K::T* data, uint64_t range) {
  const size_t words = static_cast<size_t>((range + 63) / 64);
  bitmap_.assign(words, 0);
  uint64_t* bitmap = bitmap_.data();
  for (int64_t i = 0; i < n_; ++i) {
    const uint64_t v = K::key(data[i]) - low_;
    bitmap[v >> 6] |= uint64_t{1} << (v & 63);
  }
  word_ranks_.resize(words);
  uint32_t rank = 0;
  call_counting_bits([&]() [[gnu::always_inline]] {
    for (size_t w = 0; w < words; ++w) {
      word_ranks_[w] = rank;
      rank += std::popcount(bitmap[w]);
    }
  });
  count_ = rank;
}

template <typename K>
void UniqueSorted::sort_and_count_runs(const typename K::T* data) {
  using T = typename K::T;
  sorted_.resize(static_cast<size_t>(n_) * sizeof(T));
  permutation_.resize(static_cast<size_t>(n_));
  SortRowsProblem p{};
  p.dtype = dtype_;
  p.order = SortOrder::kAscending;
  p.ties = TieOrder::kStable;
  p.row_length = n_;
  p.input = {const_cast<T*>(data), 1, {}};
  p.values = {sorted_.data(), 1, {}};
  p.indices = {permutation_.data(), 1, {}};
  sort_rows(p);
  count_ = count_runs(reinterpret_cast<const T*>(sorted_.data()), n_);
}

template <typename K>
void UniqueSorted::sort_keys_and_count_runs(const typename K::T* data) {
  using Narrow = typename K::Narrow;
  sorted_.resize(static_cast<size_t>(n_) * sizeof(Narrow));
  auto* keys = reinterpret_cast<Narrow*>(sorted_.data());
  for (int64_t i = 0; i < n_; ++i) keys[i] = K::narrow_key(data[i]);
  std::vector<Narrow> buffer;
  key_radix_sort(keys, n_, buffer);
  count_ = count_runs(keys, n_);
}

template <typename K>
bool UniqueSorted::prepare_typed(const typename K::T* data) {
  if constexpr (!std::is_same_v<K, IntegerKey<typename K::T>>) {
    if (depends_on_tie_order(dtype_, data, n_)) return false;
  }
  // The extremes in the narrowest type that orders like the keys (vectorises for 8/16/32-bit types).
  typename K::Order low = K::order(data[0]), high = low;
  for (int64_t i = 1; i < n_; ++i) {
    low = std::min(low, K::order(data[i]));
    high = std::max(high, K::order(data[i]));
  }
  low_ = K::key_of_order(low);
  const uint64_t range = K::key_of_order(high) - low_ + 1;  // 0: every 64-bit key
  const uint64_t n = static_cast<uint64_t>(n_);
  if (range != 0 && (range <= kAlwaysTable || (range <= kMaxTable && range <= kTableElementsPerInput * n))) {
    count_in_table<K>(data, range);
  } else if (range != 0 && range <= kMaxBitmap && range <= kBitmapBitsPerInput * n &&
             n < (uint64_t{1} << 32)) {  // the counts are taken in 32 bits
    mark_in_bitmap<K>(data, range);
  } else if (ranks_ == UniqueRanks::kWanted) {
    sort_and_count_runs<K>(data);
  } else {
    sort_keys_and_count_runs<K>(data);
  }
  return true;
}

template <typename K>
void UniqueSorted::write_typed(typename K::T* values, int64_t* inverse, int64_t* counts) {
  const auto* data = static_cast<const typename K::T*>(data_);
  if (!table_.empty()) {
    uint32_t* table = table_.data();
    uint32_t rank = 0;
    for (size_t j = 0; j < table_.size(); ++j) {
      if (table[j] == 0) continue;
      values[rank] = K::value(low_ + j);
      if (counts) counts[rank] = table[j];
      table[j] = rank++;  // from here on the table holds ranks
    }
    if (inverse) {
      for (int64_t i = 0; i < n_; ++i) inverse[i] = table[K::key(data[i]) - low_];
    }
    return;
  }
  if (!bitmap_.empty()) {
    const uint64_t* bitmap = bitmap_.data();
    const uint32_t* word_ranks = word_ranks_.data();
    int64_t rank = 0;
    for (size_t w = 0; w < bitmap_.size(); ++w) {
      for (uint64_t bits = bitmap[w]; bits != 0; bits &= bits - 1) {
        values[rank++] = K::value(low_ + w * 64 + std::countr_zero(bits));
      }
    }
    if (!inverse && !counts) return;
    // Counted in 32 bits in the first half of counts (n < 2^32 on this path), which halves the
    // footprint of the random increments (1M user ids over 10M: 10.9 -> 8.1 ms), then widened in
    // place from the top down: the 64-bit count r covers the 32-bit ones 2r and 2r + 1, read already.
    using Count32 = uint32_t __attribute__((may_alias));
    auto* counted = reinterpret_cast<Count32*>(counts);
    if (counts) std::fill(counted, counted + count_, 0u);
    call_counting_bits([&]() [[gnu::always_inline]] {
      for (int64_t i = 0; i < n_; ++i) {
        const uint64_t v = K::key(data[i]) - low_;
        const uint64_t below = bitmap[v >> 6] & ((uint64_t{1} << (v & 63)) - 1);
        const int64_t r = word_ranks[v >> 6] + std::popcount(below);
        if (inverse) inverse[i] = r;
        if (counts) ++counted[r];
      }
    });
    if (counts) {
      for (int64_t r = count_ - 1; r >= 0; --r) counts[r] = counted[r];
    }
    return;
  }
  if (permutation_.empty()) {  // keys only (no ranks wanted)
    write_runs(reinterpret_cast<const typename K::Narrow*>(sorted_.data()), n_, &K::narrow_value, values, counts,
               [](int64_t, int64_t) {});
    return;
  }
  write_runs(reinterpret_cast<const typename K::T*>(sorted_.data()), n_, [](typename K::T x) { return x; }, values,
             counts, [&](int64_t i, int64_t run) {
               if (inverse) inverse[permutation_[i]] = run;
             });
}

// Calls f(K{}) with the key type of the dtype.
template <typename F>
auto with_key(DType dtype, const F& f) {
  switch (dtype) {
    case DType::kUInt8: return f(IntegerKey<uint8_t>{});
    case DType::kInt8: return f(IntegerKey<int8_t>{});
    case DType::kInt16: return f(IntegerKey<int16_t>{});
    case DType::kInt32: return f(IntegerKey<int32_t>{});
    case DType::kInt64: return f(IntegerKey<int64_t>{});
    case DType::kFloat16:
    case DType::kBFloat16: return f(FloatKey<uint16_t>{});
    case DType::kFloat32: return f(FloatKey<uint32_t>{});
    case DType::kFloat64:
    case DType::kBool: break;
  }
  return f(FloatKey<uint64_t>{});
}

bool UniqueSorted::prepare(DType dtype, const void* data, int64_t n, UniqueRanks ranks) {
  dtype_ = dtype;
  ranks_ = ranks;
  data_ = data;
  n_ = n;
  table_.clear();
  bitmap_.clear();
  sorted_.clear();
  permutation_.clear();
  return with_key(dtype, [&]<typename K>(K) { return prepare_typed<K>(static_cast<const typename K::T*>(data)); });
}

void UniqueSorted::write(void* values, int64_t* inverse, int64_t* counts) {
  with_key(dtype_, [&]<typename K>(K) { write_typed<K>(static_cast<typename K::T*>(values), inverse, counts); });
}

}  // namespace kwker
