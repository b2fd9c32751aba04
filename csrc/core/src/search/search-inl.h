// torch's binary search (kwker/search.h), run for kWidth x kGroups values at once.
//
// Each lane keeps torch's state as (start, len = end - start) and takes torch's step unless len is 0:
//   half = len / 2, mid = start + half;
//   goes right (b[mid] below v): start = mid + 1, len = len - half - 1;  else: len = half.
// len at least halves every step, so bit_width(m) steps finish every lane; a finished lane (len 0)
// keeps its state (its probe index is clamped into the row and its answer ignored). The states, and
// so the answers, are torch's exactly, whatever the boundaries hold.
//
// Included inside namespace kwker::search_detail::<isa>, after search_lanes-inl.h.

template <typename L, SearchSide kSide>
struct BinarySearch {
  using I = typename L::I;
  using V = typename L::V;
  I last, one;

  explicit BinarySearch(int32_t m) : last(L::splat(m - 1)), one(L::splat(1)) {}

  template <typename Key>
  void step(const Key* row, V value, I& start, I& len) const {
    const I half = L::halve(len);
    const I mid = L::add(start, half);
    const V bound = L::gather(row, L::min(mid, last));
    const typename L::M right = L::both(L::template goes_right<kSide>(bound, value), L::positive(len));
    start = L::select(right, L::add(mid, one), start);
    len = L::select(right, L::sub(L::sub(len, half), one), half);
  }
};

template <typename Key, SearchSide kSide, typename Out>
void search_run(const Key* row, int32_t m, const Key* values, int64_t n, Out* out) {
  using L = Lanes<Key>;
  using I = typename L::I;
  constexpr int kWidth = L::kWidth, kGroups = L::kGroups;
  const int steps = std::bit_width(static_cast<uint32_t>(m));
  const BinarySearch<L, kSide> search(m);
  const I whole_row = L::splat(m), zero = L::splat(0);
  int64_t i = 0;
  for (; i + kGroups * kWidth <= n; i += kGroups * kWidth) {
    typename L::V value[kGroups];
    I start[kGroups], len[kGroups];
    for (int g = 0; g < kGroups; ++g) {
      value[g] = L::load(values + i + g * kWidth);
      start[g] = zero;
      len[g] = whole_row;
    }
    for (int s = 0; s < steps; ++s) {
      for (int g = 0; g < kGroups; ++g) search.step(row, value[g], start[g], len[g]);
    }
    for (int g = 0; g < kGroups; ++g) L::store(out + i + g * kWidth, start[g]);
  }
  for (; i + kWidth <= n; i += kWidth) {
    const typename L::V value = L::load(values + i);
    I start = zero, len = whole_row;
    for (int s = 0; s < steps; ++s) search.step(row, value, start, len);
    L::store(out + i, start);
  }
  using S = ScalarLanes<Key>;
  const BinarySearch<S, kSide> tail_search(m);
  for (; i < n; ++i) {
    int32_t start = 0, len = m;
    for (int s = 0; s < steps; ++s) tail_search.step(row, values[i], start, len);
    out[i] = start;
  }
}

template <typename Key>
void search(const Key* row, int32_t m, const Key* values, int64_t n, SearchSide side, bool out_int32,
            void* out) {
  if (side == SearchSide::kLeft) {
    if (out_int32) return search_run<Key, SearchSide::kLeft>(row, m, values, n, static_cast<int32_t*>(out));
    return search_run<Key, SearchSide::kLeft>(row, m, values, n, static_cast<int64_t*>(out));
  }
  if (out_int32) return search_run<Key, SearchSide::kRight>(row, m, values, n, static_cast<int32_t*>(out));
  search_run<Key, SearchSide::kRight>(row, m, values, n, static_cast<int64_t*>(out));
}

const SearchKernels kKernels = {&search<float>, &search<double>, &search<int32_t>, &search<int64_t>};
