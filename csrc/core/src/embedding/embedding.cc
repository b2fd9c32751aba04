// embedding_dense_backward, embedding_bag_max and its backward (kwker/embedding.h).
//
// The dense backward spreads weight rows over kwker::parallel_for as torch does (each range scans all
// indices in order and adds those in its range), so every row's additions keep torch's order whatever
// the thread count. Bags are independent: the max forward spreads them. The max backward spreads
// columns: each (row, column) receives its additions from bags in ascending order, as torch's
// index_add_ per column gives them.
#include <atomic>
#include <vector>

#include "embedding/embedding_kernels.h"
#include "float16.h"
#include "kwker/cpu.h"
#include "kwker/embedding.h"
#include "kwker/parallel.h"

namespace kwker {
namespace {

using embedding_detail::EmbeddingKernels;

const EmbeddingKernels& kernels() {
  switch (active_isa()) {
    case Isa::kAvx512: return embedding_detail::avx512::kKernels;
    case Isa::kAvx2: return embedding_detail::avx2::kKernels;
    case Isa::kScalar: break;
  }
  return embedding_detail::scalar::kKernels;
}

// Weight rows per parallel work item in the dense backward (torch's own grain).
constexpr int64_t kGrainRows = 1000;
// Elements of work per parallel chunk in the bag max passes.
constexpr int64_t kGrainElements = 1 << 16;

template <typename Index>
const Index* as(const void* p) {
  return static_cast<const Index*>(p);
}

template <typename Index>
std::vector<int64_t> count_indices(const EmbeddingBackwardProblem& p) {
  std::vector<int64_t> counts(static_cast<size_t>(p.num_weights), 0);
  const Index* indices = as<Index>(p.indices);
  for (int64_t i = 0; i < p.num_indices; ++i) ++counts[static_cast<size_t>(indices[i])];
  return counts;
}

// The distinct pages of a table that element ranges fall on (PagesWrittenQuery), up to its limit.
class PageCount {
 public:
  explicit PageCount(const PagesWrittenQuery& query) : query_(query) {}

  // Marks the pages of the table's bytes [begin, begin + bytes); false once past the limit.
  bool mark(int64_t begin, int64_t bytes) {
    const int64_t last = (query_.first_page_offset + begin + bytes - 1) / query_.page_bytes;
    for (int64_t page = (query_.first_page_offset + begin) / query_.page_bytes; page <= last; ++page) {
      if (query_.written[page] == 0) {
        query_.written[page] = 1;
        if (++count_ > query_.max_pages) return false;
      }
    }
    return true;
  }
  int64_t count() const { return count_; }

