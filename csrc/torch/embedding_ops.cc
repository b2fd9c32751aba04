// aten::embedding_dense_backward (family "embedding") and EmbeddingBag's max mode (family
// "embedding_bag": aten::_embedding_bag, aten::_embedding_bag_forward_only and
// aten::_embedding_bag_dense_backward with mode 2) on Kwker. Results: see kwker/embedding.h.
//
// Covered: CPU float32/float64/float16/bfloat16 gradients and weights, int32/int64 indices (and
// offsets of the same type), padding_idx, scale_grad_by_freq, include_last_offset, empty bags, any
// strides (gradients and weights: rows contiguous for the bag forward). torch's own kernel runs for:
// sum and mean bags, per_sample_weights, arguments torch rejects (so the errors are torch's), results
// with a NaN, a thread whose MXCSR is not the default, and scale_grad_by_freq where torch's pointwise
// kernels are not its FMA build.
#include <ATen/core/Tensor.h>
#include <ATen/ops/_embedding_bag_cpu_dispatch.h>
#include <ATen/ops/_embedding_bag_dense_backward_cpu_dispatch.h>
#include <ATen/ops/_embedding_bag_dense_backward_ops.h>
#include <ATen/ops/_embedding_bag_forward_only_cpu_dispatch.h>
#include <ATen/ops/_embedding_bag_forward_only_ops.h>
#include <ATen/ops/_embedding_bag_ops.h>
#include <ATen/ops/embedding_dense_backward_cpu_dispatch.h>
#include <ATen/ops/embedding_dense_backward_ops.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <optional>
#include <tuple>
#include <type_traits>

#include "kernel_state.h"
#include "kwker/embedding.h"
#include "registry.h"
#include "tensors.h"
#include "torch_facts.h"
#include "fresh_pages.h"

