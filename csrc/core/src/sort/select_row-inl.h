// One row of a kthvalue, median or nanmedian (kwker/select.h), compiled once per ISA (included inside
// namespace kwker::sort_detail::<isa>, after sort_row-inl.h).
//
// Algorithm. Every rule asks for the element of some rank r in the order of canonical keys
// (sort_keys.h: torch's comparisons), positions breaking ties. That element is found without
// sorting:
//  - Long rows: an evenly spaced sample of s keys gives two keys that bracket rank r with high
//    probability; one pass keeps every element between them, in row order, and counts those below.
//    If the bracket missed, the pass is redone keeping everything.
//  - The pass stores the bare keys (uint32 for keys of up to 32 bits, uint64 for 64-bit ones) with
//    vector compares (keep_between) and their positions, and counts the NaNs on the way; a vector
//    quickselect on the kept keys (select_keys-inl.h) gives the key K of rank r with how many kept
//    keys lie below it, which says how many elements with key K precede the answer in
//    (key, position) order: the answer is the element with key K at that place in row order.
//  - Short rows of keys of up to 32 bits (up to 64: short_row-inl.h) rank every element by counting.
// Which element torch picks, and why the above is it:
//  - median: a total order (value, then index), so the element of rank (n - 1) / 2 is unique; a NaN
//    row gives its first NaN.
//  - nanmedian: the same among the numbers; a row of NaNs only gives what libstdc++'s nth_element
//    leaves at the front of equal elements: replayed (introsort-inl.h).
//  - kthvalue: torch's quickselect has no tie-break. When K is the key of one element only, every
//    correct selection returns that element; otherwise torch's quickselect is replayed step for step.
// Cost: one pass over the row plus O(s + n / sqrt(s)) for the sample and candidates.

// Rows shorter than this keep every element as a candidate: the sample costs more than it saves.
inline constexpr int64_t kSampledMinLength = 2048;

struct RankedElement {
  uint64_t key;
  int64_t position;
  int64_t equal_keys;  // elements of the row with this key
};

// Which ranks of an evenly spaced sample of s from a row of n bracket rank r of the row: 2 sqrt(s)
// (four standard deviations) either side of where it falls. lo < 0 or hi >= s: open at that end.
struct SampleRanks {
  int64_t lo, hi;
};

inline SampleRanks bracket_ranks(int64_t n, int64_t s, int64_t r) {
  const int64_t spread = static_cast<int64_t>(2 * std::sqrt(static_cast<double>(s))) + 1;
  const int64_t at = r * s / n;
  return {at - spread, at + spread};
}

// The bracket of a row of n keys for the rank `rank_for(NaNs)` (the rank may depend on how many NaNs
// the row holds, estimated from the sample's). `sample` holds s + 16 keys, `scratch` 2 s + 32.
template <typename Bits, typename KeyAt, typename RankFor, typename K>
Bracket bracket_keys(int64_t n, const KeyAt& key_at, const RankFor& rank_for, K* sample, K* scratch) {
  constexpr auto kTopKey = static_cast<K>(static_cast<Bits>(~Bits(0)));
  Bracket b{0, kTopKey};
  if (n < kSampledMinLength) return b;
  const int64_t s = sample_keys(n, key_at, sample);
  int64_t top = 0;
  for (int64_t j = 0; j < s; ++j) top += sample[j] == kTopKey;
  const SampleRanks at = bracket_ranks(n, s, rank_for(top * n / s));
  if (at.hi < s) b.hi = select_key(sample, s, at.hi, scratch).key;
  if (at.lo >= 0) b.lo = select_key(sample, s, at.lo, scratch).key;
  return b;
}

// The element of rank r among the kept keys, which hold it (kept.holds(r)). `scratch` as for
// select_key.
template <typename K>
RankedElement rank_among(const KeptKeys<K>& kept, int64_t r, K* scratch) {
  const KeyRank<K> k = select_key(kept.keys, kept.count, r - kept.below, scratch);
  // Every key equal to the answer's is kept; the answer is the one of them whose place in row order
  // is its rank's excess over the keys below it.
  const int64_t at = find_equal(kept.keys, kept.count, k.key, r - kept.below - k.less);
  return {k.key, kept.positions == nullptr ? at : static_cast<int64_t>(kept.positions[at]), k.equal};
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
    // Its partition, literally:
    //   i = lo + 1, j = hi; while (true) { do ++i while (a[i] < pivot); do --j while (pivot < a[j]);
    //                                      if (j < i) break; swap(a[i], a[j]); }
    // makes the swaps of libstdc++'s (introsort-inl.h) on a[lo + 2, hi), guarded by a[lo + 1] <= pivot
    // <= a[hi], and ends with j just below the cut; where the fronts met, i just above it.
    const E pivot = a[lo];
    const Cut<E> cut = unguarded_partition<Ops>(a + lo + 2, a + hi, pivot);
    const int64_t j = cut.at - a - 1, i = j + 1 + (cut.met ? 1 : 0);
    swap_values(a[lo], a[j]);
    if (j <= t) lo = i;
    if (j >= t) hi = j - 1;
  }
}

// torch's kthvalue position for a row with equal keys at rank t: its quickselect, replayed.
template <typename Format>
int64_t kthvalue_by_quickselect(const Row<Format, false>& row, int64_t t) {
  int64_t position = 0;
  with_row_elements(row, [&]<typename Ops>(auto* a, uint64_t) {
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
    if (job.rule == SelectRule::kKthValue && e.equal_keys > 1) return answer(kthvalue_by_quickselect(row, rank));
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
        keys.load(row);
        return decide([&keys] { return short_row_nans<Bits>(keys); },
                      [&keys](int64_t r) { return short_row_rank(keys, r); });
      }
    }
    // One pass over the row keeps the keys in a bracket of the rank and counts its NaNs.
    using K = BareKey<Bits>;
    constexpr auto kTopKey = static_cast<K>(static_cast<Bits>(~Bits(0)));
    auto* keys = reinterpret_cast<K*>(job.row.buffer_a);
    auto* scratch = reinterpret_cast<K*>(job.row.buffer_b);
    KeptKeys<K> kept{};  // keys == nullptr until the pass has run
    auto pass = [&](const auto& rank_for) {
      kept = keep_keys<Bits>(n, key_at, bracket_keys<Bits>(n, key_at, rank_for, keys, scratch), keys);
    };
    auto nans = [&] {
      pass([&](int64_t count) { return job.rule == SelectRule::kNanMedian ? (n - count - 1) / 2 : (n - 1) / 2; });
      NanScan scan{kept.top_keys, -1};
      if (job.rule == SelectRule::kMedian && scan.count != 0) scan.first = scan_nans(row).first;
      return scan;
    };
    auto rank = [&](int64_t r) {
      if (kept.keys == nullptr) pass([r](int64_t) { return r; });
      if (!kept.holds(r)) kept = keep_keys<Bits>(n, key_at, Bracket{0, kTopKey}, keys);  // the bracket missed
      return rank_among(kept, r, scratch);
    };
    decide(nans, rank);
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