 private:
  const PagesWrittenQuery& query_;
  int64_t count_ = 0;
};

template <typename Index>
int64_t dense_backward_pages(const EmbeddingBackwardProblem& p, PageCount& pages) {
  const Index* indices = as<Index>(p.indices);
  const int64_t row_bytes = p.dim * static_cast<int64_t>(dtype_size(p.dtype));
  for (int64_t i = 0; i < p.num_indices; ++i) {
    const int64_t k = indices[i];
    if (k < 0 || k >= p.num_weights || k == p.padding_idx) continue;
    if (!pages.mark(k * row_bytes, row_bytes)) break;
  }
  return pages.count();
}

template <typename Index>
int64_t bag_max_backward_pages_typed(const BagMaxBackwardProblem& p, PageCount& pages) {
  const Index* mi = as<Index>(p.max_indices);
  const Index* bag_size = as<Index>(p.bag_size);
  const int64_t element_bytes = static_cast<int64_t>(dtype_size(p.dtype));
  for (int64_t b = 0; b < p.num_bags; ++b) {
    if (bag_size[b * p.bag_size_stride] == 0) continue;
    for (int64_t d = 0; d < p.dim; ++d) {
      const int64_t w = mi[b * p.max_indices_stride0 + d * p.max_indices_stride1];
      if (w < 0 || w >= p.num_weights) continue;
      if (!pages.mark((w * p.dim + d) * element_bytes, element_bytes)) return pages.count();
    }
  }
  return pages.count();
}

template <typename Index>
bool bag_inputs_valid(const BagMaxProblem& p) {
  const Index* offsets = as<Index>(p.offsets);
  if (p.num_bags < 1 || offsets[0] != 0) return false;
  for (int64_t b = 1; b < p.num_bags; ++b) {
    if (offsets[b] < offsets[b - 1]) return false;
  }
  if (offsets[p.num_bags - 1] > p.num_indices) return false;
  const Index* indices = as<Index>(p.indices);
  bool valid = true;
  for (int64_t i = 0; i < p.num_indices; ++i) valid &= indices[i] >= 0 && indices[i] < p.num_weights;
  return valid;
}

// Stored element <-> the arithmetic type torch's index_add_ uses for it.
template <typename T>
struct Add {
  static T add(T a, T b) { return a + b; }
};
template <DType kType>
struct Add16 {
  static float widen(uint16_t x) { return kType == DType::kBFloat16 ? bfloat16_to_float(x) : half_to_float(x); }
  static uint16_t add(uint16_t a, uint16_t b) {
    const float r = widen(a) + widen(b);
    return kType == DType::kBFloat16 ? float_to_bfloat16(r) : float_to_half(r);
  }
};

template <typename T>
bool is_nan(T x) {
  return x != x;
}

template <typename T, typename A, typename Index>
bool bag_max_backward_typed(const BagMaxBackwardProblem& p) {
  const int64_t dim = p.dim;
  const T* grad = static_cast<const T*>(p.grad);
  const Index* mi = as<Index>(p.max_indices);
  const Index* bag_size = as<Index>(p.bag_size);
  T* out = static_cast<T*>(p.grad_weight);
  // Every index a non-empty bag names must be in range: torch checks each (and raises).
  bool valid = true;
  for (int64_t b = 0; b < p.num_bags; ++b) {
    if (bag_size[b * p.bag_size_stride] == 0) continue;
    for (int64_t d = 0; d < dim; ++d) {
      const Index w = mi[b * p.max_indices_stride0 + d * p.max_indices_stride1];
      valid &= w >= 0 && w < p.num_weights;
    }
  }
  if (!valid) return false;
  std::atomic<bool> nan{false};
  const int64_t grain = dim == 0 ? 1 : (kGrainElements + p.num_bags - 1) / (p.num_bags ? p.num_bags : 1);
  parallel_for(0, dim, grain, [&](int64_t d_begin, int64_t d_end) {
    bool local_nan = false;
    for (int64_t b = 0; b < p.num_bags; ++b) {
      if (bag_size[b * p.bag_size_stride] == 0) continue;
      const Index* mi_row = mi + b * p.max_indices_stride0;
      const T* g_row = grad + b * p.grad_stride0;
      for (int64_t d = d_begin; d < d_end; ++d) {
        T& acc = out[mi_row[d * p.max_indices_stride1] * dim + d];
        acc = A::add(acc, g_row[d * p.grad_stride1]);
        if constexpr (sizeof(T) != 2) local_nan |= is_nan(acc);
        else local_nan |= (acc & 0x7FFF) > (p.dtype == DType::kBFloat16 ? 0x7F80 : 0x7C00);
      }
    }
    if (local_nan) nan.store(true, std::memory_order_relaxed);
  });
  return !nan.load();
}

template <typename Index>
bool bag_max_backward_indexed(const BagMaxBackwardProblem& p) {
  switch (p.dtype) {
    case DType::kFloat32: return bag_max_backward_typed<float, Add<float>, Index>(p);
    case DType::kFloat64: return bag_max_backward_typed<double, Add<double>, Index>(p);
    case DType::kFloat16: return bag_max_backward_typed<uint16_t, Add16<DType::kFloat16>, Index>(p);
    case DType::kBFloat16: return bag_max_backward_typed<uint16_t, Add16<DType::kBFloat16>, Index>(p);
    default: return false;
  }
}

}  // namespace

bool embedding_dense_backward(const EmbeddingBackwardProblem& problem) {
  std::vector<int64_t> counts;
  if (problem.scale_grad_by_freq) {
    counts = problem.index_type == IndexType::kInt32 ? count_indices<int32_t>(problem)
                                                     : count_indices<int64_t>(problem);
  }
  const int64_t* count_data = counts.empty() ? nullptr : counts.data();
  const EmbeddingKernels& k = kernels();
  std::atomic<bool> nan{false};
  parallel_for(0, problem.num_weights, kGrainRows, [&](int64_t begin, int64_t end) {
    if (k.backward_rows(problem, count_data, begin, end)) nan.store(true, std::memory_order_relaxed);
  });
  return !nan.load();
}

int64_t embedding_dense_backward_pages(const EmbeddingBackwardProblem& problem, const PagesWrittenQuery& query) {
  if (problem.dim == 0) return 0;
  PageCount pages(query);
  return problem.index_type == IndexType::kInt32 ? dense_backward_pages<int32_t>(problem, pages)
                                                 : dense_backward_pages<int64_t>(problem, pages);
}

bool embedding_bag_max(const BagMaxProblem& problem) {
  // The kernels keep a float32/float16/bfloat16 table's row numbers in 32-bit lanes.
  if (problem.dtype != DType::kFloat64 && problem.num_weights > INT32_MAX) return false;
  const bool wide = problem.index_type == IndexType::kInt64;
  if (!(wide ? bag_inputs_valid<int64_t>(problem) : bag_inputs_valid<int32_t>(problem))) return false;
  const int64_t per_bag = 1 + problem.num_indices / problem.num_bags * (problem.dim ? problem.dim : 1);
  const int64_t grain = per_bag >= kGrainElements ? 1 : kGrainElements / per_bag;
  const EmbeddingKernels& k = kernels();
  parallel_for(0, problem.num_bags, grain, [&](int64_t begin, int64_t end) { k.bag_max_rows(problem, begin, end); });
  return true;
}

bool embedding_bag_max_backward(const BagMaxBackwardProblem& problem) {
  return problem.index_type == IndexType::kInt32 ? bag_max_backward_indexed<int32_t>(problem)
                                                 : bag_max_backward_indexed<int64_t>(problem);
}

int64_t embedding_bag_max_backward_pages(const BagMaxBackwardProblem& problem, const PagesWrittenQuery& query) {
  PageCount pages(query);
  return problem.index_type == IndexType::kInt32 ? bag_max_backward_pages_typed<int32_t>(problem, pages)
                                                 : bag_max_backward_pages_typed<int64_t>(problem, pages);
}

}  // namespace kwker
