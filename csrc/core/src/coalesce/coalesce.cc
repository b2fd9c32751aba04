// coalesce (kwker/coalesce.h): keys, torch's sorted order, then the walk over runs of equal keys.
//
// The walk is split into chunks that start at run starts: one pass counts each chunk's runs, a prefix
// sum gives every chunk its first output position, a second pass writes: first the chunk's index
// columns, then its summed values (two streams at a time instead of five). Each run is still summed by
// one thread in sorted order, so the result never depends on the thread count.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <memory>
#include <vector>

#include "float16.h"
#include "key_radix_sort.h"
#include "kwker/coalesce.h"
#include "kwker/parallel.h"
#include "kwker/sort.h"
#include "scratch_array.h"

namespace kwker {
namespace {

constexpr int64_t kChunkElements = 1 << 16;
constexpr int64_t kMaxChunks = 256;
constexpr int64_t kPrefetchDistance = 16;

// y + x as torch's axpy with alpha 1 computes it, per element type. `nan` reports a NaN sum.
template <typename T>
struct FloatAdd {
  static T add(T y, T x, bool& nan) {
    const T r = y + x;
    nan |= r != r;
    return r;
  }
};
template <bool kBFloat16>
struct HalfAdd {
  static uint16_t add(uint16_t y, uint16_t x, bool& nan) {
    const float r = kBFloat16 ? bfloat16_to_float(y) + bfloat16_to_float(x) : half_to_float(y) + half_to_float(x);
    nan |= r != r;
    return kBFloat16 ? float_to_bfloat16(r) : float_to_half(r);
  }
};
template <typename T, typename U>  // integers wrap: add as the unsigned type of the same width
struct WrapAdd {
  static T add(T y, T x, bool&) { return static_cast<T>(static_cast<U>(static_cast<U>(y) + static_cast<U>(x))); }
};
struct OrAdd {  // bool: y + x is nonzero
  static uint8_t add(uint8_t y, uint8_t x, bool&) { return (y | x) != 0; }
};

// The sorted order as a radix sort leaves it: each key packed above its position.
struct PackedOrder {
  const uint64_t* packed;
  int position_bits;
  int64_t key(int64_t j) const { return static_cast<int64_t>(packed[j] >> position_bits); }
  int64_t position(int64_t j) const {
    return static_cast<int64_t>(packed[j] & ((uint64_t{1} << position_bits) - 1));
  }
};

// The sorted order as kwker/sort.h leaves it: sorted keys and their positions.
struct SplitOrder {
  const uint64_t* keys;
  const int64_t* positions;
  int64_t key(int64_t j) const { return static_cast<int64_t>(keys[j]); }
  int64_t position(int64_t j) const { return positions[j]; }
};

// Sparse dims Kwker coalesces (more go to torch): the per-dim numbers of the flatten and the walk
// then live in fixed arrays of a local object, which the compiler knows the stores cannot touch.
constexpr int64_t kMaxSparseDims = 16;

// Keys below this are split back into indices with a double-precision quotient estimate (then
// corrected, so exact): cheaper than reading the indices of a random position.
constexpr int64_t kUnflattenKeyRange = int64_t{1} << 52;

// Writes each run's indices into its column of new_indices: split from the key, or copied from the
// run's first element.
struct IndexColumns {
  int64_t dims;
  int64_t* new_indices;  // dims x column_count, contiguous
  int64_t column_count;
  bool unflatten;  // from the key (valid indices: the key names them)
  int64_t size[kMaxSparseDims];
  double inverse_size[kMaxSparseDims];  // 1 / size, for the quotient estimates
  const int64_t* row[kMaxSparseDims];   // the input's index rows, element stride `stride`
  int64_t stride;

  explicit IndexColumns(const CoalesceProblem& p, int64_t range)
      : dims(p.sparse_dim), new_indices(p.new_indices), column_count(p.nnz),
        unflatten(range <= kUnflattenKeyRange), stride(p.indices_stride1) {
    for (int64_t d = 0; d < dims; ++d) {
      size[d] = p.sizes[d];
      inverse_size[d] = 1.0 / static_cast<double>(p.sizes[d]);
      row[d] = p.indices + d * p.indices_stride0;
    }
  }

  void prefetch(int64_t position) const {
    if (unflatten) return;
    for (int64_t d = 0; d < dims; ++d) __builtin_prefetch(row[d] + position * stride);
  }

