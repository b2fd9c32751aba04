// A short row (up to 256 elements) of keys of up to 32 bits, held in a local array: select (median,
// kthvalue) ranks the elements of rows up to 64 long by counting, and topk takes its smallest keys
// one at a time, each with a few vector compares of the whole row (key_masks64, per ISA) instead of
// a partition or heap. Included inside namespace kwker::sort_detail::<isa>, after simd-inl.h.

inline constexpr int64_t kShortRowMaxLength = 256;
// Rows up to this long fit one 64-bit mask of positions (equal_to, select's ranks).
inline constexpr int64_t kShortRowMaskLength = 64;

struct ShortRowKeys {
  alignas(64) uint32_t keys[kShortRowMaxLength];
  int64_t n = 0, padded = 0;
  uint64_t in_row = 0;  // rows up to kShortRowMaskLength long

  // The row's keys, padded with all ones (below no key; equal ones masked off) to a multiple of 16,
  // or of 64 beyond 64.
  template <typename KeyAt>
  void load(int64_t length, const KeyAt& key_at) {
    set_length(length);
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

  // The keys of a row (Format's keys up to 32 bits), loaded as its layout allows.
  template <typename Format, bool kDescending>
  void load(const Row<Format, kDescending>& row) {
    using Bits = typename Format::Bits;
    if (row.job.input_stride != 1) return load(row.job.n, [&row](int64_t i) { return row.key(i); });
    if constexpr (sizeof(Bits) == 4) {
      load_contiguous<Format, kDescending>(row.job.n, static_cast<const uint32_t*>(row.job.input));
    } else {
      const Bits* in = static_cast<const Bits*>(row.job.input);
      load(row.job.n, [in](int64_t i) { return sort_key<Format, kDescending>(in[i]); });
    }
  }

  // The same from a contiguous row of 32-bit elements, a vector's worth at a time, the last part one
  // by a masked load (load_keys_tail): every store is as wide as the compares' loads, which are then
  // forwarded from them (timed, 8-expert MoE router, 4096 rows: AVX-512 132 -> 72 us; AVX2, whose
  // vectors of 8 the old loop already stored whole, 70 -> 73 us; rows of 20, 180 -> 142 us).
  template <typename Format, bool kDescending>
  void load_contiguous(int64_t length, const uint32_t* in) {
    set_length(length);
    constexpr int64_t kV = kKeysPerVector;
    auto key = [](uint32_t bits) { return static_cast<uint32_t>(sort_key<Format, kDescending>(bits)); };
    const int64_t whole = n / kV * kV;
    for (int64_t c = 0; c < whole; c += kV) {
      for (int64_t j = 0; j < kV; ++j) keys[c + j] = key(in[c + j]);  // vectorised: fixed count
    }
    if (whole < n) {
      alignas(64) uint32_t tail[kV];
      load_keys_tail(in + whole, n - whole, tail);
      for (int64_t j = 0; j < kV; ++j) keys[whole + j] = whole + j < n ? key(tail[j]) : ~uint32_t{0};
    }
    for (int64_t c = (n + kV - 1) / kV * kV; c < padded; c += kV) {
      for (int64_t j = 0; j < kV; ++j) keys[c + j] = ~uint32_t{0};
    }
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

  void set_length(int64_t length) {
    n = length;
    padded = n <= 64 ? (n + 15) / 16 * 16 : (n + 63) / 64 * 64;
    in_row = n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1;
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
