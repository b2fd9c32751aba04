// Bare keys, uint32 (keys of up to 32 bits) or uint64: the key of a rank among them (select's rows,
// topk's long rows), a sample of a row's keys, and the keys of a row in a bracket (select's rows),
// compiled once per ISA (included inside namespace kwker::sort_detail::<isa>, after simd-inl.h and
// introsort-inl.h).
//
// keep_keys: one pass stores the bracketed keys and their positions in row order with vector
// compares and compress (keep_between), a block of keys taken from the row at a time.
// select_key: a quickselect on the bare keys, 32 (AVX2) or 64 (AVX-512) bytes to a vector. Each
// round copies the range out of place into the keys below a pivot and the others (partition_below),
// and goes on in the part that holds the rank; ranges of kKeyLeafLength or fewer are ranked by
// counting. Equal keys never straddle a cut (a pivot sends all its equals one way), so
// the final range holds every key equal to the answer, and how many keys lie below it is the sum of
// the parts left behind: the answer comes with its count of smaller and equal keys. A pivot that is
// the range's least key would cut nothing: its equals are split off instead. The pivot is the median
// of three, so each round removes at least one key; after 2 log2(n) + 8 rounds (unlucky pivots) the
// rest goes to a radix select, a byte at a time: O(n) at worst.
// Exact by construction: the answer is a key of the input, at the asked rank of the multiset.

inline constexpr int64_t kKeyLeafLength = 16;

// The bare key type of a key format's Bits.
template <typename Bits>
using BareKey = std::conditional_t<sizeof(Bits) <= 4, uint32_t, uint64_t>;

// A key of some rank, with how many keys of the set are below it and how many equal it.
template <typename K>
struct KeyRank {
  K key;
  int64_t less;
  int64_t equal;
};

// Bit j of *below (*equal) set iff keys[j] < x (== x), for the kKeyLeafLength keys at `keys`.
inline void leaf_masks(const uint32_t* keys, uint32_t x, uint64_t* below, uint64_t* equal) {
  key_masks64<kKeyLeafLength>(keys, x, below, equal);
}
inline void leaf_masks(const uint64_t* keys, uint64_t x, uint64_t* below, uint64_t* equal) {
  key_masks64_by_element<kKeyLeafLength>(keys, x, below, equal);
}

// Ranks keys[0..n), n <= kKeyLeafLength, by counting: the key with `r` in [less, less + equal).
template <typename K>
KeyRank<K> rank_in_leaf(const K* keys, int64_t n, int64_t r) {
  alignas(64) K padded[kKeyLeafLength];
  for (int64_t i = 0; i < kKeyLeafLength; ++i) padded[i] = ~K{0};  // below no key
  std::memcpy(padded, keys, static_cast<size_t>(n) * sizeof(K));  // a loop here becomes rep movs
  const uint64_t in_set = (uint64_t{1} << n) - 1;
  for (int64_t i = 0;; ++i) {  // some key of the set holds rank r
    uint64_t below, equal;
    leaf_masks(padded, padded[i], &below, &equal);
    const int64_t less = __builtin_popcountll(below), same = __builtin_popcountll(equal & in_set);
    if (less <= r && r < less + same) return {padded[i], less, same};
  }
}

// The worst-case bound: a radix select, a byte of the keys at a time from the top, O(n) per byte.
// `work` holds n keys.
template <typename K>
KeyRank<K> rank_by_radix(const K* keys, int64_t n, int64_t r, K* work) {
  const K* src = keys;
  int64_t m = n, rank = r;
  for (int shift = 8 * static_cast<int>(sizeof(K)) - 8; shift >= 0; shift -= 8) {
    int64_t count[256] = {};
    for (int64_t i = 0; i < m; ++i) ++count[(src[i] >> shift) & 0xFF];
    K byte = 0;
    for (; rank >= count[byte]; ++byte) rank -= count[byte];
    int64_t kept = 0;  // in place from the second byte on: never written ahead of the reads
    for (int64_t i = 0; i < m; ++i) {
      work[kept] = src[i];
      kept += ((src[i] >> shift) & 0xFF) == byte;
    }
    src = work;
    m = kept;
  }
  const K key = work[0];  // every key left is the answer
  int64_t less = 0, equal = 0;
  for (int64_t i = 0; i < n; ++i) {
    less += keys[i] < key;
    equal += keys[i] == key;
  }
  return {key, less, equal};
}

// The key of rank r (0-based) among keys[0..n), which are left as they are. `scratch` holds
// 2 n + 2 kPartitionGap keys.
template <typename K>
KeyRank<K> select_key(const K* keys, int64_t n, int64_t r, K* scratch) {
  // Two areas taking turns as destination, each with the part below the pivot at its front and the
  // part above at its back (partition_below).
  const int64_t area = n + kPartitionGap;
  const K* src = keys;
  K* dst = scratch;
  int64_t less = 0;
  int rounds = introsort_depth_limit(n) + 8;
  while (n > kKeyLeafLength) {
    if (rounds-- == 0) {
      KeyRank<K> k = rank_by_radix(src, n, r, dst);
      k.less += less;
      return k;
    }
    const K x = src[0], y = src[n / 2], z = src[n - 1];
    const K pivot = std::max(std::min(x, y), std::min(std::max(x, y), z));
    int64_t below = partition_below(src, n, pivot, dst);
    if (r < below) {
      src = dst;
      n = below;
    } else {
      if (below == 0) {  // the pivot is the least key: the part above it is its equals and the rest
        if (pivot == ~K{0}) return {pivot, less, n};
        below = partition_below(src, n, pivot + 1, dst);
        if (r < below) return {pivot, less, below};
      }
      src = dst + below + kPartitionGap;
      n -= below;
      r -= below;
      less += below;
    }
    dst = dst == scratch ? scratch + area : scratch;
  }
  KeyRank<K> k = rank_in_leaf(src, n, r);
  k.less += less;
  return k;
}

