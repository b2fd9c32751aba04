// libstdc++'s std::sort (introsort) and std::nth_element (introselect), step for step, on packed or
// wide elements (included inside namespace kwker::sort_detail::<isa>). Same depth limit
// (2 floor(log2 n)), same median-of-three pivot, same Hoare partition (its stops found from compare
// masks), same heapsort fallback (heap-inl.h), and each leaf of <= 16 elements sorted stably, which is
// what libstdc++'s final insertion sort does to it: elements of a leaf are never less than those of
// the leaves before it, so none crosses a leaf boundary. The permutation of equal keys is therefore
// libstdc++'s.

inline constexpr int64_t kIntrosortThreshold = 16;  // libstdc++'s _S_threshold

// libstdc++'s __move_median_to_first: the same comparisons pick the same element, here by
// conditional moves instead of branches (the comparisons are data-dependent and mispredict).
template <typename Ops, typename E>
void move_median_to_first(E* result, E* a, E* b, E* c) {
  const bool ab = Ops::less(*a, *b), bc = Ops::less(*b, *c), ac = Ops::less(*a, *c);
  E* const if_ab = bc ? b : ac ? c : a;
  E* const if_not_ab = ac ? a : bc ? c : b;
  swap_values(*result, *(ab ? if_ab : if_not_ab));
}

// libstdc++'s __unguarded_partition(first, last, pivot) is, literally:
//   while (true) { while (less(*first, pivot)) ++first; --last; while (less(pivot, *last)) --last;
//                  if (!(first < last)) return first; swap(*first, *last); ++first; }
// mask_partition makes exactly its swaps and returns its cut, with the stops read from bit masks.
// Between the two scan fronts no element has moved yet, so where each front stops next is decided
// by the elements as they were when their 64-element block was masked: the left front stops at the
// next element not less than the pivot (or at the last right stop, whose swapped-in element is not
// less), the right front at the previous element not greater; once the right stop is at or left of
// the left stop the fronts have crossed and the left stop is the cut.

// Where a partition cut, and whether its fronts met: stopped at the same element (one equal to the
// pivot), which libstdc++ leaves where it is and returns; torch's quickselect (select_row-inl.h) swaps
// it with itself and goes on, so its fronts end one element further apart.
template <typename E>
struct Cut {
  E* at;
  bool met;
};

// With the two blocks apart, swaps the k-th left stop (bit i: left_block[i]) with the k-th right
// stop (bit i: right_top[-1 - i]) for k < the smaller count, clears those bits, and returns the bit of
// the last right stop used. (A vector compress/expand version lost to this loop: the round trip
// through memory defeats store forwarding.)
template <typename E>
[[gnu::always_inline]] inline int pair_off_stops(E* left_block, uint64_t& left_stops, E* right_top,
                                              uint64_t& right_stops) {
  if constexpr (std::is_same_v<E, uint64_t>) {
    // Every element of both blocks a stop (runs of keys equal to the pivot): the 64 swaps exchange
    // the left block with the right block reversed.
    if (left_stops == ~uint64_t{0} && right_stops == ~uint64_t{0}) {
      swap_block_with_reversed64(left_block, right_top - 64);
      left_stops = right_stops = 0;
      return 63;
    }
  }
  int last = 0;
  while (left_stops != 0 && right_stops != 0) {
    last = __builtin_ctzll(right_stops);
    swap_values(left_block[__builtin_ctzll(left_stops)], right_top[-1 - last]);
    left_stops &= left_stops - 1;
    right_stops &= right_stops - 1;
  }
  return last;
}

template <typename Ops, typename E>
Cut<E> mask_partition(E* first, E* last, const E pivot) {
  E* left_block = first;
  uint64_t left_stops = Ops::not_less_mask(left_block, pivot);
  E* right_top = last;  // right_stops bit i stands for right_top[-1 - i]
  uint64_t right_stops = Ops::not_greater_mask_reversed(right_top - 64, pivot);
  E* bound = last;  // the last right stop: from here on the elements are final
  // While the two blocks are apart, every left stop lies before every right stop and before `bound`:
  // stops are paired off a round at a time, without the crossing checks.
  while (left_block + 64 <= right_top - 64) {
    if (left_stops == 0) {
      if (left_block + 128 > right_top - 64) break;
      left_block += 64;
      left_stops = Ops::not_less_mask(left_block, pivot);
    } else if (right_stops == 0) {
      if (right_top - 128 < left_block + 64) break;
      right_top -= 64;
      right_stops = Ops::not_greater_mask_reversed(right_top - 64, pivot);
    } else {
      bound = right_top - 1 - pair_off_stops(left_block, left_stops, right_top, right_stops);
    }
  }
  while (true) {
    while (left_stops == 0) {
      left_block += 64;
      if (left_block >= bound) return {bound, false};
      left_stops = Ops::not_less_mask(left_block, pivot);
    }
    E* f = left_block + __builtin_ctzll(left_stops);
    if (f >= bound) return {bound, false};
    left_stops &= left_stops - 1;
    while (right_stops == 0) {
      right_top -= 64;
      // Every element above right_top - 1 has been seen by the right front: f, if among them, did
      // not stop it; if f is the next it would see, it stops there when not above the pivot.
      if (right_top - 1 <= f) return {f, right_top - 1 == f && !Ops::less(pivot, *f)};
      right_stops = Ops::not_greater_mask_reversed(right_top - 64, pivot);
    }
    E* l = right_top - 1 - __builtin_ctzll(right_stops);
    if (l <= f) return {f, l == f};
    right_stops &= right_stops - 1;
    swap_values(*f, *l);
    bound = l;
  }
}

