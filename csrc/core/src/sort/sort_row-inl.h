// One row of a sort, compiled once per ISA (included inside namespace kwker::sort_detail::<isa>).
//
// Algorithm. Elements become canonical keys (sort_keys.h), rebased to the row's smallest key, and are
// packed with their position (elements-inl.h).
//  - Rows whose keys are already in order (or in reverse order, without equal keys): every correct
//    sort agrees, the answer is written directly.
//  - Stable order: a counting sort when the row has few distinct keys, else an LSD radix sort
//    (radix-inl.h), both stable; short rows sort the packed elements as whole integers, which are
//    unique, so any correct sort gives the stable order.
//  - torch's unstable order (libstdc++'s std::sort on (value, index) pairs): when no two keys are
//    equal every correct sort gives the same permutation, so a radix result is returned once it
//    shows no equal neighbours; otherwise the introsort runs step for step (introsort-inl.h), but
//    only on its ranges that hold a tied key: a range of distinct keys is copied from the radix
//    result (TieGuide). Where equal keys are certain (a key range smaller than the row) or common
//    (long rows of 16-bit keys, or an earlier row of the same call had many) the whole introsort
//    runs without the radix attempt. Rows in order (or reverse order) with few equal keys replay
//    from the row itself (or its reversal), a sorted row; with many, Kwker declines them. Rows of
//    <= 16 elements: std::sort is an insertion sort, i.e. stable.
// Values are rebuilt from the keys where that is exact (no NaN, no zero in the row), else copied
// from the input by position. Cost: O(n) per radix digit; O(n log n) introsort. Memory: the buffers.

#include "elements-inl.h"
#include "radix-inl.h"
#include "heap-inl.h"
#include "introsort-inl.h"

// Rows of 16-bit keys (bfloat16, float16, int16) this long or longer are assumed to hold equal keys
// in torch's unstable order: at most 65536 keys, and real data bunches them.
inline constexpr int64_t kTiesAssumedLength = 16384;
// Up to this length a comparison sort beats the radix sort's fixed cost (256 counters per digit).
inline constexpr int64_t kShortRowLength = 256;

template <typename Bits>
inline Bits load_bits(const void* base, int64_t i) {
  Bits b;
  std::memcpy(&b, static_cast<const char*>(base) + i * static_cast<int64_t>(sizeof(Bits)), sizeof b);
  return b;
}

template <typename Format, bool kDescending>
struct Row {
  using Bits = typename Format::Bits;
  const RowJob& job;

  Bits key(int64_t i) const { return sort_key<Format, kDescending>(input(i)); }
  Bits input(int64_t i) const { return load_bits<Bits>(job.input, i * job.input_stride); }
};

// What one pass over a row's keys tells: their range.
struct KeyScan {
  uint64_t lo = ~uint64_t{0};
  uint64_t hi = 0;
};

