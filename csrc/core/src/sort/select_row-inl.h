// One row of a kthvalue, median or nanmedian (kwker/select.h), compiled once per ISA (included inside
// namespace kwker::sort_detail::<isa>, after sort_row-inl.h).
//
// Algorithm. Every rule asks for the element of some rank r in the order of canonical keys
// (sort_keys.h: torch's comparisons), positions breaking ties. That element is found without
// sorting:
//  - Long rows: an evenly spaced sample of s keys gives two keys that bracket rank r with high
//    probability; one pass keeps the (key, position) of every element between them, in row order, and
//    counts those below. If the bracket missed, the pass is redone keeping everything.
//  - Keys of up to 32 bits travel packed with their position (key << 32 | position): distinct
//    integers whose order is (key, position) order, so the packed candidate of rank r (found by a
//    quickselect with vector partitions, select_distinct) is the answer.
//  - 64-bit keys travel as (key, position) pairs: an nth_element by key gives the key K of rank r;
//    the candidates below rank r with key K say how many elements with key K come before the answer
//    in (key, position) order; the answer is the element with key K at that place in row order.
// Which element torch picks, and why the above is it:
//  - median: a total order (value, then index), so the element of rank (n - 1) / 2 is unique; a NaN
//    row gives its first NaN.
//  - nanmedian: the same among the numbers; a row of NaNs only gives what libstdc++'s nth_element
//    leaves at the front of equal elements: replayed (introsort-inl.h).
//  - kthvalue: torch's quickselect has no tie-break. When K is the key of one element only, every
//    correct selection returns that element; otherwise torch's quickselect is replayed step for step.
// Cost: about two passes over the row (one for the NaN count of median / nanmedian) plus O(s + n /
// sqrt(s)) for the sample and candidates.

// Rows shorter than this keep every element as a candidate: the sample costs more than it saves.
inline constexpr int64_t kSampledMinLength = 2048;

struct RankedElement {
  uint64_t key;
  int64_t position;
  int64_t equal_keys;  // elements of the row with this key (see rank_select for when it is counted)
};

// The element of rank r (0-based, in (key, position) order) among `count` (key, position)
// candidates, which hold, in row order, every element of the row with the answer's key. `scratch`
// holds `count` uint64.
inline RankedElement rank_among(WideElement* c, int64_t count, int64_t r, uint64_t* scratch) {
  libstdcxx_nth_element<WideOps>(c, c + r, c + count);
  const uint64_t key = c[r].key;
  // Every candidate before r has a key <= K, every one after a key >= K.
  int64_t before = 0, after = 0;
  for (int64_t j = 0; j < r; ++j) before += c[j].key == key;
  for (int64_t j = r; j < count; ++j) after += c[j].key == key;
  const int64_t equal = before + after;
  if (equal == 1) return {key, static_cast<int64_t>(c[r].position), 1};
  // The answer is the `before`-th (0-based) element with key K by position.
  int64_t m = 0;
  for (int64_t j = 0; j < count; ++j) {
    scratch[m] = c[j].position;
    m += c[j].key == key;
  }
  // Positions are unique: compared as whole integers.
  libstdcxx_nth_element<PackedOps<PackedOrder::kByElement>>(scratch, scratch + before, scratch + equal);
  return {key, static_cast<int64_t>(scratch[before]), equal};
}

// The element of rank r of n distinct integers (no replay: any correct selection gives the same
// element). Quickselect that partitions out of place with vector compares (partition_below), a and
// `scratch` (2n + 16 elements each) taking turns as source and destination; the pivot is the median
// of three, so each round removes at least one element. Short ranges finish in place: a quickselect
// whose partition (Lomuto's, swapping unconditionally) has no data-dependent branch, then a sorting
// leaf.
inline uint64_t select_distinct(uint64_t* a, int64_t n, int64_t r, uint64_t* scratch) {
  using ByValue = PackedOps<PackedOrder::kByElement>;
  constexpr int64_t kOutOfPlaceMinLength = 256;
  uint64_t* src = a;
  uint64_t* dst = scratch;
  while (n > kOutOfPlaceMinLength) {
    const uint64_t x = src[0], y = src[n / 2], z = src[n - 1];
    const uint64_t pivot = std::max(std::min(x, y), std::min(std::max(x, y), z));
    const int64_t below = partition_below(src, n, pivot, dst, dst + n + 8);
    uint64_t* const next_dst = src == a ? a : scratch;
    if (r < below) {
      src = dst;
      n = below;
    } else {
      src = dst + (n + 8);
      r -= below;
      n -= below;
    }
    dst = next_dst;
  }
  int rounds = 2 * introsort_depth_limit(n);
  int64_t lo = 0, hi = n;  // src[r] lies in [lo, hi)
  while (hi - lo > kIntrosortThreshold) {
    if (rounds-- == 0) {  // unlucky pivots: the introselect's worst case bound instead
      libstdcxx_nth_element<ByValue>(src + lo, src + r, src + hi);
      return src[r];
    }
    uint64_t* first = src + lo;
    const int64_t len = hi - lo;
    move_median_to_first<ByValue>(first + len - 1, first, first + len / 2, first + len - 2);
    const uint64_t pivot = first[len - 1];
    int64_t below = 0;
    for (int64_t i = 0; i < len - 1; ++i) {
      const uint64_t v = first[i];
      first[i] = first[below];
      first[below] = v;
      below += v < pivot;
    }
    swap_values(first[below], first[len - 1]);  // the pivot at its rank
    const int64_t at = lo + below;
    if (at == r) return src[r];
    if (at < r) {
      lo = at + 1;
    } else {
      hi = at;
    }
  }
  ByValue::sort_leaf(src + lo, src + hi);
  return src[r];
}