namespace kwker::adapter {
namespace {

using at::Tensor;
using BagResult = std::tuple<Tensor, Tensor, Tensor, Tensor>;

// Fewer gradient elements than this: torch's kernel is as fast (its per-call cost dominates).
constexpr int64_t kMinElements = 64;
// torch's TensorIterator splits a row this long over threads: its float16/bfloat16 tails then move.
constexpr int64_t kMaxScaledRow16 = 32768;
// EmbeddingBag's max mode in torch's numbering.
constexpr int64_t kModeMax = 2;

std::optional<DType> float_dtype(const Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return DType::kFloat32;
    case at::kDouble: return DType::kFloat64;
    case at::kHalf: return DType::kFloat16;
    case at::kBFloat16: return DType::kBFloat16;
    default: return std::nullopt;
  }
}

std::optional<IndexType> index_type(const Tensor& t) {
  if (t.scalar_type() == at::kInt) return IndexType::kInt32;
  if (t.scalar_type() == at::kLong) return IndexType::kInt64;
  return std::nullopt;
}

// Whether every index lies in [0, num_weights): torch's scale_grad_by_freq counts would be written
// out of bounds otherwise.
template <typename Index>
bool all_in_range(const Index* p, int64_t n, int64_t num_weights) {
  bool ok = true;
  for (int64_t i = 0; i < n; ++i) ok &= p[i] >= 0 && p[i] < num_weights;
  return ok;
}

std::optional<Fallback> why_torch_embedding_backward(const Tensor& grad, const Tensor& indices, int64_t num_weights,
                                                     bool scale_grad_by_freq) {
  if (!enabled_for_this_thread()) return Fallback::kDisabled;
  if (!plain_strided(grad) || !plain_strided(indices)) return Fallback::kLayout;
  if (!float_dtype(grad) || !index_type(indices)) return Fallback::kDtype;
  if (grad.dim() == 0 || num_weights < 0 || grad.numel() != indices.numel() * grad.size(-1)) {
    return Fallback::kArguments;  // torch raises
  }
  if (grad.numel() < kMinElements) return Fallback::kSmall;
  if (!float_mode_is_default()) return Fallback::kFloatMode;
  // 16-bit rows need torch's vector step (to split body from tail); none found: torch's kernel.
  if (grad.element_size() == 2 && torch_vector_step_16bit() == 0) return Fallback::kTorchCapability;
  if (scale_grad_by_freq) {
    if (!torch_kernels_fuse_multiply_add()) return Fallback::kTorchCapability;
    if (grad.element_size() == 2 && grad.size(-1) >= kMaxScaledRow16) return Fallback::kTooLong;
  }
  return std::nullopt;
}

Tensor embedding_dense_backward(const Tensor& grad_output, const Tensor& indices, c10::SymInt num_weights_sym,
                                c10::SymInt padding_idx_sym, bool scale_grad_by_freq) {
  CallRecord call(Kernel::kEmbedding);
  const int64_t num_weights = num_weights_sym.expect_int(), padding_idx = padding_idx_sym.expect_int();
  const auto torch_backward = [&] {
    return at::cpu::embedding_dense_backward_symint(grad_output, indices, num_weights_sym, padding_idx_sym,
                                                    scale_grad_by_freq);
  };
  if (auto why = why_torch_embedding_backward(grad_output, indices, num_weights, scale_grad_by_freq)) {
    call.fell_back(*why);
    return torch_backward();
  }
  const Tensor index = indices.contiguous();
  const int64_t n = index.numel();
  if (scale_grad_by_freq) {
    const bool ok = index.scalar_type() == at::kInt ? all_in_range(index.const_data_ptr<int32_t>(), n, num_weights)
                                                    : all_in_range(index.const_data_ptr<int64_t>(), n, num_weights);
    if (!ok) {
      call.fell_back(Fallback::kArguments);
      return torch_backward();
    }
  }
  const Tensor grad = grad_output.contiguous();
  const int64_t dim = grad_output.size(-1);
  EmbeddingBackwardProblem problem{};
  problem.dtype = *float_dtype(grad);
  problem.index_type = *index_type(index);
  problem.grad = grad.const_data_ptr();
  problem.indices = index.const_data_ptr();
  problem.num_indices = n;
  problem.dim = dim;
  problem.num_weights = num_weights;
  problem.padding_idx = padding_idx;
  problem.scale_grad_by_freq = scale_grad_by_freq;
  problem.torch_vector_elements = torch_vector_step_16bit();
  Tensor grad_weight = zeros_for_sparse_writes({num_weights, dim}, grad_output.options(),
                                               [&](const PagesWrittenQuery& query) {
                                                 return embedding_dense_backward_pages(problem, query);
                                               });
  problem.grad_weight = grad_weight.mutable_data_ptr();
  if (!kwker::embedding_dense_backward(problem)) {
    call.fell_back(Fallback::kNanResult);
    return torch_backward();
  }
  if (fault_injected(Kernel::kEmbedding) && grad_weight.numel() > 0) {
    grad_weight.view(-1)[0].fill_(1);  // test-only (kwker::inject_fault): a wrong answer
  }
  call.served();
  return grad_weight;
}

std::optional<Fallback> why_torch_bags(const Tensor& weight, const Tensor& indices, const Tensor& offsets, int64_t mode,
                                       const std::optional<Tensor>& per_sample_weights, bool include_last_offset) {
  if (!enabled_for_this_thread()) return Fallback::kDisabled;
  if (mode != kModeMax || (per_sample_weights && per_sample_weights->defined())) return Fallback::kArguments;
  if (!plain_strided(weight) || !plain_strided(indices) || !plain_strided(offsets)) return Fallback::kLayout;
  if (!float_dtype(weight) || !index_type(indices) || indices.scalar_type() != offsets.scalar_type()) {
    return Fallback::kDtype;  // torch promotes or raises
  }
  if (weight.dim() != 2 || indices.dim() != 1 || offsets.dim() != 1) return Fallback::kArguments;
  // torch reads indices and offsets as contiguous memory (embedding_bag() makes them so).
  if (!indices.is_contiguous() || !offsets.is_contiguous() || (weight.stride(1) != 1 && weight.size(1) > 1)) {
    return Fallback::kLayout;
  }
  // The core keeps a column's winning row as an integer as wide as the compared value.
  if (weight.scalar_type() != at::kDouble && weight.size(0) > INT32_MAX) return Fallback::kTooLong;
  const int64_t num_bags = offsets.size(0) - (include_last_offset ? 1 : 0);
  if (num_bags < 1 || indices.numel() == 0 || indices.numel() * weight.size(1) < kMinElements) return Fallback::kSmall;
  if (!float_mode_is_default()) return Fallback::kFloatMode;
  if (include_last_offset) {  // torch checks the last offset too, though no bag ends there
    const int64_t last = offsets.scalar_type() == at::kInt ? offsets.const_data_ptr<int32_t>()[offsets.size(0) - 1]
                                                           : offsets.const_data_ptr<int64_t>()[offsets.size(0) - 1];
    if (last > indices.numel()) return Fallback::kArguments;
  }
  return std::nullopt;
}

// Serves the max bags into fresh tensors, or returns nullopt when torch must run (nothing returned).
std::optional<BagResult> bags_on_kwker(const Tensor& weight, const Tensor& indices, const Tensor& offsets,
                                       bool include_last_offset, int64_t padding_idx) {
  const int64_t num_bags = offsets.size(0) - (include_last_offset ? 1 : 0), dim = weight.size(1);
  Tensor output = at::empty({num_bags, dim}, weight.options());
  Tensor offset2bag = at::empty({indices.size(0)}, offsets.options());
  Tensor bag_size = at::empty({num_bags}, offsets.options());
  Tensor max_indices = at::empty({num_bags, dim}, offsets.options());
  BagMaxProblem problem{};
  problem.dtype = *float_dtype(weight);
  problem.index_type = *index_type(indices);
  problem.weight = weight.const_data_ptr();
  problem.num_weights = weight.size(0);
  problem.dim = dim;
  problem.weight_row_stride = weight.stride(0);
  problem.indices = indices.const_data_ptr();
  problem.num_indices = indices.numel();
  problem.offsets = offsets.const_data_ptr();
  problem.num_bags = num_bags;
  problem.padding_idx = padding_idx;
  problem.output = output.mutable_data_ptr();
  problem.max_indices = max_indices.mutable_data_ptr();
  problem.bag_size = bag_size.mutable_data_ptr();
  problem.offset2bag = offset2bag.mutable_data_ptr();
  if (!embedding_bag_max(problem)) return std::nullopt;
  if (fault_injected(Kernel::kEmbeddingBag)) {
    max_indices.view(-1)[0].fill_(-1);  // test-only (kwker::inject_fault): a wrong answer
  }
  return BagResult{output, offset2bag, bag_size, max_indices};
}

template <bool kForwardOnly>
BagResult embedding_bag(const Tensor& weight, const Tensor& indices, const Tensor& offsets, bool scale_grad_by_freq,
                        int64_t mode, bool sparse, const std::optional<Tensor>& per_sample_weights,
                        bool include_last_offset, int64_t padding_idx) {
  CallRecord call(Kernel::kEmbeddingBag);
  std::optional<Fallback> why = why_torch_bags(weight, indices, offsets, mode, per_sample_weights, include_last_offset);
  if (!why) {
    if (auto result = bags_on_kwker(weight, indices, offsets, include_last_offset, padding_idx)) {
      call.served();
      return *result;
    }
    why = Fallback::kArguments;  // offsets or indices torch rejects
  }
  call.fell_back(*why);
  if constexpr (kForwardOnly) {
    return at::cpu::_embedding_bag_forward_only(weight, indices, offsets, scale_grad_by_freq, mode, sparse,
                                                per_sample_weights, include_last_offset, padding_idx);
  } else {
    return at::cpu::_embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights,
                                   include_last_offset, padding_idx);
  }
}