template <typename Format, bool kDescending>
KeyScan scan_keys(const Row<Format, kDescending>& row) {
  using Bits = typename Format::Bits;
  Bits lo = Bits(~Bits(0)), hi = 0;
  auto visit = [&](Bits bits) {
    const Bits k = sort_key<Format, kDescending>(bits);
    lo = k < lo ? k : lo;
    hi = k > hi ? k : hi;
  };
  const int64_t n = row.job.n;
  if (row.job.input_stride == 1) {
    const Bits* in = static_cast<const Bits*>(row.job.input);
    for (int64_t i = 0; i < n; ++i) visit(in[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) visit(row.input(i));
  }
  return {lo, hi};
}

// Packs the row's elements into `out`; returns whether every value can be rebuilt from its key.
template <typename Format, bool kDescending>
bool fill_packed(const Row<Format, kDescending>& row, uint64_t lo, uint64_t* out) {
  using Bits = typename Format::Bits;
  // A count of the values that cannot be rebuilt, not a boolean AND: integer sums vectorise.
  int64_t not_invertible = 0;
  auto packed = [lo, &not_invertible](Bits bits, int64_t i) {
    not_invertible += !key_is_invertible<Format>(bits);
    return ((uint64_t{sort_key<Format, kDescending>(bits)} - lo) << 32) | static_cast<uint64_t>(i);
  };
  const int64_t n = row.job.n;  // a local: the stores below could otherwise alias job.n
  if (row.job.input_stride == 1) {
    const Bits* in = static_cast<const Bits*>(row.job.input);
    for (int64_t i = 0; i < n; ++i) out[i] = packed(in[i], i);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = packed(row.input(i), i);
  }
  return not_invertible == 0;
}

// The row's (key - lo, position) pairs into `out`: rows of 64-bit keys spanning 2^32 or more.
template <typename Format, bool kDescending>
void fill_wide(const Row<Format, kDescending>& row, uint64_t lo, WideElement* out) {
  const int64_t n = row.job.n;
  for (int64_t i = 0; i < n; ++i) out[i] = {row.key(i) - lo, static_cast<uint64_t>(i)};
}

// The row's elements in work buffer a, in torch's comparator order (by key, no tie-break), for a
// replay: packed when the row's key range fits 32 bits, else (key, position) pairs, each key less
// the row's least, lo. Calls f.template operator()<Ops>(elements, lo) with the matching Ops.
template <typename Format, bool kDescending, typename F>
void with_row_elements(const Row<Format, kDescending>& row, const F& f) {
  const KeyScan scan = scan_keys(row);
  if (scan.hi - scan.lo <= kLowHalf) {
    uint64_t* a = row.job.buffer_a;
    fill_packed(row, scan.lo, a);
    f.template operator()<PackedOps<PackedOrder::kByKey>>(a, scan.lo);
  } else if constexpr (Format::key_bits == 64) {
    auto* a = reinterpret_cast<WideElement*>(row.job.buffer_a);
    fill_wide(row, scan.lo, a);
    f.template operator()<WideOps>(a, scan.lo);
  }
}

// Writes indices and values of the sorted elements. `value_of(e)` gives an element's value bits.
template <typename Bits, typename Element, typename ValueOf, typename PositionOf>
void write_sorted(const RowJob& job, const Element* sorted, const ValueOf& value_of,
                  const PositionOf& position_of) {
  const int64_t n = job.n;  // a local: the stores below could otherwise alias job.n
  Bits* values = static_cast<Bits*>(job.values);
  int64_t* indices = job.indices;
  if (job.values_stride == 1 && job.indices_stride == 1) {
    for (int64_t i = 0; i < n; ++i) {
      indices[i] = position_of(sorted[i]);
      values[i] = value_of(sorted[i]);
    }
  } else {
    const int64_t vs = job.values_stride, is = job.indices_stride;
    for (int64_t i = 0; i < n; ++i) {
      indices[i * is] = position_of(sorted[i]);
      values[i * vs] = value_of(sorted[i]);
    }
  }
}

template <typename Format, bool kDescending, typename Ops>
void write_output(const Row<Format, kDescending>& row, const typename Ops::Element* sorted,
                  uint64_t lo, bool rebuild_values) {
  using Bits = typename Format::Bits;
  using Element = typename Ops::Element;
  auto position_of = [](const Element& e) { return static_cast<int64_t>(Ops::position(e)); };
  if constexpr (std::is_same_v<Element, uint64_t>) {
    if (rebuild_values) {
      auto rebuilt = [lo](uint64_t e) { return bits_of_key<Format, kDescending>(Bits((e >> 32) + lo)); };
      return write_sorted<Bits>(row.job, sorted, rebuilt, position_of);
    }
  }
  auto copied = [&row](const Element& e) { return row.input(static_cast<int64_t>(Ops::position(e))); };
  write_sorted<Bits>(row.job, sorted, copied, position_of);
}

// ---- shortcuts that every correct sort agrees with -----------------------------------------------

// Which ways the keys of a row run. Strictly increasing keys (non-decreasing, for the stable order)
// make the identity the answer; strictly decreasing ones the reversal.
struct Monotony {
  bool non_decreasing = true, increasing = true, non_increasing = true, decreasing = true;
  int64_t equal_pairs = 0;  // neighbours with equal keys, in the blocks checked
  bool any() const { return non_decreasing || non_increasing; }
};

// Checked a block at a time, so each block vectorises and a shuffled row stops after one block.
template <typename Format, bool kDescending, typename KeyAt>
Monotony monotony_of(int64_t n, const KeyAt& key_at) {
  using Bits = typename Format::Bits;
  constexpr int64_t kBlock = 256;
  Monotony m;
  for (int64_t start = 1; start < n && m.any(); start += kBlock) {
    const int64_t end = std::min(n, start + kBlock);
    // Counts of the pairs that break each property: integer sums vectorise, boolean ANDs do not.
    int64_t falls = 0, rises = 0, equals = 0;
    for (int64_t i = start; i < end; ++i) {
      const Bits k = key_at(i), previous = key_at(i - 1);
      falls += k < previous;
      rises += k > previous;
      equals += k == previous;
    }
    m = {m.non_decreasing && falls == 0, m.increasing && falls == 0 && equals == 0,
         m.non_increasing && rises == 0, m.decreasing && rises == 0 && equals == 0, m.equal_pairs + equals};
  }
  return m;
}

template <typename Format, bool kDescending>
Monotony monotony(const Row<Format, kDescending>& row) {
  using Bits = typename Format::Bits;
  if (row.job.input_stride == 1) {
    const Bits* in = static_cast<const Bits*>(row.job.input);
    return monotony_of<Format, kDescending>(row.job.n, [in](int64_t i) { return sort_key<Format, kDescending>(in[i]); });
  }
  return monotony_of<Format, kDescending>(row.job.n, [&row](int64_t i) { return row.key(i); });
}

enum class Monotonic { kIncreasing, kDecreasing };

template <typename Format, bool kDescending>
void write_monotonic(const Row<Format, kDescending>& row, Monotonic order) {
  using Bits = typename Format::Bits;
  const RowJob& job = row.job;
  const int64_t n = job.n, vs = job.values_stride, is = job.indices_stride;
  Bits* values = static_cast<Bits*>(job.values);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t from = order == Monotonic::kIncreasing ? i : n - 1 - i;
    job.indices[i * is] = from;
    values[i * vs] = row.input(from);
  }
}

