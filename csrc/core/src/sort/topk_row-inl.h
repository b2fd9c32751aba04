// One row of a topk, compiled once per ISA (included inside namespace kwker::sort_detail::<isa>,
// after sort_row-inl.h).
//
// torch (TopKImpl.h) copies the row into (value, index) pairs and, with its comparator (NaN above
// every number, no tie-break), runs std::partial_sort of the first k when k * 64 <= n, else
// std::nth_element at k - 1 and then, if sorted, std::sort of the first k - 1. On canonical keys
// (sort_keys.h; largest = descending keys) that comparator is key(x) < key(y), and Kwker makes the
// same moves as libstdc++:
//  - partial_sort: libstdc++'s heap select keeps a heap of k elements and replaces its top by each
//    later element whose key is less than the top's. Kwker runs that heap (heap-inl.h) but first
//    compares a block of 64 elements with the top at once (one vector compare per register): the
//    top only goes down, so an element above it then never enters, and only the others are offered
//    to the heap, in row order, as libstdc++ offers them. Then libstdc++'s sort_heap. Random rows
//    touch the heap about k log(n / k) times.
//  - nth_element: the row's packed elements go through libstdc++'s introselect, then its introsort,
//    replayed step for step (introsort-inl.h).
//  - Either regime, when the k + 1 smallest keys are distinct (and sorted, for nth_element): the
//    answer does not depend on the algorithm, and a threshold from a sample finds it
//    (topk_by_threshold). Tried for 32-bit keys and float64 only: 16-bit and int64 rows tie there
//    too often.
// Values are copied from the input by index, which is what torch's round trip through its
// accumulate type leaves, except bfloat16 NaNs: that round trip makes every one of them 0x7FC0.

inline constexpr int64_t kTopKBlock = 64;
// torch's switch between partial_sort and nth_element: partial_sort when k * 64 <= n.
inline constexpr int64_t kTopKPartialSortRatio = 64;

template <typename Format>
typename Format::Bits topk_value(typename Format::Bits bits) {
  if constexpr (std::is_same_v<Format, KeyFormatOf<DType::kBFloat16>>) {
    if ((bits & 0x7FFF) > 0x7F80) return 0x7FC0;
  }
  return bits;
}

// Which elements of a block of kTopKBlock from position i may have a key <= `threshold`: bit j for
// element i + j. The test may set a bit wrongly (that element is then compared by key) but never
// clears one wrongly. By keys, for any input:
template <typename Format, typename KeyAt>
struct KeysBlockTest {
  const KeyAt& key_at;
  uint64_t operator()(int64_t i, typename Format::Bits threshold) const {
    using Bits = typename Format::Bits;
    Bits keys[kTopKBlock];
    for (int j = 0; j < kTopKBlock; ++j) keys[j] = key_at(i + j);
    int at_most = 0;  // most blocks hold none: first a count, which vectorises
    for (int j = 0; j < kTopKBlock; ++j) at_most += keys[j] <= threshold;
    if (at_most == 0) return 0;
    uint64_t bits = 0;
    for (int j = 0; j < kTopKBlock; ++j) bits |= uint64_t{keys[j] <= threshold} << j;
    return bits;
  }
};

// By values, for contiguous rows of a type the CPU compares natively: one compare per element
// against the threshold's value. A NaN element passes, and so does everything when the threshold
// is NaN's key; +-0.0 compare equal, as their keys do.
template <typename Format> struct NativeValue { using type = void; };
template <> struct NativeValue<KeyFormatOf<DType::kUInt8>> { using type = uint8_t; };
template <> struct NativeValue<KeyFormatOf<DType::kInt8>> { using type = int8_t; };
template <> struct NativeValue<KeyFormatOf<DType::kInt16>> { using type = int16_t; };
template <> struct NativeValue<KeyFormatOf<DType::kInt32>> { using type = int32_t; };
template <> struct NativeValue<KeyFormatOf<DType::kInt64>> { using type = int64_t; };
template <> struct NativeValue<KeyFormatOf<DType::kFloat32>> { using type = float; };
template <> struct NativeValue<KeyFormatOf<DType::kFloat64>> { using type = double; };

