// select_ranks and scan_rows (kwker/quantile.h): keys k(x) order floats as torch's quantile order does
// (NaN last; row_passes-inl.h, whose element-wise passes run in the ISA variant in use), then the
// requested ranks of each row (bucketed, then nested nth_element or a radix sort).
#include <algorithm>
#include <bit>
#include <deque>
#include <vector>

#include "kwker/cpu.h"
#include "kwker/parallel.h"
#include "kwker/quantile.h"
#include "key_radix_sort.h"
#include "quantile/row_passes.h"

namespace kwker::quantile_detail::baseline {
#include "quantile/row_passes-inl.h"
}  // namespace kwker::quantile_detail::baseline

namespace kwker {
namespace {

using quantile_detail::baseline::Keys;

// With more distinct ranks than this per short row, sorting the row is cheaper than selecting each.
constexpr int64_t kMaxSelectedRanks = 16;
// Rows at least this long first narrow each rank to a bucket: the row's key range cut into up to
// 2^kMaxBucketBits buckets (about one per 4 elements).
constexpr int64_t kMinBucketedLength = 256;
constexpr int kMaxBucketBits = 11;
// Narrowed sets at least this large are narrowed again (nth_element costs several times a pass).
constexpr int64_t kMinNarrowedLength = 48;
// Rows per parallel work item: about this many elements.
constexpr int64_t kGrainElements = 1 << 16;

using quantile_detail::RowPassKernels;

const RowPassKernels& kernels() {
  switch (active_isa()) {
    case Isa::kAvx512: return quantile_detail::avx512::kKernels;
    case Isa::kAvx2: return quantile_detail::avx2::kKernels;
    case Isa::kScalar: break;
  }
  return quantile_detail::scalar::kKernels;
}

void row_keys(const float* x, int64_t n, uint32_t* keys, uint32_t* low, uint32_t* high) {
  kernels().keys_f32(x, n, keys, low, high);
}
void row_keys(const double* x, int64_t n, uint64_t* keys, uint64_t* low, uint64_t* high) {
  kernels().keys_f64(x, n, keys, low, high);
}
int64_t row_nans(const float* x, int64_t n, unsigned* zeros) { return kernels().nans_f32(x, n, zeros); }
int64_t row_nans(const double* x, int64_t n, unsigned* zeros) { return kernels().nans_f64(x, n, zeros); }

// One narrowing level's buffers (select_narrowing), reused from call to call.
template <typename Bits>
struct Level {
  std::vector<int64_t> below, buckets, cursor, local;
  std::vector<uint32_t> segment_of;
  std::vector<Bits> segments;
};

// Per-thread buffers, reused from row to row.
template <typename Bits>
struct Scratch {
  std::vector<Bits> keys, radix, wanted_keys;
  std::vector<int64_t> wanted;
  // By depth: a call at depth d uses levels[d] and recurses into d + 1 (a deque: growing it keeps the
  // outer calls' references valid).
  std::deque<Level<Bits>> levels;
};

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
    key_radix_sort(keys, n, buffer);
  } else {
    nested_select(keys, 0, n, first, last);
  }
}