// Counting sort for the stable order of rows whose keys take at most this many values (their
// counters stay in the L2 cache; bench: token-ids-i32-1m) and at most 4 per element (the counters
// live in work buffer b, 16 bytes per element).
inline constexpr uint64_t kCountingSortMaxKeys = uint64_t{1} << 17;

// The row is cut into kParts parts of `part` elements (the last takes the rest), each with its own
// counters (next[p * keys + k]), and the count and scatter loops step through the parts side by
// side: in bunched data equal keys follow each other, and with one set of counters each increment
// would wait for the one before. Counters run key-major, part-minor, so the order stays stable.
template <int kParts, typename Format, bool kDescending>
void counting_sort_in_parts(const Row<Format, kDescending>& caller_row, const KeyScan& scan) {
  using Bits = typename Format::Bits;
  // A local copy of the job: the index stores could otherwise alias its fields, which every
  // element would then reload.
  const RowJob job = caller_row.job;
  const Row<Format, kDescending> row{job};
  const int64_t n = job.n, vs = job.values_stride, is = job.indices_stride, part = n / kParts;
  const uint64_t keys = scan.hi - scan.lo + 1, lo = scan.lo;
  uint32_t* next = reinterpret_cast<uint32_t*>(job.buffer_b);
  for (uint64_t k = 0; k < kParts * keys; ++k) next[k] = 0;
  // Calls f(p, position) for every element, the parts side by side, then the last part's rest.
  auto for_each_in_parts = [&](const auto& f) {
    for (int64_t i = 0; i < part; ++i) {
      for (int p = 0; p < kParts; ++p) f(p, p * part + i);
    }
    for (int64_t i = kParts * part; i < n; ++i) f(kParts - 1, i);
  };
  int64_t not_invertible = 0;  // a count, not a boolean AND: integer sums vectorise
  for_each_in_parts([&](int p, int64_t i) {
    const Bits bits = row.input(i);
    ++next[p * keys + (sort_key<Format, kDescending>(bits) - lo)];
    not_invertible += !key_is_invertible<Format>(bits);
  });
  uint32_t offset = 0;
  for (uint64_t k = 0; k < keys; ++k) {
    for (int p = 0; p < kParts; ++p) {
      const uint32_t c = next[p * keys + k];
      next[p * keys + k] = offset;
      offset += c;
    }
  }
  for_each_in_parts([&](int p, int64_t i) {
    job.indices[int64_t{next[p * keys + (row.key(i) - lo)]++} * is] = i;
  });
  Bits* values = static_cast<Bits*>(job.values);
  if (not_invertible == 0) {  // the last part's counter of key k is now where k's run ends
    const uint32_t* run_end = next + (kParts - 1) * keys;
    int64_t j = 0;
    for (uint64_t k = 0; k < keys; ++k) {
      const Bits v = bits_of_key<Format, kDescending>(Bits(k + lo));
      for (; j < run_end[k]; ++j) values[j * vs] = v;
    }
  } else {
    for (int64_t j = 0; j < n; ++j) values[j * vs] = row.input(job.indices[j * is]);
  }
}