template <typename Format, bool kDescending>
struct ValuesBlockTest {
  using Value = typename NativeValue<Format>::type;
  const Value* in;
  uint64_t operator()(int64_t i, typename Format::Bits threshold) const {
    Value t;
    const auto bits = bits_of_key<Format, kDescending>(threshold);
    std::memcpy(&t, &bits, sizeof t);
    // Descending keys (largest): key(x) <= key(t) when x >= t; ascending: when x <= t.
    if constexpr (std::is_floating_point_v<Value>) {
      return not_after_mask64<kDescending>(in + i, t);
    } else {
      auto passes = [&](int j) { return kDescending ? !(in[i + j] < t) : !(in[i + j] > t); };
      int passing = 0;  // most blocks hold none: first a count, which vectorises
      for (int j = 0; j < kTopKBlock; ++j) passing += passes(j);
      if (passing == 0) return 0;
      uint64_t mask = 0;
      for (int j = 0; j < kTopKBlock; ++j) mask |= uint64_t{passes(j)} << j;
      return mask;
    }
  }
};

// By values widened to float, for contiguous bfloat16 rows (a bfloat16's bits are a float's top half):
// the same compares as for float.
template <bool kDescending>
struct BFloat16BlockTest {
  const uint16_t* in;
  uint64_t operator()(int64_t i, uint16_t threshold) const {
    const uint32_t t_bits = uint32_t{bits_of_key<KeyFormatOf<DType::kBFloat16>, kDescending>(threshold)} << 16;
    float t;
    std::memcpy(&t, &t_bits, sizeof t);
    alignas(64) uint32_t wide[kTopKBlock];  // stored and loaded as whole vectors
    for (int j = 0; j < kTopKBlock; ++j) wide[j] = uint32_t{in[i + j]} << 16;
    float values[kTopKBlock];
    std::memcpy(values, wide, sizeof values);
    return not_after_mask64<kDescending>(values, t);
  }
};

// libstdc++'s __heap_select of the k smallest keys of the row into `heap`, then its __sort_heap.
template <typename Format, typename KeyAt, typename BlockTest>
void topk_by_heap(int64_t n, int64_t k, const KeyAt& key_at, const BlockTest& may_hold, WideElement* heap) {
  using Bits = typename Format::Bits;
  for (int64_t i = 0; i < k; ++i) heap[i] = {key_at(i), static_cast<uint64_t>(i)};
  make_heap<WideOps>(heap, k);
  auto offer = [heap, k](Bits key, int64_t i) {
    if (key < heap[0].key) replace_top<WideOps>(heap, k, WideElement{key, static_cast<uint64_t>(i)});
  };
  int64_t i = k;
  for (; i + kTopKBlock <= n; i += kTopKBlock) {
    // The top only goes down, so an element whose key is above the top's when its block begins is
    // never offered with success: only the test's candidates are offered, in row order.
    for (uint64_t m = may_hold(i, static_cast<Bits>(heap[0].key)); m != 0; m &= m - 1) {
      const int64_t at = i + __builtin_ctzll(m);
      offer(key_at(at), at);
    }
  }
  for (; i < n; ++i) offer(key_at(i), i);
  sort_heap<WideOps>(heap, k);
}