// The same for keys of up to 32 bits, packed (key << 32 | position): unique integers whose order is
// (key, position) order, so the packed element of rank r is the answer.
// `scratch` as for select_distinct; the candidates are left overwritten. equal_keys is not counted.
inline RankedElement rank_among(uint64_t* c, int64_t count, int64_t r, uint64_t* scratch) {
  const uint64_t e = select_distinct(c, count, r, scratch);
  return {e >> 32, static_cast<int64_t>(e & kLowHalf), 0};
}

// Sample size for a row of n: about n^(2/3) / 2, which balances selecting in the sample against
// selecting among the n / sqrt(s) candidates the bracket keeps.
inline int64_t sample_size(int64_t n) {
  const double root = std::cbrt(static_cast<double>(n));
  const auto s = static_cast<int64_t>(root * root / 2);
  return s < 64 ? 64 : s > 65536 ? 65536 : s;
}

// Keys [lo, hi] that likely hold rank r of the row's n keys: sample ranks 2 sqrt(s) (four standard
// deviations) either side of where rank r falls in an evenly spaced sample. Short rows: all keys.
template <typename Bits, typename KeyAt>
std::pair<Bits, Bits> bracket(int64_t n, int64_t r, const KeyAt& key_at, WideElement* sample) {
  Bits lo = 0, hi = static_cast<Bits>(~Bits(0));
  if (n < kSampledMinLength) return {lo, hi};
  const int64_t s = sample_size(n);
  // (key, sample index) pairs: by-key selection allows equal keys.
  for (int64_t j = 0; j < s; ++j) sample[j] = {key_at(j * n / s), static_cast<uint64_t>(j)};
  const int64_t spread = static_cast<int64_t>(2 * std::sqrt(static_cast<double>(s))) + 1;
  const int64_t at = r * s / n, lo_rank = at - spread, hi_rank = at + spread;
  if (hi_rank < s) {
    libstdcxx_nth_element<WideOps>(sample, sample + hi_rank, sample + s);
    hi = static_cast<Bits>(sample[hi_rank].key);
  }
  if (lo_rank >= 0) {
    libstdcxx_nth_element<WideOps>(sample, sample + lo_rank, sample + std::min(s, hi_rank));
    lo = static_cast<Bits>(sample[lo_rank].key);
  }
  return {lo, hi};
}

// The element of rank r of the row's n keys; `key_at(i)` gives key i. Uses both work buffers.
// equal_keys is counted for 64-bit keys always, for narrower ones only if `count_equal` (else 0).
template <typename Bits, typename KeyAt>
RankedElement rank_select(int64_t n, int64_t r, const KeyAt& key_at, const RowJob& job, bool count_equal) {
  constexpr bool kPacked = sizeof(Bits) <= 4;
  using Candidate = std::conditional_t<kPacked, uint64_t, WideElement>;
  auto candidate = [](Bits key, int64_t i) {
    if constexpr (kPacked) {
      return Candidate{(uint64_t{key} << 32) | static_cast<uint64_t>(i)};
    } else {
      return Candidate{key, static_cast<uint64_t>(i)};
    }
  };
  auto* c = reinterpret_cast<Candidate*>(job.buffer_a);
  const auto [lo, hi] = bracket<Bits>(n, r, key_at, reinterpret_cast<WideElement*>(job.buffer_b));
  // Kept without a branch per element: whether one is kept is unpredictable.
  const Bits width = static_cast<Bits>(hi - lo);
  int64_t count = 0, below = 0;
  for (int64_t i = 0; i < n; ++i) {
    const Bits key = key_at(i);
    c[count] = candidate(key, i);
    count += static_cast<Bits>(key - lo) <= width;
    below += key < lo;
  }
  if (below > r || below + count <= r) {  // the bracket missed: keep everything
    for (int64_t i = 0; i < n; ++i) c[i] = candidate(key_at(i), i);
    count = n;
    below = 0;
  }
  if constexpr (kPacked) {
    // The selection overwrites the candidates; equal keys are counted on a copy of few candidates
    // (kept in the half of buffer b the selection leaves alone), else on the row.
    const bool copied = count_equal && 2 * count + 16 <= n;
    uint64_t* copy = job.buffer_b + n;
    if (copied) std::memcpy(copy, c, static_cast<size_t>(count) * sizeof(uint64_t));
    RankedElement e = rank_among(c, count, r - below, job.buffer_b);
    if (copied) {
      for (int64_t j = 0; j < count; ++j) e.equal_keys += (copy[j] >> 32) == e.key;
    } else if (count_equal) {
      for (int64_t i = 0; i < n; ++i) e.equal_keys += key_at(i) == static_cast<Bits>(e.key);
    }
    return e;
  } else {
    return rank_among(c, count, r - below, job.buffer_b);
  }
}