// Rows of at most this many keys are counted in four parts: with more, the parts' 4 * keys write
// fronts no longer stay in the cache (bench: percentile-clip-u8 and length-bucket-1m-*).
inline constexpr uint64_t kPartedCountingMaxKeys = 512;

// Four parts need 4 * keys counters of 4 bytes in work buffer b's 16 bytes per element: keys <= n.
template <typename Format, bool kDescending>
void counting_sort(const Row<Format, kDescending>& row, const KeyScan& scan) {
  const uint64_t keys = scan.hi - scan.lo + 1;
  if (keys <= kPartedCountingMaxKeys && keys <= static_cast<uint64_t>(row.job.n)) {
    return counting_sort_in_parts<4>(row, scan);
  }
  counting_sort_in_parts<1>(row, scan);
}

// ---- torch's unstable order ---------------------------------------------------------------------

// Rows of 16-bit keys this long or longer are assumed to hold equal keys (most such rows must), so
// neither their key range nor a radix attempt is worth its pass.
template <typename Format>
bool ties_assumed(const RowJob& job) {
  return Format::key_bits <= 16 && job.ties == TieOrder::kIntrosort && job.n >= kTiesAssumedLength;
}

struct Ties {
  int64_t marked;  // elements whose key the row holds more than once
  int64_t runs;    // keys the row holds more than once
};

// Marks, in `elements` (the row's elements in input order), every element whose key the sorted row
// holds more than once.
template <typename Ops, typename E>
Ties mark_tied(const E* sorted, int64_t n, E* elements) {
  int64_t marked = 0, runs = 0;
  bool previous_tied = false;  // whether the pair before the current one is tied
  auto mark = [&](const E& e) {
    E& element = elements[Ops::position(e)];
    if (Ops::mark_bits(element) == 0) {
      Ops::set_mark(element, true);
      ++marked;
    }
  };
  // 64 neighbour pairs at a time: a vectorised count finds the blocks that hold any tie.
  for (int64_t start = 1; start < n; start += 64) {
    const int64_t end = n - start < 64 ? n : start + 64;
    int64_t ties = 0;
    for (int64_t i = start; i < end; ++i) ties += !Ops::less(sorted[i - 1], sorted[i]);
    if (ties == 0) {
      previous_tied = false;
      continue;
    }
    for (int64_t i = start; i < end; ++i) {
      const bool tied = !Ops::less(sorted[i - 1], sorted[i]);
      runs += tied && !previous_tied;
      previous_tied = tied;
      if (!tied) continue;
      mark(sorted[i - 1]);
      mark(sorted[i]);
    }
  }
  return {marked, runs};
}

