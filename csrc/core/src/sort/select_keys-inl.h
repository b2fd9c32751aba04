// The key of a rank among keys of up to 32 bits (select's rows, and the samples that bracket them),
// compiled once per ISA (included inside namespace kwker::sort_detail::<isa>, after simd-inl.h and
// introsort-inl.h).
//
// Algorithm: a quickselect on the bare keys, eight (AVX2) or sixteen (AVX-512) to a vector. Each
// round copies the range out of place into the keys below a pivot and the others (partition_below),
// and goes on in the part that holds the rank; ranges of kKeyLeafLength or fewer are ranked by
// counting (key_masks64). Equal keys never straddle a cut (a pivot sends all its equals one way), so
// the final range holds every key equal to the answer, and how many keys lie below it is the sum of
// the parts left behind: the answer comes with its count of smaller and equal keys. A pivot that is
// the range's least key would cut nothing: its equals are split off instead. The pivot is the median
// of three, so each round removes at least one key; after 2 log2(n) + 8 rounds (unlucky pivots) the
// rest goes to libstdc++'s introselect, O(n log n) at worst.
// Exact by construction: the answer is a key of the input, at the asked rank of the multiset.

inline constexpr int64_t kKeyLeafLength = 32;

// A key of some rank, with how many keys of the set are below it and how many equal it.
struct KeyRank {
  uint32_t key;
  int64_t less;
  int64_t equal;
};

// Ranks keys[0..n), n <= kKeyLeafLength, by counting: the key with `r` in [less, less + equal).
inline KeyRank rank_in_leaf(const uint32_t* keys, int64_t n, int64_t r) {
  alignas(64) uint32_t padded[kKeyLeafLength];
  for (int64_t i = 0; i < n; ++i) padded[i] = keys[i];
  for (int64_t i = n; i < kKeyLeafLength; ++i) padded[i] = ~uint32_t{0};  // below no key
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