// The keys of ranks[0, r) (sorted, distinct) of keys[0, n), all within [low, high], into out[0, r).
// Sets of at least `min_length` keys are narrowed first: a histogram over [low, high] (about one
// bucket per 4 keys, at most 2^kMaxBucketBits) puts each rank in a bucket; the keys of those buckets
// are moved, bucket by bucket, into segments of one buffer, and each segment (a narrower key range)
// is searched for its ranks the same way. Smaller sets, and sets no bucket splits, are selected in
// place. keys[0, n) is reordered.
template <typename Bits>
void select_narrowing(Bits* keys, int64_t n, Bits low, Bits high, const int64_t* ranks, int64_t r, Bits* out,
                      Scratch<Bits>& scratch, size_t depth = 0) {
  const int64_t min_length = depth == 0 ? kMinBucketedLength : kMinNarrowedLength;
  std::vector<Bits>& radix = scratch.radix;
  const int span_bits = std::bit_width(static_cast<uint64_t>(high - low));
  if (n < min_length || span_bits == 0) {
    select_in(keys, n, ranks, ranks + r, radix);
    for (int64_t j = 0; j < r; ++j) out[j] = keys[ranks[j]];
    return;
  }
  const int bucket_bits = std::min<int>(kMaxBucketBits, std::bit_width(static_cast<uint64_t>(n / 4)));
  const int shift = std::max(0, span_bits - bucket_bits);
  const size_t bucket_count = (static_cast<size_t>(high - low) >> shift) + 1;
  // Counted in two interleaved tables: neighbours in one bucket would chain one counter's updates.
  if (scratch.levels.size() <= depth) scratch.levels.resize(depth + 1);
  Level<Bits>& level = scratch.levels[depth];
  std::vector<int64_t>& below = level.below;  // then: keys in earlier buckets (prefix sum)
  below.assign(2 * (bucket_count + 1), 0);
  int64_t* odd = below.data() + bucket_count + 1;
  int64_t i = 0;
  for (; i + 1 < n; i += 2) {
    ++below[(keys[i] - low) >> shift];
    ++odd[(keys[i + 1] - low) >> shift];
  }
  if (i < n) ++below[(keys[i] - low) >> shift];
  for (size_t b = 0; b <= bucket_count; ++b) below[b] += odd[b];
  below.resize(bucket_count + 1);
  int64_t running = 0;
  for (auto& c : below) {
    const int64_t k = c;
    c = running;
    running += k;
  }
  // The wanted buckets in order; segment_of[b] = 1 + its segment (0: not wanted).
  std::vector<int64_t>& buckets = level.buckets;
  buckets.clear();
  for (int64_t j = 0; j < r; ++j) {
    const int64_t bucket = std::upper_bound(below.begin(), below.end(), ranks[j]) - below.begin() - 1;
    if (buckets.empty() || buckets.back() != bucket) buckets.push_back(bucket);
  }
  if (buckets.size() == 1 && below[buckets[0] + 1] - below[buckets[0]] == n) {  // one bucket holds all
    select_in(keys, n, ranks, ranks + r, radix);
    for (int64_t j = 0; j < r; ++j) out[j] = keys[ranks[j]];
    return;
  }
  std::vector<uint32_t>& segment_of = level.segment_of;
  segment_of.assign(bucket_count, 0);
  std::vector<int64_t>& cursor = level.cursor;
  cursor.assign(buckets.size() + 1, 0);
  int64_t total = 0;
  for (size_t g = 0; g < buckets.size(); ++g) {
    segment_of[buckets[g]] = static_cast<uint32_t>(g + 1);
    cursor[g + 1] = total;
    total += below[buckets[g] + 1] - below[buckets[g]];
  }
  std::vector<Bits>& segments = level.segments;
  segments.resize(static_cast<size_t>(total));
  for (i = 0; i < n; ++i) {
    // A branch, not a store to a dump slot: most keys are not wanted, and the slot's counter would
    // chain every iteration through memory.
    const uint32_t g = segment_of[(keys[i] - low) >> shift];
    if (g != 0) segments[cursor[g]++] = keys[i];
  }
  std::vector<int64_t>& local = level.local;
  int64_t j = 0, offset = 0;
  for (const int64_t b : buckets) {
    const int64_t size = below[b + 1] - below[b];
    local.clear();
    const int64_t first = j;
    for (; j < r && ranks[j] < below[b + 1]; ++j) local.push_back(ranks[j] - below[b]);
    const Bits bucket_low = static_cast<Bits>(low + (static_cast<Bits>(b) << shift));
    const Bits bucket_high = static_cast<Bits>(std::min<uint64_t>(high, bucket_low + ((uint64_t{1} << shift) - 1)));
    select_narrowing(segments.data() + offset, size, bucket_low, bucket_high, local.data(),
                     static_cast<int64_t>(local.size()), out + first, scratch, depth + 1);
    offset += size;
  }
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
      Bits low, high;
      row_keys(x, n, keys, &low, &high);
      const int64_t* ranks = p.ranks + row * r;
      s.wanted.assign(ranks, ranks + r);
      std::sort(s.wanted.begin(), s.wanted.end());
      s.wanted.erase(std::unique(s.wanted.begin(), s.wanted.end()), s.wanted.end());
      s.wanted_keys.resize(s.wanted.size());
      select_narrowing(keys, n, low, high, s.wanted.data(), static_cast<int64_t>(s.wanted.size()),
                       s.wanted_keys.data(), s);
      for (int64_t j = 0; j < r; ++j) {
        const int64_t at = std::lower_bound(s.wanted.begin(), s.wanted.end(), ranks[j]) - s.wanted.begin();
        out[row * r + j] = K::value(s.wanted_keys[at]);
      }
    }
  });
}

template <typename Float>
RowsScan scan_typed(const Float* rows, int64_t row_count, int64_t n, int64_t* numbers) {
  RowsScan s;
  unsigned zeros = 0;
  for (int64_t r = 0; r < row_count; ++r) {
    const int64_t nans = row_nans(rows + r * n, n, &zeros);
    numbers[r] = n - nans;
    s.any_nan |= nans > 0;
    s.all_nan_row |= nans == n;
  }
  s.both_zero_signs = zeros == 3;
  return s;
}

}  // namespace

RowsScan scan_rows(DType dtype, const void* rows, int64_t row_count, int64_t row_length, int64_t* numbers) {
  if (dtype == DType::kFloat32) {
    return scan_typed(static_cast<const float*>(rows), row_count, row_length, numbers);
  }
  return scan_typed(static_cast<const double*>(rows), row_count, row_length, numbers);
}

void select_ranks(const RankSelectProblem& p) {
  if (p.dtype == DType::kFloat32) return select_typed<float, uint32_t>(p);
  select_typed<double, uint64_t>(p);
}

}  // namespace kwker