// Settles the introsort's ranges that hold no marked (tied) element: all their keys are distinct,
// so every correct sort orders such a range alike, and the range, being a block of the sorted row,
// holds what the radix result holds at the same place. Only the ranges on the way to a tied key are
// replayed, step for step.
template <typename Ops>
struct TieGuide {
  using E = typename Ops::Element;
  E* replay;
  const E* sorted;
  bool settled(E* first, E* last) const {
    const int64_t n = last - first;
    if (any_marked<Ops>(first, n)) return false;
    const E* from = sorted + (first - replay);
    for (int64_t i = 0; i < n; ++i) first[i] = from[i];
    return true;
  }
};

// A row of 3 to 16 distinct keys per 16 elements spends most of the replay on the way to its ties:
// when this share of its elements is tied, spread over more than this share of tied keys, later
// rows of the call skip the radix attempt. Few tied keys cost the replay little however many
// elements hold them: only the ranges on the way to each run, and the runs themselves, are
// replayed (bench: dropout-activations-signed-zeros, whose ties are the zeros).
inline constexpr int64_t kManyTiesShare = 16;
inline constexpr int64_t kManyTiedKeysShare = 1024;

// How the introsort's result is reached. kRadixFirst: a radix sort is tried first; rows without
// equal keys are done with it, and the others replay only the introsort's ranges that hold ties
// (TieGuide). kInOrder / kReversed: the row's keys never fall / never rise, so the row (or its
// reversal) is a sorted row, and the replay starts from it. kFull: the whole introsort.
enum class Route { kFull, kRadixFirst, kInOrder, kReversed };

// torch's unstable order of the row's elements, which work buffer a holds in input order (as
// `fill(buffer)` writes them); b is a second buffer of n elements. Returns the buffer that holds
// the result.
template <typename Ops, typename E, typename Fill>
const E* introsort_order(const RowJob& job, E* a, E* b, int key_bits, Route route, const Fill& fill) {
  const int64_t n = job.n;
  if (route == Route::kRadixFirst && __atomic_load_n(job.many_ties_seen, __ATOMIC_RELAXED)) route = Route::kFull;
  if (route == Route::kFull || n > kMaxMarkedRowLength) {
    libstdcxx_introsort<Ops>(a, n);
    return a;
  }
  const E* sorted;
  if (route == Route::kRadixFirst) {
    sorted = radix_sort<Ops>(a, b, n, key_bits);
    if (!has_equal_neighbours<Ops>(sorted, n)) return sorted;
  } else {
    for (int64_t i = 0; i < n; ++i) b[i] = a[route == Route::kReversed ? n - 1 - i : i];
    sorted = b;
  }
  E* replay = sorted == a ? b : a;
  if (route == Route::kRadixFirst) fill(replay);
  const Ties ties = mark_tied<Ops>(sorted, n, replay);
  if (ties.marked * kManyTiesShare > n && ties.runs * kManyTiedKeysShare > n) {
    __atomic_store_n(job.many_ties_seen, 1, __ATOMIC_RELAXED);
  }
  libstdcxx_introsort<Ops>(replay, n, TieGuide<Ops>{replay, sorted});
  for (int64_t i = 0; i < n; ++i) Ops::set_mark(replay[i], false);
  return replay;
}

template <typename Format, bool kDescending>
void sort_packed(const Row<Format, kDescending>& row, const KeyScan& scan, Route monotonic_route) {
  using ByKey = PackedOps<PackedOrder::kByKey>;
  const RowJob& job = row.job;
  const int64_t n = job.n;
  const uint64_t range = scan.hi - scan.lo;

  if (n > kShortRowLength && job.ties == TieOrder::kStable && range < kCountingSortMaxKeys &&
      range < 4 * static_cast<uint64_t>(n)) {
    return counting_sort(row, scan);
  }
  uint64_t* a = job.buffer_a;
  const bool rebuild = fill_packed(row, scan.lo, a);
  auto done = [&](const uint64_t* sorted) { write_output<Format, kDescending, ByKey>(row, sorted, scan.lo, rebuild); };

  if (n <= kIntrosortThreshold) {
    ByKey::sort_leaf(a, a + n);
    return done(a);
  }
  const int key_bits = key_bits_for_range(range);
  if (job.ties == TieOrder::kStable) {
    if (n <= kShortRowLength) {
      libstdcxx_introsort<PackedOps<PackedOrder::kByElement>>(a, n);
      return done(a);
    }
    return done(radix_sort<ByKey>(a, job.buffer_b, n, key_bits));
  }
  const bool ties_certain = range + 1 < static_cast<uint64_t>(n) || ties_assumed<Format>(job);
  const Route route = monotonic_route != Route::kFull ? monotonic_route
                      : !ties_certain && n > kShortRowLength ? Route::kRadixFirst : Route::kFull;
  done(introsort_order<ByKey>(job, a, job.buffer_b, key_bits, route,
                              [&](uint64_t* elements) { fill_packed(row, scan.lo, elements); }));
}