// Where the j-th (0-based) of keys[0..n) equal to `key` is; there are more than j.
template <typename K>
int64_t find_equal(const K* keys, int64_t n, K key, int64_t j) {
  constexpr int64_t kBlock = 64;
  int64_t start = 0;
  for (; start + kBlock <= n; start += kBlock) {
    K count = 0;  // a count first, which vectorises (in the keys' lanes): most blocks are passed over
    for (int64_t i = 0; i < kBlock; ++i) count += keys[start + i] == key;
    if (j < static_cast<int64_t>(count)) break;
    j -= static_cast<int64_t>(count);
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
template <typename KeyAt, typename K>
int64_t sample_keys(int64_t n, const KeyAt& key_at, K* sample) {
  const int64_t s = sample_size(n);
  for (int64_t j = 0; j < s; ++j) sample[j] = static_cast<K>(key_at(j * n / s));
  return s;
}

// The same number of keys in evenly spaced runs of kSampleRun consecutive keys, each starting at a
// multiple of kSampleRun: for 32-bit keys in a row that starts on a cache line (torch's allocations
// do), one line per run, not one per key, for rows read from memory. tests/test_topk.py
// (sampled_positions) builds rows around these positions: keep the two in step.
inline constexpr int64_t kSampleRun = 16;
template <typename KeyAt, typename K>
int64_t sample_key_runs(int64_t n, const KeyAt& key_at, K* sample) {
  const int64_t runs = sample_size(n) / kSampleRun;
  for (int64_t j = 0; j < runs; ++j) {
    const int64_t start = j * (n - kSampleRun) / runs / kSampleRun * kSampleRun;
    for (int64_t i = 0; i < kSampleRun; ++i) sample[j * kSampleRun + i] = static_cast<K>(key_at(start + i));
  }
  return runs * kSampleRun;
}

// The keys [lo, hi] of a bracket around a rank.
struct Bracket {
  uint64_t lo, hi;
};

// The row's bare keys in a bracket, in row order, with their positions (nullptr: candidate i is
// element i); how many keys are below the bracket; how many have the largest key of their width
// (float formats: the NaNs).
template <typename K>
struct KeptKeys {
  const K* keys;
  const uint32_t* positions;
  int64_t count, below, top_keys;

  bool holds(int64_t r) const { return below <= r && r < below + count; }
};

// Keeps the row's keys in bracket b: the keys to out[0, n + 16); with a bracket narrower than all
// keys, a block of keys taken from the row at a time to the kKeepBlock after, then their uint32
// positions to n + 16 uint32 after that: `out` holds 2 n + 544 uint32 or 1.5 n + 536 uint64.
inline constexpr int64_t kKeepBlock = 512;

template <typename Bits, typename KeyAt, typename K = BareKey<Bits>>
KeptKeys<K> keep_keys(int64_t n, const KeyAt& key_at, Bracket b, K* out) {
  constexpr auto kTopKey = static_cast<K>(static_cast<Bits>(~Bits(0)));
  // Counts as wide as the keys, a block at a time: the loops stay in the keys' vector lanes (int64
  // counts of 32-bit keys cost a widening per vector).
  using Count = std::conditional_t<sizeof(K) == 4, uint32_t, uint64_t>;
  if (b.lo == 0 && b.hi == kTopKey) {
    int64_t top = 0;
    for (int64_t start = 0; start < n; start += kKeepBlock) {
      const int64_t end = std::min(n, start + kKeepBlock);
      Count block_top = 0;
      for (int64_t i = start; i < end; ++i) {
        const K k = key_at(i);
        out[i] = k;
        block_top += k == kTopKey;
      }
      top += static_cast<int64_t>(block_top);
    }
    return {out, nullptr, n, 0, top};
  }
  K* block = out + n + 16;
  auto* positions = reinterpret_cast<uint32_t*>(block + kKeepBlock);
  const auto lo = static_cast<K>(b.lo), width = static_cast<K>(b.hi - b.lo);
  int64_t count = 0, below = 0, top = 0;
  for (int64_t start = 0; start < n; start += kKeepBlock) {
    const int64_t length = std::min(kKeepBlock, n - start);
    Count block_below = 0, block_top = 0;
    for (int64_t j = 0; j < length; ++j) {
      const K k = key_at(start + j);
      block[j] = k;
      block_below += k < lo;
      block_top += k == kTopKey;
    }
    below += static_cast<int64_t>(block_below);
    top += static_cast<int64_t>(block_top);
    count += keep_between(block, length, lo, width, static_cast<uint32_t>(start), out + count, positions + count);
  }
  return {out, positions, count, below, top};
}
