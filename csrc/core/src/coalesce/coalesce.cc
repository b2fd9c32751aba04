// coalesce (kwker/coalesce.h): keys, torch's sorted order, then the walk over runs of equal keys.
//
// The walk is split into chunks that start at run starts: one pass counts each chunk's runs, a prefix
// sum gives every chunk its first output position, a second pass writes. Each run is still summed by
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

// Keys below this are split back into indices with a double-precision quotient estimate (then
// corrected, so exact): cheaper than reading the indices of a random position.
constexpr int64_t kUnflattenKeyRange = int64_t{1} << 52;

template <typename Order>
struct Walk {
  const CoalesceProblem& p;
  Order order;
  bool unflatten;                    // the run's indices from its key (valid indices: the key names them)
  std::vector<double> inverse_size;  // 1 / sizes[d], for the quotient estimates
  std::vector<int64_t> chunk_start;  // chunk c covers sorted positions [chunk_start[c], chunk_start[c + 1])

  // Writes the indices of key into column `out` of new_indices: key = sum_d index_d * prod(sizes[d+1:]).
  void write_indices(int64_t key, int64_t out) const {
    for (int64_t d = p.sparse_dim - 1; d > 0; --d) {
      const int64_t size = p.sizes[d];
      int64_t q = static_cast<int64_t>(static_cast<double>(key) * inverse_size[static_cast<size_t>(d)]);
      int64_t r = key - q * size;
      while (r < 0) --q, r += size;
      while (r >= size) ++q, r -= size;
      p.new_indices[d * p.nnz + out] = r;
      key = q;
    }
    if (p.sparse_dim > 0) p.new_indices[out] = key;
  }

  bool starts_run(int64_t j) const { return j == 0 || order.key(j) != order.key(j - 1); }

  int64_t runs_in(int64_t c) const {
    int64_t runs = 0;
    for (int64_t j = chunk_start[c]; j < chunk_start[c + 1]; ++j) runs += starts_run(j);
    return runs;
  }

  template <typename T, typename A>
  bool write(int64_t c, int64_t out) const {
    const int64_t block = p.block_elements;
    const T* values = static_cast<const T*>(p.values);
    T* new_values = static_cast<T*>(p.new_values);
    bool nan = false;
    --out;
    const int64_t stop = chunk_start[c + 1];
    for (int64_t j = chunk_start[c]; j < stop; ++j) {
      if (j + kPrefetchDistance < stop) {  // the walk's reads are random: ask for them ahead
        const int64_t ahead = order.position(j + kPrefetchDistance);
        __builtin_prefetch(values + ahead * block);
        for (int64_t d = 0; d < p.sparse_dim && !unflatten; ++d) {
          __builtin_prefetch(p.indices + d * p.indices_stride0 + ahead * p.indices_stride1);
        }
      }
      const int64_t pos = order.position(j);
      const T* x = values + pos * block;
      if (starts_run(j)) {
        ++out;
        if (unflatten) {
          write_indices(order.key(j), out);
        } else {
          for (int64_t d = 0; d < p.sparse_dim; ++d) {
            p.new_indices[d * p.nnz + out] = p.indices[d * p.indices_stride0 + pos * p.indices_stride1];
          }
        }
        std::memcpy(new_values + out * block, x, static_cast<size_t>(block) * sizeof(T));
      } else {
        T* y = new_values + out * block;
        for (int64_t e = 0; e < block; ++e) y[e] = A::add(y[e], x[e], nan);
      }
    }
    return nan;
  }

  bool write_any(int64_t c, int64_t out) const {
    switch (p.dtype) {
      case DType::kFloat32: return write<float, FloatAdd<float>>(c, out);
      case DType::kFloat64: return write<double, FloatAdd<double>>(c, out);
      case DType::kFloat16: return write<uint16_t, HalfAdd<false>>(c, out);
      case DType::kBFloat16: return write<uint16_t, HalfAdd<true>>(c, out);
      case DType::kBool: return write<uint8_t, OrAdd>(c, out);
      case DType::kUInt8: return write<uint8_t, WrapAdd<uint8_t, uint8_t>>(c, out);
      case DType::kInt8: return write<int8_t, WrapAdd<int8_t, uint8_t>>(c, out);
      case DType::kInt16: return write<int16_t, WrapAdd<int16_t, uint16_t>>(c, out);
      case DType::kInt32: return write<int32_t, WrapAdd<int32_t, uint32_t>>(c, out);
      case DType::kInt64: return write<int64_t, WrapAdd<int64_t, uint64_t>>(c, out);
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
// position_bits with its position below; false for an index outside its size.
bool flatten(const CoalesceProblem& p, uint64_t* keys, int position_bits) {
  std::vector<uint64_t> multiplier(static_cast<size_t>(p.sparse_dim));
  uint64_t m = 1;
  for (int64_t d = p.sparse_dim - 1; d >= 0; --d) {
    multiplier[static_cast<size_t>(d)] = m << position_bits;
    m *= static_cast<uint64_t>(p.sizes[d]);
  }
  const uint64_t* mult = multiplier.data();
  const uint64_t* size = reinterpret_cast<const uint64_t*>(p.sizes);  // sizes are >= 0 (key_range)
  std::atomic<bool> valid{true};
  parallel_for(0, p.nnz, kChunkElements, [&](int64_t begin, int64_t end) {
    bool ok = true;
    for (int64_t i = begin; i < end; ++i) {
      uint64_t key = position_bits == 0 ? 0 : static_cast<uint64_t>(i);
      const int64_t* column = p.indices + i * p.indices_stride1;
      for (int64_t d = 0; d < p.sparse_dim; ++d) {
        const uint64_t index = static_cast<uint64_t>(column[d * p.indices_stride0]);  // negative: huge
        ok &= index < size[d];
        key += index * mult[d];
      }
      keys[i] = key;
    }
    if (!ok) valid.store(false, std::memory_order_relaxed);
  });
  return valid.load();
}

template <typename Order>
int64_t walk(const CoalesceProblem& p, int64_t range, Order order) {
  Walk<Order> walk{p, order, range <= kUnflattenKeyRange, {}, {}};
  for (int64_t d = 0; d < p.sparse_dim; ++d) walk.inverse_size.push_back(1.0 / static_cast<double>(p.sizes[d]));
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
  if (p.nnz > kMaxSortRowLength || range < 0) return -1;
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
