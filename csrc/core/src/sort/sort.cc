// sort_rows, topk_rows and select_rows: split the rows over kwker::parallel_for and hand each to the
// ISA variant in use.
// Rows that run along a strided dim while neighbouring rows sit next to each other in memory (a sort
// along dim 0 of a contiguous tensor) are sorted a tile of kTileRows at a time: the tile is copied to
// contiguous rows, sorted (or selected from), and copied back, so each cache line is read and
// written once, not once per row.
#include <emmintrin.h>  // SSE2, in every x86-64 CPU: the tile copy's transposes

#include <algorithm>
#include <cstring>
#include <vector>

#include "kwker/cpu.h"
#include "kwker/parallel.h"
#include "kwker/select.h"
#include "kwker/sort.h"
#include "kwker/topk.h"
#include "sort/row_cursor.h"
#include "sort/sort_row.h"

namespace kwker {
namespace {

using sort_detail::kPad;
using sort_detail::RowJob;
using RowCursor = sort_detail::RowCursor<SortRowsProblem>;
using sort_detail::element_at;
using sort_detail::row_count;

struct RowKernels {
  void (*sort_row)(const RowJob&);
  bool (*declines)(const RowJob&);
  void (*topk_row)(const sort_detail::TopKJob&);
  void (*select_row)(const sort_detail::SelectJob&);
  uint32_t (*select_lanes)(const sort_detail::SelectLanesJob&);
};

RowKernels row_kernels_for(Isa isa) {
  namespace sd = sort_detail;
  switch (isa) {
    case Isa::kAvx512:
      return {&sd::avx512::sort_row, &sd::avx512::declines, &sd::avx512::topk_row, &sd::avx512::select_row,
              &sd::avx512::select_lanes};
    case Isa::kAvx2:
      return {&sd::avx2::sort_row, &sd::avx2::declines, &sd::avx2::topk_row, &sd::avx2::select_row,
              &sd::avx2::select_lanes};
    case Isa::kScalar: break;
  }
  return {&sd::scalar::sort_row, &sd::scalar::declines, &sd::scalar::topk_row, &sd::scalar::select_row,
          &sd::scalar::select_lanes};
}

constexpr int kTileRows = 16;

// Per-thread work buffers, grown to the longest row seen and kept.
struct Workspace {
  std::vector<uint64_t> a, b;
  std::vector<uint64_t> tile_input, tile_values, tile_indices;  // kTileRows contiguous rows each
  std::vector<uint64_t> row_input;                              // one row's input, contiguous
  void reserve(int64_t n) {
    const size_t need = static_cast<size_t>(2 * n + 2 * kPad);
    if (a.size() < need) {
      a.assign(need, 0);
      b.assign(need, 0);
    }
  }
  void reserve_row(int64_t n) {
    if (row_input.size() < static_cast<size_t>(n)) row_input.assign(static_cast<size_t>(n), 0);
  }
  void reserve_tile(int64_t n) {
    const size_t need = static_cast<size_t>(kTileRows * n);
    if (tile_input.size() < need) {
      tile_input.assign(need, 0);
      tile_values.assign(need, 0);
      tile_indices.assign(need, 0);
    }
  }
};

Workspace& thread_workspace() {
  thread_local Workspace ws;
  return ws;
}

// A job for the problem's rows, with the given work buffers; row pointers are set per row.
RowJob job_for(const SortRowsProblem& p, Workspace& ws, int* many_ties_seen) {
  RowJob job;
  job.dtype = p.dtype;
  job.order = p.order;
  job.ties = p.ties;
  job.n = p.row_length;
  job.input_stride = p.input.row_stride;
  job.values_stride = p.values.row_stride;
  job.indices_stride = p.indices.row_stride;
  job.buffer_a = ws.a.data() + kPad;
  job.buffer_b = ws.b.data() + kPad;
  job.many_ties_seen = many_ties_seen;
  return job;
}

void point_at_row(RowJob& job, const SortRowsProblem& p, const RowCursor& cursor) {
  const size_t element_size = dtype_size(p.dtype);
  job.input = element_at(p.input, element_size, cursor.input());
  job.values = element_at(p.values, element_size, cursor.values());
  job.indices = reinterpret_cast<int64_t*>(element_at(p.indices, sizeof(int64_t), cursor.indices()));
}

}  // namespace

// Element b of in-rows a (in[a * in_stride + b]) to out[b * out_stride + a], for a, b in [0, side):
// 4 x 4 blocks of 32-bit elements and 2 x 2 of 64-bit ones go through SSE2 registers (a load and a
// store per side instead of one per element), other sizes element by element.
template <typename T>
struct Transpose {
  static constexpr int side = 1;
  static void block(const T* in, int64_t, T* out, int64_t) { *out = *in; }
};

template <>
struct Transpose<uint32_t> {
  static constexpr int side = 4;
  static void block(const uint32_t* in, int64_t in_stride, uint32_t* out, int64_t out_stride) {
    auto load = [&](int a) { return _mm_loadu_ps(reinterpret_cast<const float*>(in + a * in_stride)); };
    __m128 r0 = load(0), r1 = load(1), r2 = load(2), r3 = load(3);
    _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
    _mm_storeu_ps(reinterpret_cast<float*>(out), r0);
    _mm_storeu_ps(reinterpret_cast<float*>(out + out_stride), r1);
    _mm_storeu_ps(reinterpret_cast<float*>(out + 2 * out_stride), r2);
    _mm_storeu_ps(reinterpret_cast<float*>(out + 3 * out_stride), r3);
  }
};

template <>
struct Transpose<uint64_t> {
  static constexpr int side = 2;
  static void block(const uint64_t* in, int64_t in_stride, uint64_t* out, int64_t out_stride) {
    const __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in));
    const __m128i r1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + in_stride));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_unpacklo_epi64(r0, r1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + out_stride), _mm_unpackhi_epi64(r0, r1));
  }
};