// The stable order of a row of 64-bit keys spanning 2^32 or more whose key - lo and position fit 64
// bits together (ShiftedOps): a radix sort of 8-byte elements, half the memory traffic of pairs.
template <typename Format, bool kDescending>
void sort_shifted(const Row<Format, kDescending>& row, uint64_t lo, int key_bits, int shift) {
  using Bits = typename Format::Bits;
  const RowJob& job = row.job;
  const int64_t n = job.n;
  uint64_t* a = job.buffer_a;
  int64_t not_invertible = 0;  // a count, not a boolean AND: integer sums vectorise
  for (int64_t i = 0; i < n; ++i) {
    const Bits bits = row.input(i);
    not_invertible += !key_is_invertible<Format>(bits);
    a[i] = ((uint64_t{sort_key<Format, kDescending>(bits)} - lo) << shift) | static_cast<uint64_t>(i);
  }
  const uint64_t* sorted = radix_sort<ShiftedOps>(a, job.buffer_b, n, key_bits, shift);
  const uint64_t position_mask = (uint64_t{1} << shift) - 1;
  auto position_of = [position_mask](uint64_t e) { return static_cast<int64_t>(e & position_mask); };
  if (not_invertible == 0) {
    auto rebuilt = [lo, shift](uint64_t e) { return bits_of_key<Format, kDescending>(Bits((e >> shift) + lo)); };
    return write_sorted<Bits>(job, sorted, rebuilt, position_of);
  }
  auto copied = [&row, position_mask](uint64_t e) { return row.input(static_cast<int64_t>(e & position_mask)); };
  write_sorted<Bits>(job, sorted, copied, position_of);
}

// 64-bit keys spanning 2^32 or more: (key - lo, position) pairs.
template <typename Format, bool kDescending>
void sort_wide(const Row<Format, kDescending>& row, const KeyScan& scan, Route monotonic_route) {
  const RowJob& job = row.job;
  const int64_t n = job.n;
  const int key_bits = key_bits_for_range(scan.hi - scan.lo);
  const int shift = key_bits_for_range(static_cast<uint64_t>(n - 1));
  if (job.ties == TieOrder::kStable && n > kShortRowLength && key_bits + shift <= 64) {
    return sort_shifted(row, scan.lo, key_bits, shift);
  }
  auto* a = reinterpret_cast<WideElement*>(job.buffer_a);
  auto* b = reinterpret_cast<WideElement*>(job.buffer_b);
  fill_wide(row, scan.lo, a);
  auto done = [&](const WideElement* sorted) { write_output<Format, kDescending, WideOps>(row, sorted, 0, false); };
  if (n <= kIntrosortThreshold) {
    WideOps::sort_leaf(a, a + n);
    return done(a);
  }
  if (job.ties == TieOrder::kStable) return done(radix_sort<WideOps>(a, b, n, key_bits));
  done(introsort_order<WideOps>(job, a, b, key_bits, monotonic_route != Route::kFull ? monotonic_route : Route::kRadixFirst,
                                [&](WideElement* elements) { fill_wide(row, scan.lo, elements); }));
}