// The k selected elements (`selected`, in output order; an element's key is Ops::radix_key + lo) to
// the job's outputs. A value is rebuilt from its key (bits_of_key) wherever the key names one value,
// every key but NaN's and zero's, and read from the input only for those: the positions are in no
// order, and reading each is a cache miss in long rows.
template <typename Format, bool kDescending, typename Ops>
void write_topk(const TopKJob& job, const Row<Format, kDescending>& row, const typename Ops::Element* selected,
                uint64_t lo = 0) {
  using Bits = typename Format::Bits;
  constexpr bool kFloat = Format::kind == KeyKind::kFloat;
  const Bits nan_key = sort_key<Format, kDescending>(Bits(Format::inf_bits | 1));
  const Bits zero_key = sort_key<Format, kDescending>(Bits{0});
  Bits* values = static_cast<Bits*>(job.row.values);
  const int64_t k = job.k, vs = job.row.values_stride, is = job.row.indices_stride;
  for (int64_t i = 0; i < k; ++i) {
    const auto position = static_cast<int64_t>(Ops::position(selected[i]));
    const auto key = static_cast<Bits>(Ops::radix_key(selected[i]) + lo);
    job.row.indices[i * is] = position;
    values[i * vs] = !kFloat || (key != nan_key && key != zero_key) ? bits_of_key<Format, kDescending>(key)
                                                                    : topk_value<Format>(row.input(position));
  }
}

// When the k + 1 smallest keys of a row are distinct, every correct selection returns the same
// answer: the k smallest, in increasing order (which both of torch's regimes give when sorted). Kwker
// looks for that case first, for 32-bit keys and float64 on rows longer than the short ones: the key
// of a sample rank safely above where the (k+1)-th smallest falls is a threshold; one pass keeps
// the keys at most that, with their positions (a block of 64 tested at once, as for the heap), and
// a vector quickselect among them gives the (k+1)-th smallest key K. Exactly k kept keys below K, all
// distinct, are the answer, sorted by (key, position). Returns false, having written
// nothing, when the threshold kept k or fewer keys twice (the sample misled) or two of the k + 1
// smallest keys are equal; then libstdc++'s moves are replayed.
// The sample is taken in runs of consecutive keys (sample_key_runs): a row read from memory costs
// a cache line per run. Compared with a heap whose threshold starts open (timed on the bench corpus,
// AMD EPYC AVX2): k 50 of 32000 rows 5.1x -> 8-12x, k 16 of 2048 2.1x -> 3.8-4.3x, k 1000 of 1M
// 4.7x -> 22x, k 10 of 20000 7.2x -> 8.4-9.0x.
template <typename Format, bool kDescending, typename KeyAt, typename BlockTest>
bool topk_by_threshold(const TopKJob& job, const Row<Format, kDescending>& row, const KeyAt& key_at,
                       const BlockTest& may_hold) {
  using Bits = typename Format::Bits;
  using K = BareKey<Bits>;
  const int64_t n = job.row.n, k = job.k;
  auto* keys = reinterpret_cast<K*>(job.row.buffer_a);
  auto* positions = reinterpret_cast<uint32_t*>(keys + n + kTopKBlock);
  auto* scratch = reinterpret_cast<K*>(job.row.buffer_b);
  int64_t count = 0;
  // Sample elements expected below the (k+1)-th smallest, and a rank three standard deviations above;
  // where that kept k or fewer keys, once more at twice the rank. Few sampled keys fall below the
  // boundary (about 10 for k 300 of 25200), their count spreads wider than the margin allows (runs
  // of neighbours, and torch's randn makes values in Box-Muller pairs): 1 in 200 randn rows of 25200,
  // k 300, needed the second try.
  for (int64_t attempt = 0, rank = 0; count <= k; ++attempt) {
    if (attempt == 2) return false;
    const int64_t s = sample_key_runs(n, key_at, keys);  // again on the retry: the kept keys overwrote it
    if (attempt == 0) {
      const double expected = static_cast<double>(k + 1) * static_cast<double>(s) / static_cast<double>(n);
      rank = static_cast<int64_t>(expected + 3 * std::sqrt(expected) + 1);
    } else {
      rank *= 2;
    }
    if (rank >= s) return false;
    const auto threshold = static_cast<Bits>(select_key(keys, s, rank, scratch).key);
    count = 0;
    auto keep = [&](int64_t at) {
      const Bits key = key_at(at);
      keys[count] = key;
      positions[count] = static_cast<uint32_t>(at);
      count += key <= threshold;  // the block test may pass a few above it
    };
    int64_t i = 0;
    for (; i + kTopKBlock <= n; i += kTopKBlock) {
      for (uint64_t m = may_hold(i, threshold); m != 0; m &= m - 1) keep(i + __builtin_ctzll(m));
    }
    for (; i < n; ++i) keep(i);
  }
  const KeyRank<K> boundary = select_key(keys, count, k, scratch);
  if (boundary.less != k) return false;
  // The k keys below the boundary as (key, position) elements, sorted.
  using Ops = std::conditional_t<sizeof(K) == 4, PackedOps<PackedOrder::kByElement>, WideOps>;
  auto* smallest = reinterpret_cast<typename Ops::Element*>(job.row.buffer_b);
  auto key_of = [](const typename Ops::Element& e) -> K {
    if constexpr (sizeof(K) == 4) {
      return static_cast<K>(e >> 32);
    } else {
      return e.key;
    }
  };
  int64_t m = 0;
  for (int64_t j = 0; j < count; ++j) {
    if constexpr (sizeof(K) == 4) {
      smallest[m] = (uint64_t{keys[j]} << 32) | positions[j];
    } else {
      smallest[m] = WideElement{keys[j], positions[j]};
    }
    m += keys[j] < boundary.key;
  }
  // Sorted as the sort kernel sorts rows (sort_row-inl.h): past kShortRowLength by a radix sort on the
  // key, which leaves distinct keys in the same order as the introsort.
  const typename Ops::Element* sorted = smallest;
  if (k > kShortRowLength) {
    auto* other = reinterpret_cast<typename Ops::Element*>(job.row.buffer_a);  // the kept keys are done with
    sorted = radix_sort<Ops>(smallest, other, k, key_bits_for_range(boundary.key));
  } else {
    libstdcxx_introsort<Ops>(smallest, k);
  }
  for (int64_t j = 1; j < k; ++j) {
    if (key_of(sorted[j - 1]) == key_of(sorted[j])) return false;
  }
  write_topk<Format, kDescending, Ops>(job, row, sorted);
  return true;
}

