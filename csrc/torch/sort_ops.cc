// aten::sort.stable and aten::sort.values_stable on Kwker (argsort, msort and Tensor.sort reach them
// through torch's own decompositions; quantile and friends call them internally).
//
// Covered: strided CPU tensors of bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32,
// float64, any dim, any strides, at least kMinElements elements in rows of at least kMinRowLength. Everything else, and every argument
// torch must reject or resize, goes to torch's own CPU kernel (at::cpu::, no dispatcher round trip).
// Tie order: stable=True is the stable order. stable=False is libstdc++'s introsort order, except
// where torch itself uses fbgemm's stable radix sort (1-D integer ascending sorts of at least 32768
// elements); whether this torch build does so is asked of torch once (torch_radix_sorts_1d_integers).
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/EmptyTensor.h>
#include <ATen/ops/sort_cpu_dispatch.h>
#include <ATen/ops/sort_ops.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernel_state.h"
#include "kwker/sort.h"
#include "registry.h"
#include "tensors.h"
#include "torch_facts.h"

namespace kwker::adapter {
namespace {

using at::Tensor;

// Below this many elements torch's own kernel is as fast: timed side by side for 16-, 32-, 64- and
// 128-element sorts of float32, int64 and bfloat16 (Kwker wins from 64 on).
constexpr int64_t kMinElements = 64;
// Rows shorter than this cost Kwker more per row than torch's insertion sort: timed on 4096 rows of
// 4 (0.7x) and 10000 rows of 8 (1.6x or more).
constexpr int64_t kMinRowLength = 8;
TieOrder tie_order(const Tensor& self, bool stable, bool descending) {
  if (stable) return TieOrder::kStable;
  const bool torch_uses_radix = self.dim() == 1 && !descending &&
                                c10::isIntegralType(self.scalar_type(), /*includeBool=*/false) &&
                                self.numel() >= kTorchRadixMinElements;
  return torch_uses_radix && torch_radix_sorts_1d_integers() ? TieOrder::kStable : TieOrder::kIntrosort;
}

std::optional<Fallback> why_torch_sorts(const Tensor& self, std::optional<bool> stable, int64_t dim) {
  if (!enabled_for_this_thread()) return Fallback::kDisabled;
  if (!plain_strided(self)) return Fallback::kLayout;
  if (!core_dtype(self.scalar_type())) return Fallback::kDtype;
  if (c10::isFloatingType(self.scalar_type()) && denormals_are_zero()) return Fallback::kDenormalsAreZero;
  if (!stable.has_value()) return Fallback::kArguments;
  if (self.dim() == 0) return Fallback::kSmall;
  if (dim < -self.dim() || dim >= self.dim()) return Fallback::kArguments;
  const int64_t d = dim < 0 ? dim + self.dim() : dim;
  if (self.numel() < kMinElements || self.size(d) < kMinRowLength) return Fallback::kSmall;
  if (self.size(d) > kMaxSortRowLength) return Fallback::kTooLong;
  if (self.stride(d) == 0) return Fallback::kZeroStride;
  return std::nullopt;
}

// The output strides torch's meta function gives.
std::vector<int64_t> output_strides(const Tensor& self) {
  return self.is_non_overlapping_and_dense() ? self.strides().vec()
                                             : at::infer_dense_strides(self.sizes(), self.strides());
}

// out= tensors torch accepts as they are (dtype, device), resized as torch's structured kernel does,
// to the meta strides.
bool resize_like_torch(const Tensor& self, const Tensor& out, c10::ScalarType dtype) {
  return resize_out_like_torch(out, self.sizes(), output_strides(self), dtype);
}

// out= tensors Kwker can write directly: correctly sized, no overlap with the input or each other.
bool out_tensors_usable(const Tensor& self, const Tensor& values, const Tensor& indices) {
  using at::MemOverlapStatus;
  return resize_like_torch(self, values, self.scalar_type()) &&
         resize_like_torch(self, indices, at::kLong) &&
         values.is_non_overlapping_and_dense() && indices.is_non_overlapping_and_dense() &&
         at::get_overlap_status(values, self) == MemOverlapStatus::No &&
         at::get_overlap_status(indices, self) == MemOverlapStatus::No &&
         at::get_overlap_status(values, indices) == MemOverlapStatus::No;
}

// One sort call as the core sees it: the rows of `self` along `dim`. Asked first whether the core
// declines (before any output exists), then run into the outputs.
class SortCall {
 public:
  SortCall(const Tensor& self, int64_t dim, bool descending, bool stable) : self_(self), dim_(dim) {
    for (int64_t d = 0; d < self.dim(); ++d) {
      if (d == dim) continue;
      outer_sizes_.push_back(self.size(d));
      input_strides_.push_back(self.stride(d));
    }
    problem_.dtype = *core_dtype(self.scalar_type());
    problem_.order = descending ? SortOrder::kDescending : SortOrder::kAscending;
    problem_.ties = tie_order(self, stable, descending);
    problem_.row_length = self.size(dim);
    problem_.outer_sizes = outer_sizes_;
    problem_.input = {const_cast<void*>(self.const_data_ptr()), self.stride(dim), input_strides_};
  }
  SortCall(const SortCall&) = delete;
  SortCall& operator=(const SortCall&) = delete;

