// search_sorted: each boundary row as keys the ISA variant can gather (the row itself, or a copy
// widened to 32 bits and/or put in sorter order: torch's b[sorter[mid]] is this copy's b'[mid], so the
// search's steps are the same), values widened the same way in blocks, and the values (1-d
// boundaries) or rows (N-d) spread over kwker::parallel_for. Widening is exact (8/16-bit integers into
// int32, float16/bfloat16 into float, as torch compares them), so every comparison is torch's.
#include <algorithm>
#include <bit>
#include <cstring>
#include <type_traits>
#include <vector>

#include "float16.h"
#include "kwker/cpu.h"
#include "kwker/parallel.h"
#include "kwker/search.h"
#include "search/search_kernels.h"

namespace kwker {
namespace {

using search_detail::SearchFn;
using search_detail::SearchKernels;

// Values per parallel work item: torch's own grain is 200 values, Kwker searches ~10x faster.
constexpr int64_t kGrainValues = 4096;
// A row copy costs about as much as this many binary-search steps of torch's per boundary.
constexpr int64_t kCopyCostInSteps = 4;
constexpr int64_t kValueBlock = 512;
// 8- and 16-bit values against one row: with at least this many values per possible bit pattern, every
// pattern's position is searched once and the values look theirs up.
constexpr int64_t kValuesPerTableEntry = 2;

const SearchKernels& kernels() {
  switch (active_isa()) {
    case Isa::kAvx512: return search_detail::avx512::kKernels;
    case Isa::kAvx2: return search_detail::avx2::kKernels;
    case Isa::kScalar: break;
  }
  return search_detail::scalar::kKernels;
}

// How an element of each type is stored and the key it compares as.
template <DType kType> struct SearchType;
template <typename S, typename K = S>
struct Plain {
  using Stored = S;
  using Key = K;
  static Key key(Stored x) { return x; }
};
template <> struct SearchType<DType::kUInt8> : Plain<uint8_t, int32_t> {};
template <> struct SearchType<DType::kInt8> : Plain<int8_t, int32_t> {};
template <> struct SearchType<DType::kInt16> : Plain<int16_t, int32_t> {};
template <> struct SearchType<DType::kInt32> : Plain<int32_t> {};
template <> struct SearchType<DType::kInt64> : Plain<int64_t> {};
template <> struct SearchType<DType::kFloat32> : Plain<float> {};
template <> struct SearchType<DType::kFloat64> : Plain<double> {};
template <> struct SearchType<DType::kFloat16> {
  using Stored = uint16_t;
  using Key = float;
  static Key key(Stored x) { return half_to_float(x); }
};
template <> struct SearchType<DType::kBFloat16> {
  using Stored = uint16_t;
  using Key = float;
  static Key key(Stored x) { return bfloat16_to_float(x); }
};

template <typename Key>
SearchFn<Key> kernel_for(const SearchKernels& k) {
  if constexpr (std::is_same_v<Key, float>) return k.f32;
  if constexpr (std::is_same_v<Key, double>) return k.f64;
  if constexpr (std::is_same_v<Key, int32_t>) return k.i32;
  if constexpr (std::is_same_v<Key, int64_t>) return k.i64;
}

template <DType kType>
bool search_typed(const SearchSortedProblem& p) {
  using Type = SearchType<kType>;
  using Stored = typename Type::Stored;
  using Key = typename Type::Key;
  constexpr bool kWidened = !std::is_same_v<Stored, Key>;
  const bool copy_rows = kWidened || p.sorter != nullptr;
  const int32_t m = static_cast<int32_t>(p.row_length);
  const int64_t steps = std::bit_width(static_cast<uint64_t>(m));
  if (p.values_per_row == 0) return true;
  if (copy_rows && p.values_per_row * steps * kCopyCostInSteps < m) {
    return false;
  }
  const SearchFn<Key> search = kernel_for<Key>(kernels());
  const auto* boundaries = static_cast<const Stored*>(p.boundaries);
  const auto* values = static_cast<const Stored*>(p.values);
  char* const out = static_cast<char*>(p.out);
  const int64_t out_size = p.out_int32 ? 4 : 8;

  // Row r of the boundaries as keys: the row itself, or its copy in `copy`.
  const auto row_keys = [&](int64_t r, std::vector<Key>& copy) -> const Key* {
    const Stored* row = boundaries + r * m;
    if constexpr (!kWidened) {
      if (!p.sorter) return row;
    }
    copy.resize(m);
    const int64_t* order = p.sorter ? p.sorter + r * m : nullptr;
    for (int32_t j = 0; j < m; ++j) copy[j] = Type::key(row[order ? order[j] : j]);
    return copy.data();
  };
  // Values [begin, end) (flat indices) searched in `row`.
  const auto search_values = [&](const Key* row, int64_t begin, int64_t end) {
    if constexpr (!kWidened) {
      search(row, m, values + begin, end - begin, p.side, p.out_int32, out + begin * out_size);
    } else {
      Key block[kValueBlock];
      for (int64_t b = begin; b < end; b += kValueBlock) {
        const int64_t n = std::min(kValueBlock, end - b);
        for (int64_t j = 0; j < n; ++j) block[j] = Type::key(values[b + j]);
        search(row, m, block, n, p.side, p.out_int32, out + b * out_size);
      }
    }
  };

  const int64_t per_row = p.values_per_row;
  if constexpr (kWidened) {
    constexpr int64_t kPatterns = int64_t{1} << (8 * sizeof(Stored));
    if (p.boundary_rows == 1 && per_row >= kValuesPerTableEntry * kPatterns) {
      std::vector<Key> copy, patterns(kPatterns);
      const Key* row = row_keys(0, copy);
      for (int64_t b = 0; b < kPatterns; ++b) patterns[b] = Type::key(static_cast<Stored>(b));
      std::vector<char> table(kPatterns * out_size);
      search(row, m, patterns.data(), kPatterns, p.side, p.out_int32, table.data());
      using Unsigned = std::make_unsigned_t<Stored>;
      const auto look_up = [&]<typename Out>(Out* to) {
        const Out* from = reinterpret_cast<const Out*>(table.data());
        parallel_for(0, per_row, kGrainValues, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) to[i] = from[static_cast<Unsigned>(values[i])];
        });
      };
      if (p.out_int32) look_up(reinterpret_cast<int32_t*>(out));
      else look_up(reinterpret_cast<int64_t*>(out));
      return true;
    }
  }
  if (p.boundary_rows == 1) {
    std::vector<Key> copy;
    const Key* row = row_keys(0, copy);
    parallel_for(0, per_row, kGrainValues, [&](int64_t begin, int64_t end) { search_values(row, begin, end); });
    return true;
  }
  const int64_t grain_rows = std::max<int64_t>(1, kGrainValues / std::max<int64_t>(per_row, 1));
  parallel_for(0, p.boundary_rows, grain_rows, [&](int64_t begin, int64_t end) {
    std::vector<Key> copy;
    for (int64_t r = begin; r < end; ++r) search_values(row_keys(r, copy), r * per_row, (r + 1) * per_row);
  });
  return true;
}

}  // namespace

bool search_sorted(const SearchSortedProblem& p) {
  switch (p.dtype) {
    case DType::kUInt8: return search_typed<DType::kUInt8>(p);
    case DType::kInt8: return search_typed<DType::kInt8>(p);
    case DType::kInt16: return search_typed<DType::kInt16>(p);
    case DType::kInt32: return search_typed<DType::kInt32>(p);
    case DType::kInt64: return search_typed<DType::kInt64>(p);
    case DType::kFloat16: return search_typed<DType::kFloat16>(p);
    case DType::kBFloat16: return search_typed<DType::kBFloat16>(p);
    case DType::kFloat32: return search_typed<DType::kFloat32>(p);
    case DType::kFloat64: return search_typed<DType::kFloat64>(p);
    case DType::kBool: break;
  }
  return false;
}

}  // namespace kwker