// Copies element j of `rows` rows (row t at offsets[t], elements `stride` apart) to or from
// contiguous tile rows of n elements.
template <typename T>
void copy_tile(bool into_tile, T* tile, T* tensor, const int64_t* offsets, int rows, int64_t n,
               int64_t stride) {
  bool adjacent = true;
  for (int t = 1; t < rows; ++t) adjacent &= offsets[t] == offsets[0] + t;
  if (into_tile && adjacent && rows == kTileRows) {
    // Blocks of kTileRows x kBlock elements: the block's cache lines stay in L1 while each tile row
    // takes kBlock consecutive elements (stores in order, no offset per element).
    constexpr int64_t kBlock = 16;
    constexpr int kSide = Transpose<T>::side;
    const T* first = tensor + offsets[0];
    int64_t j = 0;
    for (; j + kBlock <= n; j += kBlock) {
      for (int t = 0; t < kTileRows; t += kSide) {
        for (int64_t b = 0; b < kBlock; b += kSide) {
          Transpose<T>::block(first + (j + b) * stride + t, stride, tile + t * n + j + b, n);
        }
      }
    }
    for (; j < n; ++j) {
      for (int t = 0; t < kTileRows; ++t) tile[t * n + j] = first[j * stride + t];
    }
    return;
  }
  for (int64_t j = 0; j < n; ++j) {
    for (int t = 0; t < rows; ++t) {
      T& element = tensor[offsets[t] + j * stride];
      if (into_tile) {
        tile[t * n + j] = element;
      } else {
        element = tile[t * n + j];
      }
    }
  }
}