  bool declined() const { return sort_declines(problem_); }

  void run(const Tensor& values, const Tensor& indices) {
    for (int64_t d = 0; d < self_.dim(); ++d) {
      if (d == dim_) continue;
      values_strides_.push_back(values.stride(d));
      indices_strides_.push_back(indices.stride(d));
    }
    problem_.values = {values.mutable_data_ptr(), values.stride(dim_), values_strides_};
    problem_.indices = {indices.mutable_data_ptr(), indices.stride(dim_), indices_strides_};
    sort_rows(problem_);
    if (fault_injected(Kernel::kSort) && indices.size(dim_) > 1) {
      // Test-only (kwker::inject_fault): a wrong answer that is still a permutation, since torch's own
      // kernels (unique, quantile) index with what sort returns. The first row's first two indices swap.
      int64_t* first = indices.mutable_data_ptr<int64_t>();
      std::swap(first[0], first[indices.stride(dim_)]);
    }
  }

 private:
  const Tensor& self_;
  int64_t dim_;
  std::vector<int64_t> outer_sizes_, input_strides_, values_strides_, indices_strides_;
  SortRowsProblem problem_{};
};

// Sets up Kwker's sort of this call in `sort`, or returns why torch sorts it.
std::optional<Fallback> plan_sort(const Tensor& self, std::optional<bool> stable, int64_t dim,
                                  bool descending, std::optional<SortCall>& sort) {
  if (const auto why = why_torch_sorts(self, stable, dim)) return why;
  sort.emplace(self, dim < 0 ? dim + self.dim() : dim, descending, *stable);
  if (sort->declined()) return Fallback::kDeclined;
  return std::nullopt;
}

std::tuple<Tensor, Tensor> sort_stable(const Tensor& self, std::optional<bool> stable, int64_t dim,
                                       bool descending) {
  CallRecord call(Kernel::kSort);
  std::optional<SortCall> sort;
  std::optional<Fallback> why = plan_sort(self, stable, dim, descending, sort);
  if (why) {
    call.fell_back(*why);
    return at::cpu::sort(self, stable, dim, descending);
  }
  const std::vector<int64_t> strides = output_strides(self);
  Tensor values = at::detail::empty_strided_cpu(self.sizes(), strides, self.scalar_type());
  Tensor indices = at::detail::empty_strided_cpu(self.sizes(), strides, at::kLong);
  sort->run(values, indices);
  call.served();
  return {std::move(values), std::move(indices)};
}

std::tuple<Tensor&, Tensor&> sort_values_stable(const Tensor& self, std::optional<bool> stable,
                                                int64_t dim, bool descending, Tensor& values,
                                                Tensor& indices) {
  CallRecord call(Kernel::kSort);
  std::optional<SortCall> sort;
  std::optional<Fallback> why = plan_sort(self, stable, dim, descending, sort);
  if (!why && !out_tensors_usable(self, values, indices)) why = Fallback::kOutTensors;
  if (why) {
    call.fell_back(*why);
    return at::cpu::sort_outf(self, stable, dim, descending, values, indices);
  }
  sort->run(values, indices);
  call.served();
  return {values, indices};
}

static_assert(std::is_same_v<decltype(sort_stable), at::_ops::sort_stable::schema>);
static_assert(std::is_same_v<decltype(sort_values_stable), at::_ops::sort_values_stable::schema>);

}  // namespace

void register_sort_kernels(torch::Library& library) {
  library.impl("sort.stable", TORCH_FN(sort_stable));
  library.impl("sort.values_stable", TORCH_FN(sort_values_stable));
}

}  // namespace kwker::adapter
