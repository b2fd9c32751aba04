// UniqueRows (kwker/unique.h): rows compared as torch compares them. Element equality is ==
// (computed on the bits: a float NaN is unequal to everything, -0.0 equals +0.0); the sorted order
// is lexicographic by <, which on inputs without NaN and with one zero sign is the order of the
// elements' order-preserving keys, so a sort by keys (std::sort: equal rows are identical, their
// order is invisible) gives torch's runs.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <type_traits>

#include "kwker/unique.h"

namespace kwker {
namespace {

// How rows of one dtype compare: elements as their bits (Bits), floats by value through the bits.
template <typename Bits, bool kFloat, bool kSigned>
struct Elements {
  static constexpr bool kIsFloat = kFloat;
  static constexpr Bits kSign = static_cast<Bits>(Bits{1} << (8 * sizeof(Bits) - 1));
  Bits exponent, mantissa;  // floats: the masks of this format

  bool is_nan(Bits b) const { return kFloat && (b & exponent) == exponent && (b & mantissa) != 0; }
  // torch's ==: a NaN equals nothing, -0.0 equals +0.0.
  bool equal(Bits u, Bits v) const {
    if constexpr (!kFloat) return u == v;
    return !is_nan(u) && !is_nan(v) && (u == v || static_cast<Bits>((u | v) & ~kSign) == 0);
  }
  // An order-preserving key (floats without NaN; -0.0 below +0.0).
  static Bits key(Bits b) {
    if constexpr (kFloat) return static_cast<Bits>((b & kSign) ? ~b : (b | kSign));
    if constexpr (kSigned) return static_cast<Bits>(b ^ kSign);
    return b;
  }
};

template <typename E>
struct RowView {
  using Elements = E;
  using Bits = std::remove_cvref_t<decltype(E::kSign)>;
  E elements;
  const Bits* data;
  int64_t row_length;

  const Bits* row(int64_t r) const { return data + r * row_length; }

  bool equal(int64_t a, int64_t b) const {
    const Bits *x = row(a), *y = row(b);
    for (int64_t i = 0; i < row_length; ++i) {
      if (!elements.equal(x[i], y[i])) return false;
    }
    return true;
  }

  // Appends every i in [1, n) where element i starts a run (rows of one element, in their order),
  // branch-free; integers skip blocks of equal neighbours (equal bits: equal values).
  void find_changes(int64_t n, std::vector<int64_t>& starts) const {
    constexpr int64_t kBlock = 16;
    const size_t first = starts.size();
    starts.resize(first + static_cast<size_t>(n));
    int64_t* out = starts.data() + first;
    int64_t found = 0, i = 1;
    if constexpr (!E::kIsFloat) {
      for (; i + kBlock <= n; i += kBlock) {
        Bits differ = 0;
        for (int64_t j = 0; j < kBlock; ++j) differ |= data[i + j] ^ data[i + j - 1];
        if (differ == 0) continue;
        for (int64_t j = 0; j < kBlock; ++j) {
          out[found] = i + j;
          found += data[i + j] != data[i + j - 1];
        }
      }
    }
    for (; i < n; ++i) {
      out[found] = i;
      found += !elements.equal(data[i - 1], data[i]);
    }
    starts.resize(first + static_cast<size_t>(found));
  }

  // Lexicographic <, by keys (inputs prepare() accepted for sorting).
  bool less(int64_t a, int64_t b) const {
    const Bits *x = row(a), *y = row(b);
    for (int64_t i = 0; i < row_length; ++i) {
      if (x[i] != y[i]) return E::key(x[i]) < E::key(y[i]);
    }
    return false;
  }