// The row's NaNs: how many, and where the first is (-1: none). Float formats only.
struct NanScan {
  int64_t count = 0;
  int64_t first = -1;
};

// The short row's NaNs (float keys: all NaNs have the all-ones key of their width).
template <typename Bits>
NanScan short_row_nans(const ShortRowKeys& row) {
  const KeyMatches nans = row.count_and_first_equal_to(static_cast<Bits>(~Bits(0)));
  return NanScan{nans.count, nans.first};
}

// The short row's element of rank r: the one with r elements before it in (key, position) order,
// i.e. r keys below its own or equal to it at an earlier position. equal_keys is counted.
inline RankedElement short_row_rank(const ShortRowKeys& row, int64_t r) {
  return row.with_padded_length([&]<int kCount>() -> RankedElement {
    for (int64_t i = 0;; ++i) {  // ranks are a permutation of [0, n): some i has rank r
      uint64_t below, equal;
      key_masks64<kCount>(row.keys, row.keys[i], &below, &equal);
      const uint64_t earlier = (uint64_t{1} << i) - 1;
      if (__builtin_popcountll(below | (equal & earlier)) == r) {
        return {row.keys[i], i, __builtin_popcountll(equal & row.in_row)};
      }
    }
  });
}

template <typename Format>
NanScan scan_nans(const Row<Format, false>& row) {
  using Bits = typename Format::Bits;
  constexpr Bits kMagnitude = static_cast<Bits>(static_cast<Bits>(~Bits(0)) >> 1);
  constexpr int64_t kBlock = 256;
  const int64_t n = row.job.n;
  const Bits* in = static_cast<const Bits*>(row.job.input);
  const bool contiguous = row.job.input_stride == 1;
  NanScan scan;
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t end = std::min(n, start + kBlock);
    int64_t nans = 0;  // a count of raw-bit tests, not a boolean OR: it vectorises
    if (contiguous) {
      for (int64_t i = start; i < end; ++i) nans += static_cast<Bits>(in[i] & kMagnitude) > Format::inf_bits;
    } else {
      for (int64_t i = start; i < end; ++i) nans += static_cast<Bits>(row.input(i) & kMagnitude) > Format::inf_bits;
    }
    if (nans != 0 && scan.first < 0) {
      for (int64_t i = start; scan.first < 0; ++i) {
        if (static_cast<Bits>(row.input(i) & kMagnitude) > Format::inf_bits) scan.first = i;
      }
    }
    scan.count += nans;
  }
  return scan;
}

// torch's kthvalue quickselect (Sorting.cpp quick_select_template, after Sedgewick 1978) on elements
// ordered by Ops::less, literally: the element it leaves at position t is torch's answer.
template <typename Ops, typename E>
void sedgewick_select(E* a, int64_t n, int64_t t) {
  auto greater = [](const E& x, const E& y) { return Ops::less(y, x); };
  int64_t lo = 0, hi = n - 1;
  while (hi > lo) {
    if (hi == lo + 1) {
      if (greater(a[lo], a[hi])) swap_values(a[lo], a[hi]);
      return;
    }
    swap_values(a[(lo + hi) >> 1], a[lo + 1]);
    if (greater(a[lo + 1], a[hi])) swap_values(a[lo + 1], a[hi]);
    if (greater(a[lo], a[hi])) swap_values(a[lo], a[hi]);
    if (greater(a[lo + 1], a[lo])) swap_values(a[lo + 1], a[lo]);
    int64_t i = lo + 1, j = hi;
    const E pivot = a[lo];
    while (true) {
      do ++i; while (greater(pivot, a[i]));
      do --j; while (greater(a[j], pivot));
      if (j < i) break;
      swap_values(a[i], a[j]);
    }
    swap_values(a[lo], a[j]);
    if (j <= t) lo = i;
    if (j >= t) hi = j - 1;
  }
}