void copy_tile(size_t element_size, bool into_tile, void* tile, void* tensor, const int64_t* offsets,
               int rows, int64_t n, int64_t stride) {
  switch (element_size) {
    case 1: return copy_tile(into_tile, static_cast<uint8_t*>(tile), static_cast<uint8_t*>(tensor), offsets, rows, n, stride);
    case 2: return copy_tile(into_tile, static_cast<uint16_t*>(tile), static_cast<uint16_t*>(tensor), offsets, rows, n, stride);
    case 4: return copy_tile(into_tile, static_cast<uint32_t*>(tile), static_cast<uint32_t*>(tensor), offsets, rows, n, stride);
    default: return copy_tile(into_tile, static_cast<uint64_t*>(tile), static_cast<uint64_t*>(tensor), offsets, rows, n, stride);
  }
}

// Rows at least this long are tiled: shorter ones keep their cache lines between neighbouring rows
// anyway, and the copies only cost (bench: median-filter-u8-3x3 rows of 9, fedavg rows of 64 lose;
// sparsemax-attn-transposed rows of 1024, feature-quantiles-dim0 rows of 4096 gain 2x).
constexpr int64_t kMinTiledRowLength = 256;

// Whether rows are better handled in tiles: long strided rows whose neighbours are adjacent in memory.
template <typename Problem>
bool tiled(const Problem& p) {
  return p.input.row_stride != 1 && p.row_length >= kMinTiledRowLength && !p.outer_sizes.empty() &&
         p.outer_sizes.back() > 1 && p.input.outer_strides.back() == 1;
}

// Where the rows of one tile live.
struct TileRows {
  int count = 0;
  int64_t input[kTileRows], values[kTileRows], indices[kTileRows];
};

// The next tile: up to kTileRows consecutive rows from the cursor's (row r) whose inputs are adjacent
// in memory. Advances the cursor and r past them.
template <typename Cursor>
TileRows next_tile(Cursor& cursor, int64_t& r, int64_t end) {
  TileRows tile;
  do {
    tile.input[tile.count] = cursor.input();
    tile.values[tile.count] = cursor.values();
    tile.indices[tile.count] = cursor.indices();
    ++tile.count;
    ++r;
    cursor.next();
  } while (tile.count < kTileRows && r < end && cursor.input() == tile.input[0] + tile.count);
  return tile;
}

// Sorts rows [begin, end) a tile at a time.
void sort_tiles(const SortRowsProblem& p, const RowKernels& kernels, Workspace& ws, int* many_ties_seen,
                int64_t begin, int64_t end) {
  const size_t element_size = dtype_size(p.dtype);
  const int64_t n = p.row_length;
  ws.reserve_tile(n);
  RowJob job = job_for(p, ws, many_ties_seen);
  job.input_stride = job.values_stride = job.indices_stride = 1;
  RowCursor cursor(p, begin);
  for (int64_t r = begin; r < end;) {
    const TileRows tile = next_tile(cursor, r, end);
    copy_tile(element_size, true, ws.tile_input.data(), p.input.data, tile.input, tile.count, n, p.input.row_stride);
    for (int t = 0; t < tile.count; ++t) {
      job.input = reinterpret_cast<char*>(ws.tile_input.data()) + t * n * static_cast<int64_t>(element_size);
      job.values = reinterpret_cast<char*>(ws.tile_values.data()) + t * n * static_cast<int64_t>(element_size);
      job.indices = reinterpret_cast<int64_t*>(ws.tile_indices.data()) + t * n;
      kernels.sort_row(job);
    }
    copy_tile(element_size, false, ws.tile_values.data(), p.values.data, tile.values, tile.count, n,
              p.values.row_stride);
    copy_tile(sizeof(int64_t), false, ws.tile_indices.data(), p.indices.data, tile.indices, tile.count, n,
              p.indices.row_stride);
  }
}

bool sort_declines(const SortRowsProblem& p) {
  const int64_t rows = row_count(p);
  if (rows == 0 || p.row_length == 0) return false;
  RowJob first = job_for(p, thread_workspace(), nullptr);
  first.input = element_at(p.input, dtype_size(p.dtype), RowCursor(p, 0).input());
  return row_kernels_for(active_isa()).declines(first);
}