  // key = sum_d index_d * prod(size[d+1:]), of the element at `position`.
  void write(int64_t key, int64_t position, int64_t out) const {
    if (!unflatten) {
      for (int64_t d = 0; d < dims; ++d) new_indices[d * column_count + out] = row[d][position * stride];
      return;
    }
    for (int64_t d = dims - 1; d > 0; --d) {
      int64_t q = static_cast<int64_t>(static_cast<double>(key) * inverse_size[d]);
      int64_t r = key - q * size[d];
      while (r < 0) --q, r += size[d];
      while (r >= size[d]) ++q, r -= size[d];
      new_indices[d * column_count + out] = r;
      key = q;
    }
    if (dims > 0) new_indices[out] = key;
  }
};

template <typename Order>
struct Walk {
  const CoalesceProblem& p;
  Order order;
  IndexColumns columns;
  std::vector<int64_t> chunk_start;  // chunk c covers sorted positions [chunk_start[c], chunk_start[c + 1])

  bool starts_run(int64_t j) const { return j == 0 || order.key(j) != order.key(j - 1); }

  int64_t runs_in(int64_t c) const {
    int64_t runs = 0;
    for (int64_t j = chunk_start[c]; j < chunk_start[c + 1]; ++j) runs += starts_run(j);
    return runs;
  }

  // The indices of chunk c's runs, the first at column `out`: a pass of its own, since mixed into the
  // values' walk the index stores slow the random value reads several times over.
  void write_indices(int64_t c, int64_t out) const {
    const IndexColumns indices = columns;  // a local copy: see kMaxSparseDims
    const Order sorted = order;
    --out;
    int64_t previous_key = -1;  // keys are >= 0, and every chunk starts a run
    const int64_t stop = chunk_start[c + 1];
    for (int64_t j = chunk_start[c]; j < stop; ++j) {
      if (j + kPrefetchDistance < stop) indices.prefetch(sorted.position(j + kPrefetchDistance));
      const int64_t key = sorted.key(j);
      if (key != previous_key) {
        previous_key = key;
        indices.write(key, sorted.position(j), ++out);
      }
    }
  }

  // The values of chunk c's runs, the first at `out`. kScalar: one value per element (block_elements
  // == 1), copied without a call to memcpy.
  template <typename T, typename A, bool kScalar>
  bool write_values(int64_t c, int64_t out) const {
    const Order sorted = order;
    const int64_t block = kScalar ? 1 : p.block_elements;
    const T* values = static_cast<const T*>(p.values);
    T* new_values = static_cast<T*>(p.new_values);
    bool nan = false;
    --out;
    int64_t previous_key = -1;
    const int64_t stop = chunk_start[c + 1];
    for (int64_t j = chunk_start[c]; j < stop; ++j) {
      if (j + kPrefetchDistance < stop) {  // the walk's reads are random: ask for them ahead
        __builtin_prefetch(values + sorted.position(j + kPrefetchDistance) * block);
      }
      const int64_t key = sorted.key(j);
      const T* x = values + sorted.position(j) * block;
      if (key != previous_key) {
        previous_key = key;
        ++out;
        std::memcpy(new_values + out * block, x, static_cast<size_t>(block) * sizeof(T));
      } else {
        T* y = new_values + out * block;
        for (int64_t e = 0; e < block; ++e) y[e] = A::add(y[e], x[e], nan);
      }
    }
    return nan;
  }

  template <typename T, typename A>
  bool write_blocks(int64_t c, int64_t out) const {
    return p.block_elements == 1 ? write_values<T, A, true>(c, out) : write_values<T, A, false>(c, out);
  }

