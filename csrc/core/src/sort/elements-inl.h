// The elements the sort works on (included inside namespace kwker::sort_detail::<isa>): packed
// (key << 32 | position) integers, or (key, position) pairs for rows of 64-bit keys spanning 2^32 or
// more, and how each compares, masks and sorts a leaf.

inline constexpr uint64_t kLowHalf = 0xFFFFFFFFull;

// Not std::swap: an inline std:: function instantiated in several ISA files may be linked as the copy
// built with the widest ISA and then run on a CPU without it. Everything here lives in the ISA's
// namespace.
template <typename T>
inline void swap_values(T& a, T& b) {
  T t = a;
  a = b;
  b = t;
}

#include "simd-inl.h"

// How packed elements compare: by key only (torch's comparator), or as whole integers (key, then
// position: unique, hence the stable order).
enum class PackedOrder { kByKey, kByElement };

template <PackedOrder kOrder>
struct PackedOps {
  using Element = uint64_t;
  static constexpr uint64_t kCompared = kOrder == PackedOrder::kByKey ? ~kLowHalf : ~uint64_t{0};
  static bool less(uint64_t a, uint64_t b) { return (a & kCompared) < (b & kCompared); }
  static uint64_t position(uint64_t e) { return e & kLowHalf; }
  static uint64_t radix_key(uint64_t e) { return e >> 32; }
  static constexpr int kRadixBits = 32;
  // Bit i: !less(p[i], pivot), for p[0..63]; and !less(pivot, p[63 - i]).
  static uint64_t not_less_mask(const uint64_t* p, uint64_t pivot) {
    return stop_mask64<Stops::kNotBelow, false, false>(p, pivot & kCompared);
  }
  static uint64_t not_greater_mask_reversed(const uint64_t* p, uint64_t pivot) {
    return stop_mask64<Stops::kNotAbove, false, true>(p, pivot | ~kCompared);
  }
  // A leaf already in order stays as it is, which is what a stable sort does to it: in rows of
  // 16-bit keys most leaves of the introsort hold a single key.
  static void sort_leaf(uint64_t* first, uint64_t* last) {
    const int64_t n = last - first;
    int64_t falls = 0;  // a count, not an early exit: the loop vectorises
    for (int64_t i = 1; i < n; ++i) falls += less(first[i], first[i - 1]);
    if (falls != 0) stable_sort_leaf<kOrder == PackedOrder::kByElement>(first, n);
  }
  // A mark a sort may set on an element (the top bit of the position half, free in rows shorter than
  // 2^31); comparisons by key do not see it.
  static constexpr uint64_t kMark = uint64_t{1} << 31;
  static uint64_t mark_bits(uint64_t e) { return e & kMark; }
  static void set_mark(uint64_t& e, bool on) { e = on ? e | kMark : e & ~kMark; }
};

struct WideElement {
  uint64_t key;
  uint64_t position;
};

struct WideOps {
  using Element = WideElement;
  static bool less(const WideElement& a, const WideElement& b) { return a.key < b.key; }
  static uint64_t position(const WideElement& e) { return e.position; }
  static uint64_t radix_key(const WideElement& e) { return e.key; }
  static constexpr int kRadixBits = 64;
  static uint64_t not_less_mask(const WideElement* p, const WideElement& pivot) {
    return stop_mask64<Stops::kNotBelow, true, false>(&p->key, pivot.key);
  }
  static uint64_t not_greater_mask_reversed(const WideElement* p, const WideElement& pivot) {
    return stop_mask64<Stops::kNotAbove, true, true>(&p->key, pivot.key);
  }
  static void sort_leaf(WideElement* first, WideElement* last);
  static constexpr uint64_t kMark = uint64_t{1} << 63;  // as PackedOps::kMark, in the position
  static uint64_t mark_bits(const WideElement& e) { return e.position & kMark; }
  static void set_mark(WideElement& e, bool on) { e.position = on ? e.position | kMark : e.position & ~kMark; }
};

// Packed elements of rows of 64-bit keys spanning 2^32 or more that are short enough for key and
// position to share 64 bits: key << shift | position, where the position takes the low `shift`
// bits. Compared as whole integers (unique: the stable order); radix-sorted from bit `shift` up.
struct ShiftedOps {
  using Element = uint64_t;
  static bool less(uint64_t a, uint64_t b) { return a < b; }
  static uint64_t radix_key(uint64_t e) { return e; }
  static constexpr int kRadixBits = 64;
};

// Rows up to this long have room for the mark in their positions.
inline constexpr int64_t kMaxMarkedRowLength = int64_t{1} << 31;

// Whether any of p[0, n) is marked: 64 elements at a time, so the scan vectorises and stops soon
// after the first mark.
template <typename Ops, typename E>
bool any_marked(const E* p, int64_t n) {
  for (int64_t start = 0; start < n; start += 64) {
    const int64_t end = n - start < 64 ? n : start + 64;
    uint64_t marks = 0;
    for (int64_t i = start; i < end; ++i) marks |= Ops::mark_bits(p[i]);
    if (marks != 0) return true;
  }
  return false;
}