void sort_rows(const SortRowsProblem& p) {
  const int64_t rows = row_count(p);
  if (rows == 0 || p.row_length == 0) return;
  const RowKernels kernels = row_kernels_for(active_isa());
  int many_ties_seen = 0;
  // As torch: about 32768 elements of work per task, so thread count never changes a result.
  const int64_t grain = std::max<int64_t>(1, 32768 / p.row_length);
  const bool in_tiles = tiled(p);
  parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    Workspace& ws = thread_workspace();
    ws.reserve(p.row_length);
    if (in_tiles) return sort_tiles(p, kernels, ws, &many_ties_seen, begin, end);
    RowJob job = job_for(p, ws, &many_ties_seen);
    // A long strided row that is not tiled (a column, say) is copied once: the row's several passes
    // then read it contiguously instead of a cache line per element (bench: nms-yolo-25200-column).
    const bool copy_rows = p.input.row_stride != 1 && p.row_length >= kMinTiledRowLength;
    if (copy_rows) {
      ws.reserve_row(p.row_length);
      job.input_stride = 1;
    }
    RowCursor cursor(p, begin);
    for (int64_t r = begin; r < end; ++r, cursor.next()) {
      point_at_row(job, p, cursor);
      if (copy_rows) {
        const int64_t offset = cursor.input();
        copy_tile(dtype_size(p.dtype), true, ws.row_input.data(), p.input.data, &offset, 1, p.row_length,
                  p.input.row_stride);
        job.input = ws.row_input.data();
      }
      kernels.sort_row(job);
    }
  });
}

void topk_rows(const TopKRowsProblem& p) {
  const int64_t rows = row_count(p);
  if (rows == 0 || p.k == 0) return;
  const RowKernels kernels = row_kernels_for(active_isa());
  const int64_t grain = std::max<int64_t>(1, 32768 / p.row_length);
  const size_t element_size = dtype_size(p.dtype);
  parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    Workspace& ws = thread_workspace();
    ws.reserve(p.row_length);
    sort_detail::TopKJob job{};
    job.k = p.k;
    job.sorted = p.sorted;
    job.row.dtype = p.dtype;
    job.row.order = p.largest ? SortOrder::kDescending : SortOrder::kAscending;
    job.row.n = p.row_length;
    job.row.input_stride = p.input.row_stride;
    job.row.values_stride = p.values.row_stride;
    job.row.indices_stride = p.indices.row_stride;
    job.row.buffer_a = ws.a.data() + kPad;
    job.row.buffer_b = ws.b.data() + kPad;
    sort_detail::RowCursor<TopKRowsProblem> cursor(p, begin);
    for (int64_t r = begin; r < end; ++r, cursor.next()) {
      job.row.input = element_at(p.input, element_size, cursor.input());
      job.row.values = element_at(p.values, element_size, cursor.values());
      job.row.indices = reinterpret_cast<int64_t*>(element_at(p.indices, sizeof(int64_t), cursor.indices()));
      kernels.topk_row(job);
    }
  });
}

namespace {

sort_detail::SelectJob select_job_for(const SelectRowsProblem& p, Workspace& ws) {
  sort_detail::SelectJob job{};
  job.rule = p.rule;
  job.k = p.k;
  job.row.dtype = p.dtype;
  job.row.order = SortOrder::kAscending;
  job.row.n = p.row_length;
  job.row.input_stride = p.input.row_stride;
  job.row.buffer_a = ws.a.data() + kPad;
  job.row.buffer_b = ws.b.data() + kPad;
  return job;
}

void point_outputs(sort_detail::SelectJob& job, const SelectRowsProblem& p, int64_t values_offset,
                   int64_t indices_offset) {
  job.row.values = element_at(p.values, dtype_size(p.dtype), values_offset);
  job.row.indices = reinterpret_cast<int64_t*>(element_at(p.indices, sizeof(int64_t), indices_offset));
}

// Whether the rows go to select_lanes: short rows of keys up to 32 bits whose neighbours are adjacent
// (columns of a matrix, unfolded patches, overlapping windows).
bool in_lanes(const SelectRowsProblem& p) {
  static_assert(kTileRows == sort_detail::kMaxLaneRows);
  return p.row_length <= sort_detail::kMaxLaneRowLength && dtype_size(p.dtype) <= 4 &&
         !p.outer_sizes.empty() && p.outer_sizes.back() > 1 && p.input.outer_strides.back() == 1;
}

}  // namespace

