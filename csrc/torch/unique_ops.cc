// aten::_unique2 (torch.unique and Tensor.unique without dim), aten::unique_dim (with dim),
// aten::unique_consecutive and aten::unique_dim_consecutive on Kwker.
//
// Covered: CPU tensors of uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64 (and
// bool along a dim or consecutive), any shape and strides (read contiguous, the dim moved first as
// torch moves it), with or without inverse and counts (`sorted` is ignored, as torch's CPU kernels
// ignore it). Left to torch's own kernel: bool without dim (torch counts trues, already one pass),
// unique_consecutive without dim (`declined`: torch's single pass is as fast),
// fewer than kMinElements, empty dims and bad dims (torch's errors), sorted uniques of floats whose
// answer depends on torch's sort (a NaN, or both -0.0 and +0.0: `declined`), flush-denormal mode.
// Results: see kwker/unique.h.
#include <ATen/core/Tensor.h>
#include <ATen/EmptyTensor.h>
#include <ATen/ops/_unique2_cpu_dispatch.h>
#include <ATen/ops/_unique2_ops.h>
#include <ATen/ops/unique_consecutive_cpu_dispatch.h>
#include <ATen/ops/unique_consecutive_ops.h>
#include <ATen/ops/unique_dim_consecutive_cpu_dispatch.h>
#include <ATen/ops/unique_dim_consecutive_ops.h>
#include <ATen/ops/unique_dim_cpu_dispatch.h>
#include <ATen/ops/unique_dim_ops.h>
#include <torch/library.h>

#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

#include "kernel_state.h"
#include "kwker/unique.h"
#include "registry.h"
#include "tensors.h"

