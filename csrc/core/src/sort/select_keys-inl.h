// Keys of up to 32 bits, bare: the key of a rank among them (select's rows, topk's long rows), a
// sample of a row's keys, and the keys of a row in a bracket (select's rows), compiled once per ISA
// (included inside namespace kwker::sort_detail::<isa>, after simd-inl.h and introsort-inl.h).
//
// keep_keys: one pass stores the bracketed keys and their positions in row order with vector
// compares and compress (keep_between), a block of keys taken from the row at a time.
// select_key: a quickselect on the bare keys, eight (AVX2) or sixteen (AVX-512) to a vector. Each
// round copies the range out of place into the keys below a pivot and the others (partition_below),
// and goes on in the part that holds the rank; ranges of kKeyLeafLength or fewer are ranked by
// counting (key_masks64). Equal keys never straddle a cut (a pivot sends all its equals one way), so
// the final range holds every key equal to the answer, and how many keys lie below it is the sum of
// the parts left behind: the answer comes with its count of smaller and equal keys. A pivot that is
// the range's least key would cut nothing: its equals are split off instead. The pivot is the median
// of three, so each round removes at least one key; after 2 log2(n) + 8 rounds (unlucky pivots) the
// rest goes to libstdc++'s introselect, O(n log n) at worst.
// Exact by construction: the answer is a key of the input, at the asked rank of the multiset.

inline constexpr int64_t kKeyLeafLength = 16;

// A key of some rank, with how many keys of the set are below it and how many equal it.
struct KeyRank {
  uint32_t key;
  int64_t less;
  int64_t equal;
};

// Ranks keys[0..n), n <= kKeyLeafLength, by counting: the key with `r` in [less, less + equal).
inline KeyRank rank_in_leaf(const uint32_t* keys, int64_t n, int64_t r) {
  alignas(64) uint32_t padded[kKeyLeafLength];
  for (int64_t i = 0; i < kKeyLeafLength; ++i) padded[i] = ~uint32_t{0};  // below no key
  std::memcpy(padded, keys, static_cast<size_t>(n) * sizeof(uint32_t));  // a loop here becomes rep movs
  const uint64_t in_set = (uint64_t{1} << n) - 1;
  for (int64_t i = 0;; ++i) {  // some key of the set holds rank r
    uint64_t below, equal;
    key_masks64<kKeyLeafLength>(padded, padded[i], &below, &equal);
    const int64_t less = __builtin_popcountll(below), same = __builtin_popcountll(equal & in_set);
    if (less <= r && r < less + same) return {padded[i], less, same};
  }
}

// The worst-case bound: libstdc++'s introselect on (key, position) packed into distinct integers.
inline KeyRank rank_by_nth_element(const uint32_t* keys, int64_t n, int64_t r, uint64_t* packed) {
  for (int64_t i = 0; i < n; ++i) packed[i] = (uint64_t{keys[i]} << 32) | static_cast<uint64_t>(i);
  libstdcxx_nth_element<PackedOps<PackedOrder::kByElement>>(packed, packed + r, packed + n);
  const auto key = static_cast<uint32_t>(packed[r] >> 32);
  int64_t less = 0, equal = 0;
  for (int64_t i = 0; i < n; ++i) {
    less += keys[i] < key;
    equal += keys[i] == key;
  }
  return {key, less, equal};
}

// The key of rank r (0-based) among keys[0..n), which are left as they are. `scratch` holds
// 4 n + 64 uint32 and is 8-byte aligned.
inline KeyRank select_key(const uint32_t* keys, int64_t n, int64_t r, uint32_t* scratch) {
  // Two areas taking turns as destination, each a below part and an above part with room for the
  // partition's overrun.
  const int64_t part = n + 16, area = 2 * part;
  const uint32_t* src = keys;
  uint32_t* dst = scratch;
  int64_t less = 0;
  int rounds = introsort_depth_limit(n) + 8;
  while (n > kKeyLeafLength) {
    if (rounds-- == 0) {
      KeyRank k = rank_by_nth_element(src, n, r, reinterpret_cast<uint64_t*>(dst));
      k.less += less;
      return k;
    }
    const uint32_t x = src[0], y = src[n / 2], z = src[n - 1];
    const uint32_t pivot = std::max(std::min(x, y), std::min(std::max(x, y), z));
    uint32_t* const below_part = dst;
    uint32_t* const above_part = dst + part;
    int64_t below = partition_below(src, n, pivot, below_part, above_part);
    if (r < below) {
      src = below_part;
      n = below;
    } else {
      if (below == 0) {  // the pivot is the least key: the part above it is its equals and the rest
        if (pivot == ~uint32_t{0}) return {pivot, less, n};
        below = partition_below(src, n, pivot + 1, below_part, above_part);
        if (r < below) return {pivot, less, below};
      }
      src = above_part;
      n -= below;
      r -= below;
      less += below;
    }
    dst = dst == scratch ? scratch + area : scratch;
  }
  KeyRank k = rank_in_leaf(src, n, r);
  k.less += less;
  return k;
}

