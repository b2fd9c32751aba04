// A short row (up to 256 elements) of keys of up to 32 bits, held in a local array: select (median,
// kthvalue) ranks the elements of rows up to 64 long by counting, and topk takes its smallest keys
// one at a time, each with a few vector compares of the whole row (key_masks64, per ISA) instead of
// a partition or heap. Included inside namespace kwker::sort_detail::<isa>, after simd-inl.h.

inline constexpr int64_t kShortRowMaxLength = 256;
// Rows up to this long fit one 64-bit mask of positions (equal_to, select's ranks).
inline constexpr int64_t kShortRowMaskLength = 64;

// How many elements have a key, and where the first is (-1: none).
struct KeyMatches {
  int64_t count, first;
};

struct ShortRowKeys {
  alignas(64) uint32_t keys[kShortRowMaxLength];
  int64_t n = 0, padded = 0;
  uint64_t in_row = 0;  // rows up to kShortRowMaskLength long

  // The row's keys, padded with all ones (below no key; equal ones masked off) to a multiple of 16,
  // or of 64 beyond 64.
  template <typename KeyAt>
  void load(int64_t length, const KeyAt& key_at) {
    n = length;
    padded = n <= 64 ? (n + 15) / 16 * 16 : (n + 63) / 64 * 64;
    in_row = n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1;
    // Whole vectors where possible: the compares load the keys as vectors, and a vector load of keys
    // stored one by one waits for them (no store forwarding).
    const int64_t whole = n / 8 * 8;
    for (int64_t i = 0; i < whole; i += 8) {
      for (int l = 0; l < 8; ++l) keys[i + l] = static_cast<uint32_t>(key_at(i + l));
    }
    for (int64_t i = whole; i < padded; i += 8) {
      for (int l = 0; l < 8; ++l) keys[i + l] = ~uint32_t{0};
    }
    for (int64_t i = whole; i < n; ++i) keys[i] = static_cast<uint32_t>(key_at(i));
  }

  // f.template operator()<padded>() for rows up to 64 long: the compares unrolled over a fixed
  // number of vectors.
  template <typename F>
  auto with_padded_length(const F& f) const {
    switch (padded) {
      case 16: return f.template operator()<16>();
      case 32: return f.template operator()<32>();
      case 48: return f.template operator()<48>();
      default: return f.template operator()<64>();
    }
  }

  // Positions whose key is `key`, as bits (rows up to 64 long).
  uint64_t equal_to(uint32_t key) const {
    return with_padded_length([&]<int kCount>() {
      uint64_t below, equal;
      key_masks64<kCount>(keys, key, &below, &equal);
      return equal & in_row;
    });
  }

  // How many elements have key `key`, and where the first is (-1: none); any length.
  KeyMatches count_and_first_equal_to(uint32_t key) const {
    if (n <= kShortRowMaskLength) {
      const uint64_t at = equal_to(key);
      return {__builtin_popcountll(at), at == 0 ? -1 : __builtin_ctzll(at)};
    }
    int64_t count = 0, first = -1;
    for (int64_t chunk = 0; chunk < padded; chunk += 64) {
      uint64_t below, equal;
      key_masks64<64>(keys + chunk, key, &below, &equal);
      if (chunk + 64 > n) equal &= (uint64_t{1} << (n - chunk)) - 1;  // n - chunk < 64 here
      if (first < 0 && equal != 0) first = chunk + __builtin_ctzll(equal);
      count += __builtin_popcountll(equal);
    }
    return {count, first};
  }

  // The smallest key not below `least` (all ones if there is none).
  uint32_t smallest_from(uint32_t least) const {
    if (n <= kShortRowMaskLength) {
      return with_padded_length([&]<int kCount>() { return smallest_of<kCount>(keys, least); });
    }
    uint32_t m = ~uint32_t{0};
    for (int64_t chunk = 0; chunk < padded; chunk += 64) {
      const uint32_t c = smallest_of<64>(keys + chunk, least);
      m = c < m ? c : m;
    }
    return m;
  }

  // Keys are shifted down by `least` (wrapping): those not below it come first, in order, so a plain
  // minimum finds the answer (a select in the loop keeps GCC from vectorising it).
  template <int kCount>
  static uint32_t smallest_of(const uint32_t* k, uint32_t least) {
    uint32_t m = ~uint32_t{0};
    for (int j = 0; j < kCount; ++j) {  // vectorised: fixed count
      const uint32_t shifted = k[j] - least;
      m = shifted < m ? shifted : m;
    }
    const uint32_t key = m + least;  // below `least` (wrapped) when every key is below it
    return key >= least ? key : ~uint32_t{0};
  }
};