  bool write_any(int64_t c, int64_t out) const {
    switch (p.dtype) {
      case DType::kFloat32: return write_blocks<float, FloatAdd<float>>(c, out);
      case DType::kFloat64: return write_blocks<double, FloatAdd<double>>(c, out);
      case DType::kFloat16: return write_blocks<uint16_t, HalfAdd<false>>(c, out);
      case DType::kBFloat16: return write_blocks<uint16_t, HalfAdd<true>>(c, out);
      case DType::kBool: return write_blocks<uint8_t, OrAdd>(c, out);
      case DType::kUInt8: return write_blocks<uint8_t, WrapAdd<uint8_t, uint8_t>>(c, out);
      case DType::kInt8: return write_blocks<int8_t, WrapAdd<int8_t, uint8_t>>(c, out);
      case DType::kInt16: return write_blocks<int16_t, WrapAdd<int16_t, uint16_t>>(c, out);
      case DType::kInt32: return write_blocks<int32_t, WrapAdd<int32_t, uint32_t>>(c, out);
      case DType::kInt64: return write_blocks<int64_t, WrapAdd<int64_t, uint64_t>>(c, out);
    }
    return false;
  }
};

// The product of the sparse sizes: keys lie in [0, product). -1 if it passes int64.
int64_t key_range(const CoalesceProblem& p) {
  int64_t m = 1;
  for (int64_t d = 0; d < p.sparse_dim; ++d) {
    if (p.sizes[d] < 0 || __builtin_mul_overflow(m, p.sizes[d], &m)) return -1;
  }
  return m;
}

// Row-major keys over the sparse sizes, as torch's flatten_indices computes them, each shifted up by
// position_bits with its position below; false for an index outside its size. One pass over the
// columns: the index rows are read side by side, as parallel streams.
bool flatten(const CoalesceProblem& p, uint64_t* keys, int position_bits) {
  const int64_t dims = p.sparse_dim;
  uint64_t multiplier[kMaxSparseDims], size[kMaxSparseDims];
  const int64_t* row[kMaxSparseDims];
  uint64_t m = 1;
  for (int64_t d = dims - 1; d >= 0; --d) {
    multiplier[d] = m << position_bits;
    size[d] = static_cast<uint64_t>(p.sizes[d]);  // >= 0 (key_range)
    row[d] = p.indices + d * p.indices_stride0;
    m *= size[d];
  }
  const int64_t stride = p.indices_stride1;
  const uint64_t position_factor = position_bits == 0 ? 0 : 1;
  std::atomic<bool> valid{true};
  parallel_for(0, p.nnz, kChunkElements, [&](int64_t begin, int64_t end) {
    uint64_t outside = 0;
    for (int64_t i = begin; i < end; ++i) {
      uint64_t key = position_factor * static_cast<uint64_t>(i);
      for (int64_t d = 0; d < dims; ++d) {
        const uint64_t index = static_cast<uint64_t>(row[d][i * stride]);  // negative: huge, outside
        outside |= index >= size[d] ? 1 : 0;
        key += index * multiplier[d];
      }
      keys[i] = key;
    }
    if (outside != 0) valid.store(false, std::memory_order_relaxed);
  });
  return valid.load();
}

template <typename Order>
int64_t walk(const CoalesceProblem& p, int64_t range, Order order) {
  Walk<Order> walk{p, order, IndexColumns(p, range), {}};
  const int64_t chunks = std::min<int64_t>(kMaxChunks, (p.nnz + kChunkElements - 1) / kChunkElements);
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t j = p.nnz * c / chunks;
    while (j < p.nnz && !walk.starts_run(j)) ++j;
    walk.chunk_start.push_back(j);
  }
  walk.chunk_start.push_back(p.nnz);
  std::vector<int64_t> first_output(static_cast<size_t>(chunks) + 1, 0);
  parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) first_output[static_cast<size_t>(c) + 1] = walk.runs_in(c);
  });
  for (int64_t c = 0; c < chunks; ++c) first_output[c + 1] += first_output[c];
  std::atomic<bool> nan{false};
  parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      walk.write_indices(c, first_output[static_cast<size_t>(c)]);
      if (walk.write_any(c, first_output[static_cast<size_t>(c)])) nan.store(true, std::memory_order_relaxed);
    }
  });
  return nan.load() ? -1 : first_output[static_cast<size_t>(chunks)];
}

}  // namespace

// The sort: a stable order is a radix sort of each key packed above its position when both fit in 64
// bits (8 bytes an element, digits over the key bits only), else kwker/sort.h, which also gives torch's
// introsort tie order where float sums need it.
int64_t coalesce(const CoalesceProblem& p) {
  const int64_t range = key_range(p);
  if (p.nnz > kMaxSortRowLength || range < 0 || p.sparse_dim > kMaxSparseDims) return -1;
  const size_t n = static_cast<size_t>(p.nnz);
  // Within a run only float sums depend on the order: integers and bool take a stable sort.
  const bool stable = !is_floating(p.dtype) || p.block_elements == 0 || p.torch_sorts_stably;
  const int key_bits = std::bit_width(static_cast<uint64_t>(range - 1));
  const int position_bits = std::bit_width(static_cast<uint64_t>(p.nnz - 1));
  if (stable && key_bits + position_bits <= 64) {
    ScratchArray<uint64_t> packed(n), buffer(n);
    if (!flatten(p, packed.get(), position_bits)) return -1;
    const uint64_t* sorted = key_radix_sort(packed.get(), p.nnz, buffer.get(), position_bits, position_bits + key_bits);
    return walk(p, range, PackedOrder{sorted, position_bits});
  }
  std::unique_ptr<uint64_t[]> keys(new uint64_t[n]), sorted_keys(new uint64_t[n]);
  std::unique_ptr<int64_t[]> positions(new int64_t[n]);
  if (!flatten(p, keys.get(), 0)) return -1;
  SortRowsProblem sort{};
  sort.dtype = DType::kInt64;  // keys below 2^63: their order as int64 is their order as uint64
  sort.order = SortOrder::kAscending;
  sort.ties = stable ? TieOrder::kStable : TieOrder::kIntrosort;
  sort.row_length = p.nnz;
  sort.input = StridedRows{keys.get(), 1, {}};
  sort.values = StridedRows{sorted_keys.get(), 1, {}};
  sort.indices = StridedRows{positions.get(), 1, {}};
  sort_rows(sort);
  return walk(p, range, SplitOrder{sorted_keys.get(), positions.get()});
}

}  // namespace kwker
