// A short row (up to 64 elements) of keys of up to 32 bits, held in a local array: select (median,
// kthvalue) ranks its elements by counting and topk takes its smallest keys one at a time, each with
// a few vector compares of the whole row (key_masks64, per ISA) instead of a partition or heap.
// Included inside namespace kwker::sort_detail::<isa>, after simd-inl.h.

inline constexpr int64_t kShortRowMaxLength = 64;

struct ShortRowKeys {
  alignas(64) uint32_t keys[kShortRowMaxLength];
  int64_t n = 0, padded = 0;
  uint64_t in_row = 0;

  // The row's keys, padded to a multiple of 16 with all ones (below no key; equal ones masked off).
  template <typename KeyAt>
  void load(int64_t length, const KeyAt& key_at) {
    n = length;
    padded = (n + 15) / 16 * 16;
    in_row = n == 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1;
    for (int64_t i = 0; i < n; ++i) keys[i] = static_cast<uint32_t>(key_at(i));
    for (int64_t i = n; i < padded; ++i) keys[i] = ~uint32_t{0};
  }

  // f.template operator()<padded>(): the compares unrolled over a fixed number of vectors.
  template <typename F>
  auto with_padded_length(const F& f) const {
    switch (padded) {
      case 16: return f.template operator()<16>();
      case 32: return f.template operator()<32>();
      case 48: return f.template operator()<48>();
      default: return f.template operator()<64>();
    }
  }

  // Positions whose key is `key`, as bits.
  uint64_t equal_to(uint32_t key) const {
    return with_padded_length([&]<int kCount>() {
      uint64_t below, equal;
      key_masks64<kCount>(keys, key, &below, &equal);
      return equal & in_row;
    });
  }

  // The smallest key (all ones for a row of all-ones keys or padding only).
  uint32_t smallest() const {
    return with_padded_length([&]<int kCount>() {
      uint32_t m = ~uint32_t{0};
      for (int j = 0; j < kCount; ++j) m = keys[j] < m ? keys[j] : m;  // vectorised: fixed count
      return m;
    });
  }
};