// torch's kthvalue position for a row with equal keys at rank t: its quickselect, replayed.
template <typename Format>
int64_t kthvalue_by_quickselect(const Row<Format, false>& row, int64_t t) {
  int64_t position = 0;
  with_row_elements(row, [&]<typename Ops>(auto* a) {
    sedgewick_select<Ops>(a, row.job.n, t);
    position = static_cast<int64_t>(Ops::position(a[t]));
  });
  return position;
}

// Where libstdc++'s nth_element leaves the first of n equal elements (torch's nanmedian of NaNs).
inline int64_t first_after_nth_element_of_equals(int64_t n, uint64_t* a) {
  for (int64_t i = 0; i < n; ++i) a[i] = static_cast<uint64_t>(i);  // all keys 0
  using ByKey = PackedOps<PackedOrder::kByKey>;
  libstdcxx_nth_element<ByKey>(a, a, a + n);
  return static_cast<int64_t>(ByKey::position(a[0]));
}

template <typename Format>
constexpr typename Format::Bits quiet_nan_bits() {
  return static_cast<typename Format::Bits>(Format::inf_bits | (Format::inf_bits >> 1));
}

// Whether the row holds both -0.0 and +0.0 (whose keys are equal).
template <typename Format>
bool has_both_zeros(const Row<Format, false>& row) {
  using Bits = typename Format::Bits;
  constexpr Bits sign = Bits(Bits(1) << (Format::key_bits - 1));
  int64_t positive = 0, negative = 0;
  for (int64_t i = 0; i < row.job.n; ++i) {
    const Bits b = row.input(i);
    positive += b == 0;
    negative += b == sign;
  }
  return positive != 0 && negative != 0;
}

template <typename Format>
void select_row_typed(const SelectJob& job) {
  using Bits = typename Format::Bits;
  constexpr bool kFloat = Format::kind == KeyKind::kFloat;
  const Row<Format, false> row{job.row};
  const int64_t n = job.row.n;
  Bits* value = static_cast<Bits*>(job.row.values);
  auto answer = [&](int64_t position) {
    *value = row.input(position);
    *job.row.indices = position;
  };
  // The rules, given the row's NaNs (`scan_nans_of_row()`) and its element of a rank (`rank_of(r)`).
  auto decide = [&](const auto& scan_nans_of_row, const auto& rank_of) {
    int64_t rank;
    if constexpr (kFloat) {
      if (job.rule != SelectRule::kKthValue) {
        const NanScan nans = scan_nans_of_row();
        if (job.rule == SelectRule::kMedian && nans.first >= 0) {
          if (job.whole) {
            *value = quiet_nan_bits<Format>();
          } else {
            answer(nans.first);
          }
          return;
        }
        if (nans.count == n) {  // nanmedian of NaNs only
          const int64_t position = first_after_nth_element_of_equals(n, job.row.buffer_a);
          if (job.whole) {
            const Bits first = row.input(0);
            for (int64_t i = 1; i < n; ++i) *job.ambiguous |= row.input(i) != first;
          }
          return answer(position);
        }
        rank = (n - nans.count - 1) / 2;
      } else {
        rank = job.k - 1;
      }
    } else {
      rank = job.rule == SelectRule::kKthValue ? job.k - 1 : (n - 1) / 2;
    }
    const RankedElement e = rank_of(rank);
    if (job.rule == SelectRule::kKthValue && e.equal_keys > 1) {
      if (job.tied != nullptr) {  // the caller declines tied rows: no replay
        *job.tied = true;
        return;
      }
      return answer(kthvalue_by_quickselect(row, rank));
    }
    if constexpr (kFloat) {
      constexpr Bits kZeroKey = Bits(Bits(1) << (Format::key_bits - 1));
      if (job.whole && e.key == kZeroKey) *job.ambiguous |= has_both_zeros(row);
    }
    answer(e.position);
  };
  auto run = [&](const auto& key_at) {
    if constexpr (sizeof(Bits) <= 4) {
      if (n <= kShortRowMaskLength) {
        ShortRowKeys keys;
        keys.load(n, key_at);
        return decide([&keys] { return short_row_nans<Bits>(keys); },
                      [&keys](int64_t r) { return short_row_rank(keys, r); });
      }
    }
    decide([&row] { return scan_nans(row); },
           [&](int64_t r) { return rank_select<Bits>(n, r, key_at, job.row, job.rule == SelectRule::kKthValue); });
  };
  if (job.row.input_stride == 1) {
    const Bits* in = static_cast<const Bits*>(job.row.input);
    run([in](int64_t i) { return sort_key<Format, false>(in[i]); });
  } else {
    run([&row](int64_t i) { return row.key(i); });
  }
}

void select_row(const SelectJob& job) {
  with_key_format(job.row, [&job]<typename Format, bool kDescending>() {
    if constexpr (!kDescending) select_row_typed<Format>(job);
  });
}