// Ranges shorter than a mask block: libstdc++'s __unguarded_partition as it is written (masks of 64
// elements would cost more than the few comparisons). Introselect partitions ranges of 4 and more,
// with a pivot the median of three, so both scans stop inside the range.
inline constexpr int64_t kMaskPartitionMinLength = 64;

template <typename Ops, typename E>
Cut<E> unguarded_partition(E* first, E* last, const E pivot) {
  if (last - first >= kMaskPartitionMinLength) return mask_partition<Ops>(first, last, pivot);
  while (true) {
    while (Ops::less(*first, pivot)) ++first;
    --last;
    while (Ops::less(pivot, *last)) --last;
    if (!(first < last)) return {first, first == last};
    swap_values(*first, *last);
    ++first;
  }
}

// Stable insertion sort: the order libstdc++'s final insertion sort leaves a leaf in.
inline void WideOps::sort_leaf(WideElement* first, WideElement* last) {
  for (WideElement* i = first + 1; i < last; ++i) {
    const WideElement v = *i;
    WideElement* j = i;
    for (; j > first && v.key < j[-1].key; --j) *j = j[-1];
    *j = v;
  }
}

// A guide may settle a range the introsort is about to sort, when it knows the range's sorted
// content by other means (see TieGuide in sort_row-inl.h); NoGuide never does.
struct NoGuide {
  template <typename E>
  bool settled(E*, E*) const { return false; }
};

template <typename Ops, typename E, typename Guide>
void introsort_loop(E* first, E* last, int depth_limit, const Guide& guide) {
  while (last - first > kIntrosortThreshold) {
    if (guide.settled(first, last)) return;
    if (depth_limit == 0) {
      partial_sort<Ops>(first, last, last);  // libstdc++'s heapsort fallback (heap-inl.h)
      return;
    }
    --depth_limit;
    E* mid = first + (last - first) / 2;
    move_median_to_first<Ops>(first, first + 1, mid, last - 1);
    E* cut = mask_partition<Ops>(first + 1, last, E(*first)).at;
    if (last - cut <= kIntrosortThreshold && cut - first <= kIntrosortThreshold) {
      // Both parts are leaves: sorted back to back, so their independent work overlaps.
      Ops::sort_leaf(cut, last);
      Ops::sort_leaf(first, cut);
      return;
    }
    introsort_loop<Ops>(cut, last, depth_limit, guide);
    last = cut;
  }
  Ops::sort_leaf(first, last);
}

inline int introsort_depth_limit(int64_t n) {
  return 2 * (63 - __builtin_clzll(static_cast<unsigned long long>(n)));
}

template <typename Ops, typename E, typename Guide = NoGuide>
void libstdcxx_introsort(E* first, int64_t n, const Guide& guide = {}) {
  if (n < 2) return;
  introsort_loop<Ops>(first, first + n, introsort_depth_limit(n), guide);
}

// libstdc++'s std::nth_element (__introselect): the same pivots and partitions as the introsort,
// following only the part that holds nth; ranges of <= 3 elements end in the (stable) insertion
// sort; the depth limit falls back to a heap select of [first, nth] and a swap of first with nth.
template <typename Ops, typename E>
void libstdcxx_nth_element(E* first, E* nth, E* last) {
  if (first == last || nth == last) return;
  int depth_limit = introsort_depth_limit(last - first);
  while (last - first > 3) {
    if (depth_limit == 0) {
      heap_select<Ops>(first, nth + 1, last);
      swap_values(*first, *nth);
      return;
    }
    --depth_limit;
    E* mid = first + (last - first) / 2;
    move_median_to_first<Ops>(first, first + 1, mid, last - 1);
    E* cut = unguarded_partition<Ops>(first + 1, last, E(*first)).at;
    if (cut <= nth) {
      first = cut;
    } else {
      last = cut;
    }
  }
  Ops::sort_leaf(first, last);
}