// libstdc++'s nth_element at k - 1 over the row's elements in `a`, then (sorted) std::sort of the
// first k - 1.
template <typename Ops>
void topk_by_selection(typename Ops::Element* a, int64_t n, int64_t k, bool sorted) {
  libstdcxx_nth_element<Ops>(a, a + k - 1, a + n);
  if (sorted) libstdcxx_introsort<Ops>(a, k - 1);
}

// topk of a short row (up to kShortRowMaxLength) of keys of up to 32 bits, smallest keys first, taken
// one at a time: the smallest remaining key, where it is, and that no other element has it. When each
// of the k taken is the only element with its key (and the k-th differs from the (k+1)-th), the k
// elements and their order are every correct selection's answer, so torch's too; returns false,
// having written nothing, when some key repeats (then the order among equal keys is torch's
// algorithm's) or reaches the all-ones key (the padding's, so none is left). Only for outputs in key
// order: sorted, or k == 1.
template <typename Format, bool kDescending>
bool topk_short_row_if_distinct(const TopKJob& job, const Row<Format, kDescending>& row, ShortRowKeys& keys) {
  using Bits = typename Format::Bits;
  int64_t taken[kShortRowMaxLength];
  if (keys.n <= kKeysPerVector) {  // in a register (the padding's all ones end the row)
    KeyVector row_keys(keys.keys);
    for (int64_t j = 0; j < job.k; ++j) {
      uint32_t smallest;
      const KeyMatches at = row_keys.take_smallest(&smallest);
      if (smallest == ~uint32_t{0} || at.count != 1) return false;
      taken[j] = at.first;
    }
  } else {
    uint32_t least = 0;  // the keys are left as they are (no store for a vector load to wait on)
    for (int64_t j = 0; j < job.k; ++j) {
      const uint32_t smallest = keys.smallest_from(least);
      if (smallest == ~uint32_t{0}) return false;
      const KeyMatches at = keys.count_and_first_equal_to(smallest);
      if (at.count != 1) return false;
      taken[j] = at.first;
      least = smallest + 1;  // each taken key is its row's only one: the next is above it
    }
  }
  Bits* values = static_cast<Bits*>(job.row.values);
  for (int64_t j = 0; j < job.k; ++j) {
    job.row.indices[j * job.row.indices_stride] = taken[j];
    values[j * job.row.values_stride] = topk_value<Format>(row.input(taken[j]));
  }
  return true;
}