void select_rows(const SelectRowsProblem& p) {
  const int64_t rows = row_count(p);
  if (rows == 0) return;
  const RowKernels kernels = row_kernels_for(active_isa());
  const size_t element_size = dtype_size(p.dtype);
  const int64_t n = p.row_length;
  const int64_t grain = std::max<int64_t>(1, 32768 / n);
  const bool in_tiles = tiled(p), lanes = in_lanes(p);
  parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    Workspace& ws = thread_workspace();
    ws.reserve(n);
    sort_detail::SelectJob job = select_job_for(p, ws);
    sort_detail::RowCursor<SelectRowsProblem> cursor(p, begin);
    if (lanes) {
      sort_detail::SelectLanesJob tile_job{job.row, p.rule, p.k, 0, p.values.data, nullptr,
                                           static_cast<int64_t*>(p.indices.data), nullptr};
      for (int64_t r = begin; r < end;) {
        const TileRows tile = next_tile(cursor, r, end);
        tile_job.row.input = element_at(p.input, element_size, tile.input[0]);
        tile_job.rows = tile.count;
        tile_job.values_offsets = tile.values;
        tile_job.indices_offsets = tile.indices;
        for (uint32_t left = kernels.select_lanes(tile_job); left != 0; left &= left - 1) {
          const int t = __builtin_ctz(left);
          job.row.input = element_at(p.input, element_size, tile.input[t]);
          point_outputs(job, p, tile.values[t], tile.indices[t]);
          kernels.select_row(job);
        }
      }
      return;
    }
    if (in_tiles) {
      ws.reserve_tile(n);
      job.row.input_stride = 1;
      for (int64_t r = begin; r < end;) {
        const TileRows tile = next_tile(cursor, r, end);
        copy_tile(element_size, true, ws.tile_input.data(), p.input.data, tile.input, tile.count, n,
                  p.input.row_stride);
        for (int t = 0; t < tile.count; ++t) {
          job.row.input = reinterpret_cast<char*>(ws.tile_input.data()) + t * n * static_cast<int64_t>(element_size);
          point_outputs(job, p, tile.values[t], tile.indices[t]);
          kernels.select_row(job);
        }
      }
      return;
    }
    for (int64_t r = begin; r < end; ++r, cursor.next()) {
      job.row.input = element_at(p.input, element_size, cursor.input());
      point_outputs(job, p, cursor.values(), cursor.indices());
      kernels.select_row(job);
    }
  });
}

bool median_of_all(DType dtype, bool ignore_nan, const void* data, int64_t n, void* value) {
  Workspace& ws = thread_workspace();
  ws.reserve(n);
  const int64_t no_strides[1] = {0};
  SelectRowsProblem p{};
  p.dtype = dtype;
  p.rule = ignore_nan ? SelectRule::kNanMedian : SelectRule::kMedian;
  p.row_length = n;
  p.input = {const_cast<void*>(data), 1, std::span<const int64_t>(no_strides, 0)};
  sort_detail::SelectJob job = select_job_for(p, ws);
  alignas(8) unsigned char answer[8];
  int64_t index;
  bool ambiguous = false;
  job.whole = true;
  job.ambiguous = &ambiguous;
  job.row.input = data;
  job.row.values = answer;
  job.row.indices = &index;
  row_kernels_for(active_isa()).select_row(job);
  if (ambiguous) return false;
  std::memcpy(value, answer, dtype_size(dtype));
  return true;
}

}  // namespace kwker