std::optional<Fallback> why_torch_bag_backward(const Tensor& grad, const Tensor& bag_size, const Tensor& max_indices,
                                               int64_t num_weights, int64_t mode) {
  if (!enabled_for_this_thread()) return Fallback::kDisabled;
  if (mode != kModeMax) return Fallback::kArguments;
  if (!plain_strided(grad) || !plain_strided(bag_size) || !plain_strided(max_indices)) return Fallback::kLayout;
  if (!float_dtype(grad) || !index_type(max_indices) || bag_size.scalar_type() != max_indices.scalar_type()) {
    return Fallback::kDtype;
  }
  if (grad.dim() != 2 || max_indices.sizes() != grad.sizes() || bag_size.dim() != 1 ||
      bag_size.size(0) != grad.size(0) || num_weights < 0) {
    return Fallback::kArguments;  // torch raises (or does what Kwker does not reproduce)
  }
  if (grad.numel() < kMinElements) return Fallback::kSmall;
  if (!float_mode_is_default()) return Fallback::kFloatMode;
  return std::nullopt;
}

Tensor embedding_bag_dense_backward(const Tensor& grad, const Tensor& indices, const Tensor& offset2bag,
                                    const Tensor& bag_size, const Tensor& maximum_indices, c10::SymInt num_weights_sym,
                                    bool scale_grad_by_freq, int64_t mode,
                                    const std::optional<Tensor>& per_sample_weights, int64_t padding_idx) {
  CallRecord call(Kernel::kEmbeddingBag);
  const int64_t num_weights = num_weights_sym.expect_int();
  std::optional<Fallback> why = why_torch_bag_backward(grad, bag_size, maximum_indices, num_weights, mode);
  if (!why) {
    BagMaxBackwardProblem problem{};
    problem.dtype = *float_dtype(grad);
    problem.index_type = *index_type(maximum_indices);
    problem.grad = grad.const_data_ptr();
    problem.grad_stride0 = grad.stride(0);
    problem.grad_stride1 = grad.stride(1);
    problem.max_indices = maximum_indices.const_data_ptr();
    problem.max_indices_stride0 = maximum_indices.stride(0);
    problem.max_indices_stride1 = maximum_indices.stride(1);
    problem.bag_size = bag_size.const_data_ptr();
    problem.bag_size_stride = bag_size.stride(0);
    problem.num_bags = grad.size(0);
    problem.dim = grad.size(1);
    problem.num_weights = num_weights;
    Tensor grad_weight = zeros_for_sparse_writes(
        {num_weights, grad.size(1)}, grad.options(),
        [&](const PagesWrittenQuery& query) { return embedding_bag_max_backward_pages(problem, query); });
    problem.grad_weight = grad_weight.mutable_data_ptr();
    if (embedding_bag_max_backward(problem)) {
      if (fault_injected(Kernel::kEmbeddingBag) && grad_weight.numel() > 0) {
        grad_weight.view(-1)[0].fill_(1);  // test-only (kwker::inject_fault): a wrong answer
      }
      call.served();
      return grad_weight;
    }
    why = Fallback::kDeclined;  // an index torch rejects, or a NaN sum
  }
  call.fell_back(*why);
  return at::cpu::_embedding_bag_dense_backward_symint(grad, indices, offset2bag, bag_size, maximum_indices,
                                                       num_weights_sym, scale_grad_by_freq, mode, per_sample_weights,
                                                       padding_idx);
}

static_assert(std::is_same_v<decltype(embedding_dense_backward), at::_ops::embedding_dense_backward::schema>);
static_assert(std::is_same_v<decltype(embedding_bag<false>), at::_ops::_embedding_bag::schema>);
static_assert(std::is_same_v<decltype(embedding_bag<true>), at::_ops::_embedding_bag_forward_only::schema>);
static_assert(std::is_same_v<decltype(embedding_bag_dense_backward), at::_ops::_embedding_bag_dense_backward::schema>);

}  // namespace

void register_embedding_kernels(torch::Library& library) {
  library.impl("embedding_dense_backward", TORCH_FN(embedding_dense_backward));
}

void register_embedding_bag_kernels(torch::Library& library) {
  library.impl("_embedding_bag", TORCH_FN(embedding_bag<false>));
  library.impl("_embedding_bag_forward_only", TORCH_FN(embedding_bag<true>));
  library.impl("_embedding_bag_dense_backward", TORCH_FN(embedding_bag_dense_backward));
}

}  // namespace kwker::adapter
