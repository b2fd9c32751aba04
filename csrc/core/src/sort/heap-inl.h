// libstdc++'s binary heap (bits/stl_heap.h and __heap_select in bits/stl_algo.h), step for step, on
// elements ordered by Ops::less (included inside namespace kwker::sort_detail::<isa>). torch's
// std::partial_sort (topk) and introsort's depth-limit fallback run exactly these moves, so which of
// several equal keys a heap keeps, and where it leaves it, is libstdc++'s.

// __adjust_heap: the hole at `hole` goes down to a leaf, always to the greater child (the right one
// unless it is less than the left), then `value` goes up from there (__push_heap).
template <typename Ops, typename E>
void adjust_heap(E* first, int64_t hole, int64_t len, E value) {
  const int64_t top = hole;
  int64_t child = hole;
  while (child < (len - 1) / 2) {
    child = 2 * (child + 1);
    if (Ops::less(first[child], first[child - 1])) --child;
    first[hole] = first[child];
    hole = child;
  }
  if ((len & 1) == 0 && child == (len - 2) / 2) {
    child = 2 * (child + 1);
    first[hole] = first[child - 1];
    hole = child - 1;
  }
  for (int64_t parent = (hole - 1) / 2; hole > top && Ops::less(first[parent], value);
       parent = (hole - 1) / 2) {
    first[hole] = first[parent];
    hole = parent;
  }
  first[hole] = value;
}

// __make_heap.
template <typename Ops, typename E>
void make_heap(E* first, int64_t len) {
  if (len < 2) return;
  for (int64_t parent = (len - 2) / 2;; --parent) {
    adjust_heap<Ops>(first, parent, len, first[parent]);
    if (parent == 0) return;
  }
}

// __pop_heap(first, first + len, result) where *result held `value`: the top leaves (the caller
// stores it at result) and `value` takes its place.
template <typename Ops, typename E>
void replace_top(E* first, int64_t len, E value) {
  adjust_heap<Ops>(first, 0, len, value);
}

// __sort_heap.
template <typename Ops, typename E>
void sort_heap(E* first, int64_t len) {
  for (; len > 1; --len) {
    const E value = first[len - 1];
    first[len - 1] = first[0];
    replace_top<Ops>(first, len - 1, value);
  }
}

// __heap_select: [first, middle) becomes a heap of the smallest elements of [first, last).
template <typename Ops, typename E>
void heap_select(E* first, E* middle, E* last) {
  const int64_t len = middle - first;
  make_heap<Ops>(first, len);
  for (E* i = middle; i < last; ++i) {
    if (Ops::less(*i, *first)) {
      const E value = *i;
      *i = *first;
      replace_top<Ops>(first, len, value);
    }
  }
}

// std::partial_sort(first, middle, last).
template <typename Ops, typename E>
void partial_sort(E* first, E* middle, E* last) {
  heap_select<Ops>(first, middle, last);
  sort_heap<Ops>(first, middle - first);
}
