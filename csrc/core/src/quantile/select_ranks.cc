// select_ranks (kwker/quantile.h): keys k(x) order floats as torch's quantile order does (NaN last),
// then the requested ranks of each row by nested nth_element (few ranks) or a sort (many).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kwker/parallel.h"
#include "kwker/quantile.h"

namespace kwker {
namespace {

// With more distinct ranks than this per short row, sorting the row is cheaper than selecting each.
constexpr int64_t kMaxSelectedRanks = 16;
// Rows at least this long first narrow each rank to a bucket: the row's key range cut into up to
// 2^kMaxBucketBits buckets (about one per 4 elements).
constexpr int64_t kMinBucketedLength = 256;
constexpr int kMaxBucketBits = 11;
// Rows per parallel work item: about this many elements.
constexpr int64_t kGrainElements = 1 << 16;

template <typename Float, typename Bits>
struct Keys {
  static constexpr Bits kSign = Bits{1} << (8 * sizeof(Bits) - 1);
  static constexpr Bits kInfinity = std::is_same_v<Float, float> ? Bits(0x7F800000u) : Bits(0x7FF0000000000000ull);
  static bool is_nan(Bits b) { return static_cast<Bits>(b & ~kSign) > kInfinity; }
  // Numbers by value (sign-magnitude flipped), every NaN above +inf; branch-free (vectorises).
  static Bits key(Float x) {
    Bits b;
    std::memcpy(&b, &x, sizeof b);
    const Bits flipped = (b & kSign) ? static_cast<Bits>(~b) : static_cast<Bits>(b | kSign);
    return is_nan(b) ? static_cast<Bits>(~Bits{0}) : flipped;
  }
  static Float value(Bits k) {  // k is the key of a number
    const Bits b = (k & kSign) ? (k & ~kSign) : ~k;
    Float x;
    std::memcpy(&x, &b, sizeof x);
    return x;
  }
};

// Per-thread buffers, reused from row to row.
template <typename Bits>
struct Scratch {
  std::vector<Bits> keys, gathered, sorted, wanted_keys;
  std::vector<int64_t> wanted, below, buckets, local;
  std::vector<uint8_t> is_wanted;
};

// LSD radix sort of keys[0, n) by 11-bit digits, skipping digits all keys share.
template <typename Bits>
void radix_sort(Bits* keys, int64_t n, std::vector<Bits>& buffer) {
  constexpr int kDigitBits = 11, kDigits = (8 * sizeof(Bits) + kDigitBits - 1) / kDigitBits;
  constexpr size_t kRadix = size_t{1} << kDigitBits;
  std::vector<int64_t> counts(kDigits * kRadix, 0);
  for (int64_t i = 0; i < n; ++i) {
    for (int d = 0; d < kDigits; ++d) ++counts[d * kRadix + ((keys[i] >> (d * kDigitBits)) & (kRadix - 1))];
  }
  buffer.resize(static_cast<size_t>(n));
  Bits *from = keys, *to = buffer.data();
  for (int d = 0; d < kDigits; ++d) {
    int64_t* c = counts.data() + d * kRadix;
    if (*std::max_element(c, c + kRadix) == n) continue;  // one digit value: the pass changes nothing
    int64_t running = 0;
    for (size_t v = 0; v < kRadix; ++v) {
      const int64_t k = c[v];
      c[v] = running;
      running += k;
    }
    for (int64_t i = 0; i < n; ++i) to[c[(from[i] >> (d * kDigitBits)) & (kRadix - 1)]++] = from[i];
    std::swap(from, to);
  }
  if (from != keys) std::copy(from, from + n, keys);
}

// Puts the elements of ranks [first, last) (sorted, distinct) of keys[lo, hi) in place.
template <typename Bits>
void nested_select(Bits* keys, int64_t lo, int64_t hi, const int64_t* first, const int64_t* last) {
  if (first == last) return;
  const int64_t* middle = first + (last - first) / 2;
  std::nth_element(keys + lo, keys + *middle, keys + hi);
  nested_select(keys, lo, *middle, first, middle);
  nested_select(keys, *middle + 1, hi, middle + 1, last);
}

// The elements of ranks [first, last) (sorted, distinct) of keys[0, n) in place: nested selection for
// few ranks, a sort for many.
template <typename Bits>
void select_in(Bits* keys, int64_t n, const int64_t* first, const int64_t* last, std::vector<Bits>& buffer) {
  if (last - first > kMaxSelectedRanks) {
    radix_sort(keys, n, buffer);
  } else {
    nested_select(keys, 0, n, first, last);
  }
}

// Rows of kMinBucketedLength or more: a histogram of the keys over [low, high] gives each rank's bucket and its rank inside it;
// the keys of the wanted buckets (a small part of the row, unless the data is concentrated) are
// gathered, and the ranks are selected among them. out_keys[j] = the key of rank wanted[j].
template <typename Bits>
void bucketed_select(const Bits* keys, int64_t n, Bits low, Bits high, Scratch<Bits>& s) {
  const int bucket_bits = std::min<int>(kMaxBucketBits, std::bit_width(static_cast<uint64_t>(n / 4)));
  const int span_bits = std::bit_width(static_cast<uint64_t>(high - low));
  const int shift = std::max(0, span_bits - bucket_bits);
  const size_t bucket_count = (static_cast<size_t>(high - low) >> shift) + 1;
  auto& below = s.below;  // elements in earlier buckets, after the prefix sum
  below.assign(bucket_count, 0);
  for (int64_t i = 0; i < n; ++i) ++below[(keys[i] - low) >> shift];
  int64_t running = 0;
  for (auto& b : below) {
    const int64_t c = b;
    b = running;
    running += c;
  }
  // The buckets holding wanted ranks, in order (each wanted rank in one of them).
  s.buckets.clear();
  for (int64_t rank : s.wanted) {
    const int64_t bucket = std::upper_bound(below.begin(), below.end(), rank) - below.begin() - 1;
    if (s.buckets.empty() || s.buckets.back() != bucket) s.buckets.push_back(bucket);
  }
  s.is_wanted.assign(bucket_count, 0);
  for (int64_t b : s.buckets) s.is_wanted[b] = 1;
  s.gathered.resize(static_cast<size_t>(n));
  Bits* gathered = s.gathered.data();
  const uint8_t* is_wanted = s.is_wanted.data();
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    gathered[count] = keys[i];
    count += is_wanted[(keys[i] - low) >> shift];
  }
  // The gathered keys are whole buckets, so a rank's element is the one of rank (rank - elements in
  // earlier buckets + gathered elements of earlier wanted buckets) among them.
  s.local.clear();  // ranks among the gathered keys, ascending like wanted
  int64_t gathered_below = 0;
  for (int64_t b : s.buckets) {
    const int64_t bucket_end = (b + 1 < static_cast<int64_t>(below.size())) ? below[b + 1] : running;
    for (int64_t rank : s.wanted) {
      if (rank >= below[b] && rank < bucket_end) s.local.push_back(gathered_below + rank - below[b]);
    }
    gathered_below += bucket_end - below[b];
  }
  select_in(gathered, count, s.local.data(), s.local.data() + s.local.size(), s.sorted);
  s.wanted_keys.resize(s.wanted.size());
  for (size_t j = 0; j < s.wanted.size(); ++j) s.wanted_keys[j] = gathered[s.local[j]];
}

template <typename Float, typename Bits>
void select_typed(const RankSelectProblem& p) {
  using K = Keys<Float, Bits>;
  const auto* rows = static_cast<const Float*>(p.rows);
  auto* out = static_cast<Float*>(p.out);
  const int64_t n = p.row_length, r = p.ranks_per_row;
  const int64_t grain = std::max<int64_t>(1, kGrainElements / n);
  parallel_for(0, p.row_count, grain, [&](int64_t begin, int64_t end) {
    Scratch<Bits> s;
    s.keys.resize(static_cast<size_t>(n));
    Bits* keys = s.keys.data();
    for (int64_t row = begin; row < end; ++row) {
      const Float* x = rows + row * n;
      Bits low = ~Bits{0}, high = 0;
      for (int64_t i = 0; i < n; ++i) {
        keys[i] = K::key(x[i]);
        low = std::min(low, keys[i]);
        high = std::max(high, keys[i]);
      }
      const int64_t* ranks = p.ranks + row * r;
      s.wanted.assign(ranks, ranks + r);
      std::sort(s.wanted.begin(), s.wanted.end());
      s.wanted.erase(std::unique(s.wanted.begin(), s.wanted.end()), s.wanted.end());
      if (n >= kMinBucketedLength) {
        bucketed_select(keys, n, low, high, s);
        for (int64_t j = 0; j < r; ++j) {
          const int64_t at = std::lower_bound(s.wanted.begin(), s.wanted.end(), ranks[j]) - s.wanted.begin();
          out[row * r + j] = K::value(s.wanted_keys[at]);
        }
      } else {
        select_in(keys, n, s.wanted.data(), s.wanted.data() + s.wanted.size(), s.sorted);
        for (int64_t j = 0; j < r; ++j) out[row * r + j] = K::value(keys[ranks[j]]);
      }
    }
  });
}

template <typename Float, typename Bits>
RowsScan scan_typed(const Float* rows, int64_t row_count, int64_t n, int64_t* numbers) {
  using K = Keys<Float, Bits>;
  RowsScan s;
  Bits negative_zeros = 0, positive_zeros = 0;
  for (int64_t r = 0; r < row_count; ++r) {
    const Float* x = rows + r * n;
    int64_t nans = 0;
    for (int64_t i = 0; i < n; ++i) {
      Bits b;
      std::memcpy(&b, x + i, sizeof b);
      nans += K::is_nan(b);
      negative_zeros |= b == K::kSign;
      positive_zeros |= b == 0;
    }
    numbers[r] = n - nans;
    s.any_nan |= nans > 0;
    s.all_nan_row |= nans == n;
  }
  s.both_zero_signs = negative_zeros && positive_zeros;
  return s;
}

}  // namespace

RowsScan scan_rows(DType dtype, const void* rows, int64_t row_count, int64_t row_length, int64_t* numbers) {
  if (dtype == DType::kFloat32) {
    return scan_typed<float, uint32_t>(static_cast<const float*>(rows), row_count, row_length, numbers);
  }
  return scan_typed<double, uint64_t>(static_cast<const double*>(rows), row_count, row_length, numbers);
}

void select_ranks(const RankSelectProblem& p) {
  if (p.dtype == DType::kFloat32) return select_typed<float, uint32_t>(p);
  select_typed<double, uint64_t>(p);
}

}  // namespace kwker
