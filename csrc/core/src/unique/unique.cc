// UniqueSorted (kwker/unique.h): a counting table for integers of a small range, else a stable sort
// and a scan for runs. Both give the distinct values ascending, ranks and multiplicities, which are
// torch's answer whenever it does not depend on its sort's order of equal keys (prepare() checks).
#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kwker/sort.h"
#include "kwker/unique.h"

namespace kwker {
namespace {

// A range this small is always counted (8- and 16-bit types); a larger one if it is at most
// kTableElementsPerInput times the input and at most kMaxTable values (the table then stays in L2
// cache, where counting beats sorting).
constexpr uint64_t kAlwaysTable = uint64_t{1} << 16;
constexpr uint64_t kMaxTable = uint64_t{1} << 22;
constexpr uint64_t kTableElementsPerInput = 2;

struct FloatBits {
  uint64_t sign, exponent, mantissa;
};

FloatBits float_bits(DType d) {
  switch (d) {
    case DType::kFloat16: return {0x8000, 0x7C00, 0x03FF};
    case DType::kBFloat16: return {0x8000, 0x7F80, 0x007F};
    case DType::kFloat32: return {0x80000000u, 0x7F800000u, 0x007FFFFFu};
    default: return {uint64_t{1} << 63, uint64_t{0x7FF} << 52, (uint64_t{1} << 52) - 1};
  }
}

}  // namespace

template <typename T>
void UniqueSorted::count_in_table(const T* data, int64_t n, int64_t low, int64_t range) {
  low_ = low;
  table_.assign(static_cast<size_t>(range), 0);
  uint32_t* table = table_.data();
  for (int64_t i = 0; i < n; ++i) ++table[static_cast<int64_t>(data[i]) - low];
  count_ = range - std::count(table_.begin(), table_.end(), 0u);
}

template <typename T>
void UniqueSorted::sort_and_count_runs(const T* data, int64_t n) {
  sorted_.resize(static_cast<size_t>(n) * sizeof(T));
  permutation_.resize(static_cast<size_t>(n));
  SortRowsProblem p{};
  p.dtype = dtype_;
  p.order = SortOrder::kAscending;
  p.ties = TieOrder::kStable;
  p.row_length = n;
  p.input = {const_cast<T*>(data), 1, {}};
  p.values = {sorted_.data(), 1, {}};
  p.indices = {permutation_.data(), 1, {}};
  sort_rows(p);
  const T* sorted = reinterpret_cast<const T*>(sorted_.data());
  int64_t runs = 1;
  for (int64_t i = 1; i < n; ++i) runs += sorted[i] != sorted[i - 1];
  count_ = runs;
}

template <typename T>
bool UniqueSorted::prepare_typed(const T* data, int64_t n) {
  if (is_floating(dtype_)) {
    // T holds the bits. Equal bits are equal values here: no NaN, and zeros of one sign only.
    const FloatBits f = float_bits(dtype_);
    bool nan = false, negative_zero = false, positive_zero = false;
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t b = data[i];
      nan |= (b & f.exponent) == f.exponent && (b & f.mantissa) != 0;
      negative_zero |= b == f.sign;
      positive_zero |= b == 0;
    }
    if (nan || (negative_zero && positive_zero)) return false;
    sort_and_count_runs(data, n);
    return true;
  }
  T low = data[0], high = data[0];
  for (int64_t i = 1; i < n; ++i) {
    low = std::min(low, data[i]);
    high = std::max(high, data[i]);
  }
  const uint64_t range = static_cast<uint64_t>(static_cast<int64_t>(high)) -
                         static_cast<uint64_t>(static_cast<int64_t>(low)) + 1;  // 0: all of int64
  const bool table = range != 0 && (range <= kAlwaysTable ||
                                    (range <= kMaxTable && range <= kTableElementsPerInput * static_cast<uint64_t>(n)));
  if (table) {
    count_in_table(data, n, static_cast<int64_t>(low), static_cast<int64_t>(range));
  } else {
    sort_and_count_runs(data, n);
  }
  return true;
}

template <typename T>
void UniqueSorted::write_typed(T* values, int64_t* inverse, int64_t* counts) {
  const T* data = static_cast<const T*>(data_);
  if (!table_.empty()) {
    uint32_t* table = table_.data();
    uint32_t rank = 0;
    for (size_t j = 0; j < table_.size(); ++j) {
      if (table[j] == 0) continue;
      values[rank] = static_cast<T>(low_ + static_cast<int64_t>(j));
      if (counts) counts[rank] = table[j];
      table[j] = rank++;
    }
    if (inverse) {
      for (int64_t i = 0; i < n_; ++i) inverse[i] = table[static_cast<int64_t>(data[i]) - low_];
    }
    return;
  }
  const T* sorted = reinterpret_cast<const T*>(sorted_.data());
  int64_t run = 0, run_start = 0;
  values[0] = sorted[0];
  for (int64_t i = 1; i < n_; ++i) {
    if (sorted[i] != sorted[i - 1]) {
      if (counts) counts[run] = i - run_start;
      values[++run] = sorted[i];
      run_start = i;
    }
    if (inverse) inverse[permutation_[i]] = run;
  }
  if (inverse) inverse[permutation_[0]] = 0;
  if (counts) counts[run] = n_ - run_start;
}

bool UniqueSorted::prepare(DType dtype, const void* data, int64_t n) {
  dtype_ = dtype;
  data_ = data;
  n_ = n;
  table_.clear();
  sorted_.clear();
  permutation_.clear();
  switch (dtype) {
    case DType::kUInt8: return prepare_typed(static_cast<const uint8_t*>(data), n);
    case DType::kInt8: return prepare_typed(static_cast<const int8_t*>(data), n);
    case DType::kInt16: return prepare_typed(static_cast<const int16_t*>(data), n);
    case DType::kInt32: return prepare_typed(static_cast<const int32_t*>(data), n);
    case DType::kInt64: return prepare_typed(static_cast<const int64_t*>(data), n);
    case DType::kFloat16:
    case DType::kBFloat16: return prepare_typed(static_cast<const uint16_t*>(data), n);
    case DType::kFloat32: return prepare_typed(static_cast<const uint32_t*>(data), n);
    case DType::kFloat64: return prepare_typed(static_cast<const uint64_t*>(data), n);
    case DType::kBool: break;
  }
  return false;
}

void UniqueSorted::write(void* values, int64_t* inverse, int64_t* counts) {
  switch (dtype_) {
    case DType::kUInt8: return write_typed(static_cast<uint8_t*>(values), inverse, counts);
    case DType::kInt8: return write_typed(static_cast<int8_t*>(values), inverse, counts);
    case DType::kInt16: return write_typed(static_cast<int16_t*>(values), inverse, counts);
    case DType::kInt32: return write_typed(static_cast<int32_t*>(values), inverse, counts);
    case DType::kInt64: return write_typed(static_cast<int64_t*>(values), inverse, counts);
    case DType::kFloat16:
    case DType::kBFloat16: return write_typed(static_cast<uint16_t*>(values), inverse, counts);
    case DType::kFloat32: return write_typed(static_cast<uint32_t*>(values), inverse, counts);
    case DType::kFloat64: return write_typed(static_cast<uint64_t*>(values), inverse, counts);
    case DType::kBool: break;
  }
}

}  // namespace kwker