namespace kwker::adapter {
namespace {

using at::Tensor;

// Fewer elements: torch's own kernel is as fast (its per-call cost dominates).
constexpr int64_t kMinElements = 256;
// Along a dim torch pays per row (a tensor per row, a dispatched comparison per pair): Kwker wins sooner.
constexpr int64_t kMinRowsElements = 16;

std::optional<Fallback> why_torch_uniques(const Tensor& self) {
  if (!enabled_for_this_thread()) return Fallback::kDisabled;
  if (!plain_strided(self)) return Fallback::kLayout;
  const auto dtype = core_dtype(self.scalar_type());
  if (!dtype || *dtype == DType::kBool) return Fallback::kDtype;
  if (c10::isFloatingType(self.scalar_type()) && denormals_are_zero()) return Fallback::kDenormalsAreZero;
  if (self.numel() < kMinElements) return Fallback::kSmall;
  if (self.numel() > kMaxUniqueElements) return Fallback::kTooLong;
  return std::nullopt;
}

std::tuple<Tensor, Tensor, Tensor> unique2(const Tensor& self, bool sorted, bool return_inverse,
                                           bool return_counts) {
  CallRecord call(Kernel::kUnique);
  std::optional<Fallback> why = why_torch_uniques(self);
  if (!why) {
    const Tensor input = self.contiguous();
    UniqueSorted unique;
    if (unique.prepare(*core_dtype(self.scalar_type()), input.const_data_ptr(), input.numel(),
                       return_inverse ? UniqueRanks::kWanted : UniqueRanks::kNotWanted)) {
      // Shapes as torch's: inverse like the input (or empty), counts per value (or empty).
      Tensor values = at::detail::empty_cpu({unique.count()}, self.scalar_type());
      Tensor inverse = at::detail::empty_cpu(return_inverse ? self.sizes() : at::IntArrayRef{0}, at::kLong);
      Tensor counts = at::detail::empty_cpu({return_counts ? unique.count() : 0}, at::kLong);
      unique.write(values.mutable_data_ptr(), return_inverse ? inverse.mutable_data_ptr<int64_t>() : nullptr,
                   return_counts ? counts.mutable_data_ptr<int64_t>() : nullptr);
      if (fault_injected(Kernel::kUnique)) values.view(-1)[0].fill_(1);  // test-only (kwker::inject_fault)
      call.served();
      return {values, inverse, counts};
    }
    why = Fallback::kDeclined;
  }
  call.fell_back(*why);
  return at::cpu::_unique2(self, sorted, return_inverse, return_counts);
}

// Whether torch handles a unique of `self` along `dim` (nullopt: flat), consecutive or sorted, and why.
std::optional<Fallback> why_torch_uniques_along(const Tensor& self, std::optional<int64_t> dim) {
  if (!enabled_for_this_thread()) return Fallback::kDisabled;
  if (!plain_strided(self)) return Fallback::kLayout;
  if (!core_dtype(self.scalar_type())) return Fallback::kDtype;
  if (c10::isFloatingType(self.scalar_type()) && denormals_are_zero()) return Fallback::kDenormalsAreZero;
  if (dim && (self.dim() == 0 || *dim < -self.dim() || *dim >= self.dim())) return Fallback::kArguments;
  if (self.numel() == 0) return Fallback::kArguments;  // torch's errors, or its empty results
  if (self.numel() < (dim ? kMinRowsElements : kMinElements)) return Fallback::kSmall;
  return std::nullopt;
}

// torch's _unique_dim_cpu_template on Kwker: output rows stacked and moved back to `dim`, inverse per
// row, counts a narrowed view of a zeroed tensor of one count per row (torch returns both always).
std::optional<std::tuple<Tensor, Tensor, Tensor>> unique_rows_on_kwker(const Tensor& self, int64_t dim, RowRuns runs) {
  dim = dim < 0 ? dim + self.dim() : dim;
  const Tensor moved = self.movedim(dim, 0).contiguous();
  const int64_t rows = moved.size(0), row_length = moved.numel() / rows;
  UniqueRows unique;
  if (!unique.prepare(*core_dtype(self.scalar_type()), runs, moved.const_data_ptr(), rows, row_length)) {
    return std::nullopt;
  }
  std::vector<int64_t> sizes = moved.sizes().vec();
  sizes[0] = unique.count();
  Tensor values = at::detail::empty_cpu(sizes, self.scalar_type());
  Tensor inverse = at::detail::empty_cpu({rows}, at::kLong);
  Tensor counts = at::detail::empty_cpu({rows}, at::kLong);
  counts.zero_();
  unique.write(values.mutable_data_ptr(), inverse.mutable_data_ptr<int64_t>(), counts.mutable_data_ptr<int64_t>());
  if (fault_injected(Kernel::kUnique)) inverse.view(-1)[0].fill_(-1);  // test-only (kwker::inject_fault)
  return std::tuple{values.movedim(0, dim), inverse, counts.narrow(0, 0, unique.count())};
}

std::tuple<Tensor, Tensor, Tensor> sorted_unique_along(const Tensor& self, int64_t dim, bool sorted,
                                                       bool return_inverse, bool return_counts) {
  CallRecord call(Kernel::kUnique);
  std::optional<Fallback> why = why_torch_uniques_along(self, dim);
  if (!why) {
    if (auto result = unique_rows_on_kwker(self, dim, RowRuns::kSorted)) {
      call.served();
      return *result;
    }
    why = Fallback::kDeclined;
  }
  call.fell_back(*why);
  return at::cpu::unique_dim(self, dim, sorted, return_inverse, return_counts);
}

std::tuple<Tensor, Tensor, Tensor> consecutive_unique_along(const Tensor& self, int64_t dim, bool return_inverse,
                                                            bool return_counts) {
  CallRecord call(Kernel::kUnique);
  if (auto why = why_torch_uniques_along(self, dim)) {
    call.fell_back(*why);
    return at::cpu::unique_dim_consecutive(self, dim, return_inverse, return_counts);
  }
  call.served();
  return *unique_rows_on_kwker(self, dim, RowRuns::kConsecutive);
}

// Flat (no dim, or dim 0 of a 1-d tensor) torch's single pass is as fast as Kwker's (measured
// 0.7x-1.1x): it stays torch's. Along a dim torch builds a tensor per row: Kwker serves it.
std::tuple<Tensor, Tensor, Tensor> consecutive_unique(const Tensor& self, bool return_inverse, bool return_counts,
                                                      std::optional<int64_t> dim) {
  if (dim && !(*dim == 0 && self.dim() == 1)) return consecutive_unique_along(self, *dim, return_inverse, return_counts);
  CallRecord call(Kernel::kUnique);
  call.fell_back(why_torch_uniques_along(self, std::nullopt).value_or(Fallback::kDeclined));
  return at::cpu::unique_consecutive(self, return_inverse, return_counts, dim);
}

static_assert(std::is_same_v<decltype(unique2), at::_ops::_unique2::schema>);
static_assert(std::is_same_v<decltype(sorted_unique_along), at::_ops::unique_dim::schema>);
static_assert(std::is_same_v<decltype(consecutive_unique_along), at::_ops::unique_dim_consecutive::schema>);
static_assert(std::is_same_v<decltype(consecutive_unique), at::_ops::unique_consecutive::schema>);

}  // namespace

void register_unique_kernels(torch::Library& library) {
  library.impl("_unique2", TORCH_FN(unique2));
  library.impl("unique_dim", TORCH_FN(sorted_unique_along));
  library.impl("unique_dim_consecutive", TORCH_FN(consecutive_unique_along));
  library.impl("unique_consecutive", TORCH_FN(consecutive_unique));
}

}  // namespace kwker::adapter