// Rows in order (or reverse order) but with equal keys, in torch's unstable order. With few equal
// neighbours the introsort is replayed from the row itself (or its reversal), a sorted row: only
// the ranges on the way to the ties are partitioned. With more, libstdc++'s introsort, which meets
// only predictable branches on such rows, is as fast as that, and Kwker declines them.
inline constexpr int64_t kMonotonicFewTiesShare = 4096;

inline bool many_monotonic_ties(const RowJob& job, const Monotony& m) {
  return m.equal_pairs * kMonotonicFewTiesShare > job.n;
}

inline Route monotonic_route(const RowJob& job, const Monotony& m) {
  if (job.ties != TieOrder::kIntrosort || many_monotonic_ties(job, m)) return Route::kFull;
  if (m.non_decreasing) return Route::kInOrder;
  return m.non_increasing ? Route::kReversed : Route::kFull;
}

template <typename Format, bool kDescending>
void sort_row_typed(const RowJob& job) {
  const Row<Format, kDescending> row{job};
  if (job.n == 0) return;
  // Rows assumed to hold ties go straight to the introsort, which needs no key range: the full
  // range of their (at most 16-bit) keys stands in for a scan.
  const KeyScan scan = ties_assumed<Format>(job) ? KeyScan{0, (1u << (Format::key_bits % 32)) - 1u} : scan_keys(row);
  Route route = Route::kFull;  // kFull: not monotonic (sort_packed and sort_wide pick the route)
  if (job.n > kShortRowLength) {
    const Monotony m = monotony(row);
    if (job.ties == TieOrder::kStable ? m.non_decreasing : m.increasing) {
      return write_monotonic(row, Monotonic::kIncreasing);
    }
    if (m.decreasing) return write_monotonic(row, Monotonic::kDecreasing);
    route = monotonic_route(job, m);
  }
  if (scan.hi - scan.lo <= kLowHalf) {
    sort_packed(row, scan, route);
  } else if constexpr (Format::key_bits == 64) {
    sort_wide(row, scan, route);
  }
}

// Rows in order (or reverse order) with many equal keys, in torch's unstable order (see
// monotonic_route).
template <typename Format, bool kDescending>
bool declines_typed(const RowJob& job) {
  if (job.ties != TieOrder::kIntrosort || job.n <= kShortRowLength) return false;
  const Monotony m = monotony(Row<Format, kDescending>{job});
  return m.any() && !m.increasing && !m.decreasing && many_monotonic_ties(job, m);
}

// Calls f.template operator()<Format, kDescending>() for the job's dtype and order: the one place
// that maps them to a key format.
template <DType D, typename F>
decltype(auto) with_order(const RowJob& job, const F& f) {
  if (job.order == SortOrder::kDescending) return f.template operator()<KeyFormatOf<D>, true>();
  return f.template operator()<KeyFormatOf<D>, false>();
}

template <typename F>
decltype(auto) with_key_format(const RowJob& job, const F& f) {
  switch (job.dtype) {
    case DType::kBool: return with_order<DType::kBool>(job, f);
    case DType::kUInt8: return with_order<DType::kUInt8>(job, f);
    case DType::kInt8: return with_order<DType::kInt8>(job, f);
    case DType::kInt16: return with_order<DType::kInt16>(job, f);
    case DType::kInt32: return with_order<DType::kInt32>(job, f);
    case DType::kInt64: return with_order<DType::kInt64>(job, f);
    case DType::kFloat16: return with_order<DType::kFloat16>(job, f);
    case DType::kBFloat16: return with_order<DType::kBFloat16>(job, f);
    case DType::kFloat32: return with_order<DType::kFloat32>(job, f);
    case DType::kFloat64: break;
  }
  return with_order<DType::kFloat64>(job, f);
}

bool declines(const RowJob& job) {
  return with_key_format(job, [&job]<typename Format, bool kDescending>() {
    return declines_typed<Format, kDescending>(job);
  });
}

void sort_row(const RowJob& job) {
  with_key_format(job, [&job]<typename Format, bool kDescending>() {
    sort_row_typed<Format, kDescending>(job);
  });
}