template <typename Format, bool kDescending>
void topk_row_typed(const TopKJob& job) {
  using Bits = typename Format::Bits;
  const Row<Format, kDescending> row{job.row};
  const int64_t n = job.row.n, k = job.k;
  if (k == 0) return;
  if constexpr (Format::key_bits <= 32) {
    if (n <= kShortRowMaxLength && (job.sorted || k == 1)) {
      ShortRowKeys keys;
      keys.load(row);
      if (topk_short_row_if_distinct(job, row, keys)) return;
    }
  }
  const bool partial_sort = k * kTopKPartialSortRatio <= n;
  // 16-bit keys take at most 65536 values: among the k + 1 smallest of a row equal keys are the rule,
  // and the attempt only costs (timed: bfloat16 rows of 640..128256, 0.67x-0.95x with it, 1.1x-8x
  // without). int64 rows are mostly counts, ids and times, which tie as often (timed: top 100 of
  // 1M Zipf counts 3.1x with it, 5.8x without).
  constexpr bool kTryDistinct =
      Format::key_bits == 32 || std::is_same_v<Format, KeyFormatOf<DType::kFloat64>>;
  auto* elements = reinterpret_cast<WideElement*>(job.row.buffer_a);
  enum class Outcome { kWritten, kInElements, kNotYet };
  auto select = [&](const auto& key_at, const auto& may_hold) {
    if constexpr (kTryDistinct) {
      if ((partial_sort || job.sorted) && n > kShortRowMaxLength && topk_by_threshold(job, row, key_at, may_hold)) {
        return Outcome::kWritten;
      }
    }
    if (!partial_sort) return Outcome::kNotYet;
    topk_by_heap<Format>(n, k, key_at, may_hold, elements);
    return Outcome::kInElements;
  };
  auto select_by_keys = [&](const auto& key_at) {
    return select(key_at, KeysBlockTest<Format, std::decay_t<decltype(key_at)>>{key_at});
  };
  Outcome selected;
  if (job.row.input_stride != 1) {
    selected = select_by_keys([&row](int64_t i) { return row.key(i); });
  } else {
    const Bits* in = static_cast<const Bits*>(job.row.input);
    auto key_at = [in](int64_t i) { return sort_key<Format, kDescending>(in[i]); };
    using Value = typename NativeValue<Format>::type;
    if constexpr (std::is_same_v<Format, KeyFormatOf<DType::kBFloat16>>) {
      selected = select(key_at, BFloat16BlockTest<kDescending>{in});
    } else if constexpr (std::is_void_v<Value>) {
      selected = select_by_keys(key_at);
    } else {
      selected = select(key_at, ValuesBlockTest<Format, kDescending>{reinterpret_cast<const Value*>(in)});
    }
  }
  if (selected == Outcome::kWritten) return;
  if (selected == Outcome::kInElements) return write_topk<Format, kDescending, WideOps>(job, row, elements);
  with_row_elements(row, [&]<typename Ops>(auto* a, uint64_t lo) {
    topk_by_selection<Ops>(a, n, k, job.sorted);
    write_topk<Format, kDescending, Ops>(job, row, a, lo);
  });
}

void topk_row(const TopKJob& job) {
  with_key_format(job.row, [&job]<typename Format, bool kDescending>() {
    topk_row_typed<Format, kDescending>(job);
  });
}