// Where the j-th (0-based) of keys[0..n) equal to `key` is; there are more than j.
inline int64_t find_equal(const uint32_t* keys, int64_t n, uint32_t key, int64_t j) {
  constexpr int64_t kBlock = 64;
  int64_t start = 0;
  for (; start + kBlock <= n; start += kBlock) {
    int64_t count = 0;  // a count first, which vectorises: most blocks are passed over
    for (int64_t i = 0; i < kBlock; ++i) count += keys[start + i] == key;
    if (j < count) break;
    j -= count;
  }
  for (int64_t i = start;; ++i) {
    if (keys[i] == key && j-- == 0) return i;
  }
}

// Sample size for a row of n: about n^(2/3), which balances selecting in the sample against
// selecting among the n / sqrt(s) candidates a bracket from it keeps; at most 4096, since each key of
// a long row read from memory is a cache miss (timed: rows of 8760 4.9x with n^(2/3), 3.8x with half
// of it; rows of 1M no faster with 10000).
inline int64_t sample_size(int64_t n) {
  const double root = std::cbrt(static_cast<double>(n));
  const auto s = static_cast<int64_t>(root * root);
  return s < 64 ? 64 : s > 4096 ? 4096 : s;
}

// An evenly spaced sample of the row's n keys: sample_size(n) of them (returned) into `sample`.
template <typename KeyAt>
int64_t sample_keys(int64_t n, const KeyAt& key_at, uint32_t* sample) {
  const int64_t s = sample_size(n);
  for (int64_t j = 0; j < s; ++j) sample[j] = static_cast<uint32_t>(key_at(j * n / s));
  return s;
}

// The same number of keys in evenly spaced runs of kSampleRun consecutive keys: a cache line per run,
// not per key, for rows read from memory.
inline constexpr int64_t kSampleRun = 16;
template <typename KeyAt>
int64_t sample_key_runs(int64_t n, const KeyAt& key_at, uint32_t* sample) {
  const int64_t runs = sample_size(n) / kSampleRun;
  for (int64_t j = 0; j < runs; ++j) {
    const int64_t start = j * (n - kSampleRun) / runs;
    for (int64_t i = 0; i < kSampleRun; ++i) sample[j * kSampleRun + i] = static_cast<uint32_t>(key_at(start + i));
  }
  return runs * kSampleRun;
}

// The keys [lo, hi] of a bracket around a rank.
struct Bracket {
  uint64_t lo, hi;
};

// Keys of up to 32 bits: the row's keys in a bracket, in row order, with their positions (nullptr:
// candidate i is element i); how many keys are below the bracket; how many have the largest key of
// their width (float formats: the NaNs).
struct KeptKeys {
  const uint32_t* keys;
  const uint32_t* positions;
  int64_t count, below, top_keys;

  bool holds(int64_t r) const { return below <= r && r < below + count; }
};

// Keeps the row's keys in bracket b: the keys to out[0, n + 16); with a bracket narrower than all
// keys, their positions to the n + 16 after, then a block of keys taken from the row at a time, so
// `out` holds 2 n + 560 uint32.
template <typename Bits, typename KeyAt>
KeptKeys keep_keys(int64_t n, const KeyAt& key_at, Bracket b, uint32_t* out) {
  constexpr auto kTopKey = static_cast<uint32_t>(static_cast<Bits>(~Bits(0)));
  if (b.lo == 0 && b.hi == kTopKey) {
    int64_t top = 0;
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t k = key_at(i);
      out[i] = k;
      top += k == kTopKey;
    }
    return {out, nullptr, n, 0, top};
  }
  constexpr int64_t kBlock = 512;
  uint32_t* positions = out + n + 16;
  uint32_t* block = positions + n + 16;
  const auto lo = static_cast<uint32_t>(b.lo), width = static_cast<uint32_t>(b.hi - b.lo);
  int64_t count = 0, below = 0, top = 0;
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t length = std::min(kBlock, n - start);
    for (int64_t j = 0; j < length; ++j) {
      const uint32_t k = key_at(start + j);
      block[j] = k;
      below += k < lo;
      top += k == kTopKey;
    }
    count += keep_between(block, length, lo, width, static_cast<uint32_t>(start), out + count, positions + count);
  }
  return {out, positions, count, below, top};
}