  // Whether torch's sorted answer depends on its sort's order of equal rows.
  bool depends_on_tie_order(int64_t rows) const {
    if constexpr (!E::kIsFloat) return false;
    bool negative_zero = false, positive_zero = false;
    for (int64_t i = 0; i < rows * row_length; ++i) {
      if (elements.is_nan(data[i])) return true;
      negative_zero |= data[i] == E::kSign;
      positive_zero |= data[i] == 0;
    }
    return negative_zero && positive_zero;
  }
};

// Calls f(RowView) for the dtype.
template <typename F>
auto with_rows(DType d, const void* data, int64_t row_length, const F& f) {
  auto run = [&]<typename Bits, bool kFloat, bool kSigned>(Bits exponent, Bits mantissa) {
    using E = Elements<Bits, kFloat, kSigned>;
    return f(RowView<E>{E{exponent, mantissa}, static_cast<const Bits*>(data), row_length});
  };
  switch (d) {
    case DType::kBool:
    case DType::kUInt8: return run.template operator()<uint8_t, false, false>(0, 0);
    case DType::kInt8: return run.template operator()<uint8_t, false, true>(0, 0);
    case DType::kInt16: return run.template operator()<uint16_t, false, true>(0, 0);
    case DType::kInt32: return run.template operator()<uint32_t, false, true>(0, 0);
    case DType::kInt64: return run.template operator()<uint64_t, false, true>(0, 0);
    case DType::kFloat16: return run.template operator()<uint16_t, true, false>(0x7C00, 0x03FF);
    case DType::kBFloat16: return run.template operator()<uint16_t, true, false>(0x7F80, 0x007F);
    case DType::kFloat32: return run.template operator()<uint32_t, true, false>(0x7F800000u, 0x007FFFFFu);
    case DType::kFloat64: break;
  }
  return run.template operator()<uint64_t, true, false>(uint64_t{0x7FF} << 52, (uint64_t{1} << 52) - 1);
}

}  // namespace

template <typename View>
bool UniqueRows::pack_rows(const View& view) {
  if constexpr (View::Elements::kIsFloat) {
    return false;
  } else {
    std::vector<uint64_t> low(row_length_), high(row_length_);
    for (int64_t j = 0; j < row_length_; ++j) low[j] = high[j] = View::Elements::key(view.row(0)[j]);
    for (int64_t r = 1; r < rows_; ++r) {
      for (int64_t j = 0; j < row_length_; ++j) {
        const uint64_t k = View::Elements::key(view.row(r)[j]);
        low[j] = std::min(low[j], k);
        high[j] = std::max(high[j], k);
      }
    }
    std::vector<uint64_t> place(row_length_);  // the weight of each column in the packed key
    uint64_t product = 1;
    for (int64_t j = row_length_ - 1; j >= 0; --j) {
      place[j] = product;
      if (__builtin_mul_overflow(product, high[j] - low[j] + 1, &product) || product > (uint64_t{1} << 63) - 1) {
        return false;
      }
    }
    packed_keys_.resize(static_cast<size_t>(rows_));
    for (int64_t r = 0; r < rows_; ++r) {
      uint64_t key = 0;
      for (int64_t j = 0; j < row_length_; ++j) key += (View::Elements::key(view.row(r)[j]) - low[j]) * place[j];
      packed_keys_[r] = static_cast<int64_t>(key);
    }
    packed_.prepare(DType::kInt64, packed_keys_.data(), rows_, UniqueRanks::kWanted);
    count_ = packed_.count();
    return true;
  }
}

bool UniqueRows::prepare(DType dtype, RowRuns runs, const void* data, int64_t rows, int64_t row_length) {
  dtype_ = dtype;
  data_ = static_cast<const uint8_t*>(data);
  rows_ = rows;
  row_length_ = row_length;
  order_.clear();
  packed_keys_.clear();
  return with_rows(dtype, data, row_length, [&](const auto& view) {
    if (runs == RowRuns::kSorted) {
      if (view.depends_on_tie_order(rows)) return false;
      if (pack_rows(view)) return true;
      order_.resize(static_cast<size_t>(rows));
      std::iota(order_.begin(), order_.end(), 0);
      std::sort(order_.begin(), order_.end(), [&](int64_t a, int64_t b) { return view.less(a, b); });
    }
    const int64_t* order = order_.empty() ? nullptr : order_.data();  // null: rows in their own order
    starts_.assign(1, 0);
    if (!order && row_length == 1) {
      view.find_changes(rows, starts_);
    } else {
      for (int64_t i = 1; i < rows; ++i) {
        if (!(order ? view.equal(order[i - 1], order[i]) : view.equal(i - 1, i))) starts_.push_back(i);
      }
    }
    count_ = static_cast<int64_t>(starts_.size());
    starts_.push_back(rows);
    return true;
  });
}

namespace {

// The runs' first rows, their lengths and every row's run; kRowBytes 0: row_bytes at run time.
template <size_t kRowBytes>
void write_runs(const uint8_t* data, size_t row_bytes, const std::vector<int64_t>& order,
                const std::vector<int64_t>& starts, int64_t count, uint8_t* values, int64_t* inverse,
                int64_t* counts) {
  const size_t bytes = kRowBytes ? kRowBytes : row_bytes;
  for (int64_t run = 0; run < count; ++run) {
    const int64_t begin = starts[run], end = starts[run + 1];
    const int64_t first = order.empty() ? begin : order[begin];
    std::memcpy(values + run * bytes, data + first * bytes, kRowBytes ? kRowBytes : bytes);
    if (counts) counts[run] = end - begin;
    if (!inverse) continue;
    if (order.empty()) {
      std::fill(inverse + begin, inverse + end, run);
    } else {
      for (int64_t i = begin; i < end; ++i) inverse[order[i]] = run;
    }
  }
}

}  // namespace

void UniqueRows::write(void* values, int64_t* inverse, int64_t* counts) {
  if (!packed_keys_.empty()) {
    // Each distinct key's row: the first row with that rank (equal keys are equal integer rows).
    std::vector<int64_t> ranks(inverse ? 0 : rows_), keys(static_cast<size_t>(count_));
    int64_t* rank_of = inverse ? inverse : ranks.data();
    packed_.write(keys.data(), rank_of, counts);
    const size_t row_bytes = static_cast<size_t>(row_length_) * dtype_size(dtype_);
    std::vector<bool> written(static_cast<size_t>(count_), false);
    for (int64_t r = 0; r < rows_; ++r) {
      if (written[rank_of[r]]) continue;
      written[rank_of[r]] = true;
      std::memcpy(static_cast<uint8_t*>(values) + rank_of[r] * row_bytes, data_ + r * row_bytes, row_bytes);
    }
    return;
  }
  const size_t row_bytes = static_cast<size_t>(row_length_) * dtype_size(dtype_);
  auto* out = static_cast<uint8_t*>(values);
  switch (row_bytes) {
    case 1: return write_runs<1>(data_, row_bytes, order_, starts_, count_, out, inverse, counts);
    case 2: return write_runs<2>(data_, row_bytes, order_, starts_, count_, out, inverse, counts);
    case 4: return write_runs<4>(data_, row_bytes, order_, starts_, count_, out, inverse, counts);
    case 8: return write_runs<8>(data_, row_bytes, order_, starts_, count_, out, inverse, counts);
    case 16: return write_runs<16>(data_, row_bytes, order_, starts_, count_, out, inverse, counts);
    default: return write_runs<0>(data_, row_bytes, order_, starts_, count_, out, inverse, counts);
  }
}

}  // namespace kwker
