// Short rows of a kthvalue, median or nanmedian whose neighbours are adjacent in memory (a median
// along dim 0 of a contiguous tensor, a median filter's unfolded patches), compiled once per ISA
// (included inside namespace kwker::sort_detail::<isa>, after select_row-inl.h).
//
// Algorithm: kLanes rows at once, one per vector lane (element j of the rows is one load). Each
// element's rank in (key, position) order is counted by comparing every pair of the row's elements:
// for a < b, key_a > key_b puts a after b, anything else b after a. The ranks are then a permutation
// of [0, n), and the element whose rank is the rule's rank (select_row-inl.h) is torch's answer:
// median and nanmedian order by (value, index), a total order; kthvalue's element is every correct
// selection's when its key is unique in the row, and rows where it is not are left to select_row
// (which replays torch's quickselect), as are nanmedians of NaNs only. O(n^2) vector compares per
// kLanes rows and no branch on the data: fixed-count lane loops the compiler vectorises.

#if defined(KWKER_ISA_AVX512)
inline constexpr int kLanes = 16;
#else
inline constexpr int kLanes = 8;
#endif
// Vectors of kLanes 32-bit integers (GCC's vector extension: compares give -1 / 0 per lane).
using Lanes = int32_t __attribute__((vector_size(4 * kLanes)));
using UnsignedLanes = uint32_t __attribute__((vector_size(4 * kLanes)));
using HalfLanes = uint16_t __attribute__((vector_size(2 * kLanes)));  // a row of 16-bit elements
using ByteLanes = uint8_t __attribute__((vector_size(kLanes)));       // of 8-bit ones

template <typename Format>
uint32_t select_lanes_typed(const SelectLanesJob& job) {
  using Bits = typename Format::Bits;
  constexpr bool kFloat = Format::kind == KeyKind::kFloat;
  constexpr auto kNanKey = static_cast<uint32_t>(static_cast<Bits>(~Bits(0)));
  const int64_t n = job.row.n, stride = job.row.input_stride;
  uint32_t left = 0;
  for (int group = 0; group < job.rows; group += kLanes) {
    const int lanes = std::min(kLanes, job.rows - group);
    const Bits* in = static_cast<const Bits*>(job.row.input) + group;
    // Keys with the top bit flipped, as signed integers: the lanes compare them in one instruction.
    alignas(64) int32_t key[kMaxLaneRowLength][kLanes];
    alignas(64) int32_t rank[kMaxLaneRowLength][kLanes];
    const Lanes before = {};  // every earlier element before element j, so far: rank j
    for (int64_t j = 0; j < n; ++j) {
      const Bits* e = in + j * stride;
      using NarrowLanes = std::conditional_t<sizeof(Bits) == 1, ByteLanes,
                                             std::conditional_t<sizeof(Bits) == 2, HalfLanes, UnsignedLanes>>;
      NarrowLanes raw;
      if (lanes == kLanes) {
        std::memcpy(&raw, e, sizeof raw);  // one vector load
      } else {
        for (int l = 0; l < kLanes; ++l) raw[l] = e[l < lanes ? l : 0];  // absent lanes repeat lane 0
      }
      for (int l = 0; l < kLanes; ++l) {
        key[j][l] = static_cast<int32_t>(uint32_t{sort_key<Format, false>(raw[l])} ^ 0x80000000u);
      }
      const Lanes r = before + static_cast<int32_t>(j);
      std::memcpy(rank[j], &r, sizeof r);
    }
    // Elements a and a + 1 against every later b at once, in vectors of the compiler's (a lane loop
    // leaves GCC mixing the two elements' lanes): their keys and ranks stay in registers, b's rank is
    // loaded and stored once for both. A compare gives -1 where a's key is above b's.
    Lanes* const keys = reinterpret_cast<Lanes*>(key);
    Lanes* const ranks = reinterpret_cast<Lanes*>(rank);
    for (int64_t a = 0; a + 1 < n; a += 2) {
      const Lanes key_0 = keys[a], key_1 = keys[a + 1], after = key_0 > key_1;
      Lanes rank_0 = ranks[a] - after, rank_1 = ranks[a + 1] + after;
      for (int64_t b = a + 2; b < n; ++b) {
        const Lanes after_0 = key_0 > keys[b], after_1 = key_1 > keys[b];
        rank_0 -= after_0;
        rank_1 -= after_1;
        ranks[b] += after_0 + after_1;
      }
      ranks[a] = rank_0;
      ranks[a + 1] = rank_1;
    }
    // (An odd n's last element has been compared with every other as some b.)
    uint32_t nans[kLanes] = {}, first_nan[kLanes], target[kLanes];
    for (int l = 0; l < kLanes; ++l) first_nan[l] = 0;
    if constexpr (kFloat) {
      for (int64_t j = n; j-- > 0;) {
        for (int l = 0; l < kLanes; ++l) {
          const bool nan = key[j][l] == static_cast<int32_t>(kNanKey ^ 0x80000000u);
          nans[l] += nan;
          first_nan[l] = nan ? static_cast<uint32_t>(j) : first_nan[l];
        }
      }
    }
    for (int l = 0; l < kLanes; ++l) {
      const int64_t numbers = job.rule == SelectRule::kNanMedian ? n - nans[l] : n;
      target[l] = static_cast<uint32_t>(job.rule == SelectRule::kKthValue ? job.k - 1 : (numbers - 1) / 2);
    }
    uint32_t position[kLanes] = {}, equal[kLanes] = {};
    int32_t chosen[kLanes] = {};
    for (int64_t j = 0; j < n; ++j) {
      for (int l = 0; l < kLanes; ++l) {
        const bool at = rank[j][l] == static_cast<int32_t>(target[l]);
        position[l] = at ? static_cast<uint32_t>(j) : position[l];
        chosen[l] = at ? key[j][l] : chosen[l];
      }
    }
    if (job.rule == SelectRule::kKthValue) {
      for (int64_t j = 0; j < n; ++j) {
        for (int l = 0; l < kLanes; ++l) equal[l] += key[j][l] == chosen[l];
      }
    }
    Bits* values = static_cast<Bits*>(job.values);
    for (int l = 0; l < lanes; ++l) {
      const int t = group + l;
      int64_t p = position[l];
      if (job.rule == SelectRule::kMedian && nans[l] != 0) p = first_nan[l];
      if ((job.rule == SelectRule::kKthValue && equal[l] > 1) ||
          (job.rule == SelectRule::kNanMedian && static_cast<int64_t>(nans[l]) == n)) {
        left |= uint32_t{1} << t;
        continue;
      }
      values[job.values_offsets[t]] = in[l + p * stride];
      job.indices[job.indices_offsets[t]] = p;
    }
  }
  return left;
}

uint32_t select_lanes(const SelectLanesJob& job) {
  return with_key_format(job.row, [&job]<typename Format, bool kDescending>() -> uint32_t {
    if constexpr (kDescending || Format::key_bits > 32) {
      return ~uint32_t{0};  // every row left to select_row (the driver does not ask for these)
    } else {
      return select_lanes_typed<Format>(job);
    }
  });
}
