// aten::searchsorted.Tensor(_out) and aten::bucketize.Tensor(_out) on Kwker (the Scalar overloads, one
// value, stay torch's).
//
// Covered: CPU tensors of uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64 with
// boundaries and values of one dtype, 1-d or N-d boundaries, any strides (made contiguous by torch's
// own helper, with its warning), a sorter, int32 or int64 positions, out= of any strides. Arguments
// are checked by torch's own searchsorted_pre_check, so errors are torch's. Below kMinValues values,
// with mixed dtypes (torch promotes), bool (torch rejects it), out= tensors sharing memory with an
// input, and under flush-denormal mode, torch's own kernel runs. Results: see kwker/search.h.
#include <ATen/core/Tensor.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/BucketizationUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/bucketize_cpu_dispatch.h>
#include <ATen/ops/bucketize_ops.h>
#include <ATen/ops/searchsorted_cpu_dispatch.h>
#include <ATen/ops/searchsorted_ops.h>
#include <torch/library.h>

#include <optional>
#include <string_view>
#include <type_traits>

#include "kernel_state.h"
#include "kwker/search.h"
#include "registry.h"
#include "tensors.h"

namespace kwker::adapter {
namespace {

using at::Tensor;

// Fewer values than this: torch's own search is as fast (its per-call cost dominates).
constexpr int64_t kMinValues = 64;

// Whether Kwker leaves the call to torch before any argument is checked, and why.
std::optional<Fallback> why_torch_searches(const Tensor& boundaries, const Tensor& self, const Tensor& sorter,
                                           const Tensor& result) {
  if (!enabled_for_this_thread()) return Fallback::kDisabled;
  if (!plain_strided(boundaries) || !plain_strided(self) || !plain_strided(result) ||
      (sorter.defined() && !plain_strided(sorter))) {
    return Fallback::kLayout;
  }
  const auto dtype = core_dtype(self.scalar_type());
  if (!dtype || *dtype == DType::kBool || boundaries.scalar_type() != self.scalar_type()) return Fallback::kDtype;
  if (c10::isFloatingType(self.scalar_type()) && denormals_are_zero()) return Fallback::kDenormalsAreZero;
  if (self.dim() == 0 || self.numel() < kMinValues || boundaries.dim() == 0 || boundaries.numel() == 0) {
    return Fallback::kSmall;  // a scalar value, few values, or no boundaries (torch's zeros or errors)
  }
  if (boundaries.size(-1) > kMaxSearchRowLength) return Fallback::kTooLong;
  return std::nullopt;
}

// Serves searchsorted(boundaries, self, ...) into `result` and returns nullopt, or returns why torch
// must (nothing written then). Raises torch's errors for bad arguments.
std::optional<Fallback> search_on_kwker(const Tensor& boundaries, const Tensor& self, bool out_int32, bool right,
                                        std::optional<std::string_view> side, const Tensor& sorter,
                                        Tensor& result) {
  if (auto why = why_torch_searches(boundaries, self, sorter, result)) return why;
  at::native::searchsorted_pre_check(boundaries, self, result, out_int32, right, side, sorter);
  at::native::resize_output(result, self.sizes());
  if (!distinct(result, self) || !distinct(result, boundaries) || (sorter.defined() && !distinct(result, sorter))) {
    return Fallback::kOutTensors;
  }
  // torch's own copies of non-contiguous inputs, with its warnings (once per program, like torch's).
  Tensor in_copy, bd_copy, order_copy;
  at::native::searchsorted_maybe_trim_input_tensors(in_copy, bd_copy, order_copy, self, boundaries, sorter);
  const Tensor& in = in_copy.defined() ? in_copy : self;
  const Tensor& bd = bd_copy.defined() ? bd_copy : boundaries;
  const Tensor& order = order_copy.defined() ? order_copy : sorter;
  Tensor out = result.is_contiguous() ? result : result.contiguous();
  const int64_t m = bd.size(-1);
  SearchSortedProblem problem{};
  problem.dtype = *core_dtype(self.scalar_type());
  problem.side = (side ? *side == "right" : right) ? SearchSide::kRight : SearchSide::kLeft;
  problem.boundaries = bd.const_data_ptr();
  problem.row_length = m;
  problem.boundary_rows = bd.dim() == 1 ? 1 : bd.numel() / m;
  problem.sorter = order.defined() ? order.const_data_ptr<int64_t>() : nullptr;
  problem.values = in.const_data_ptr();
  problem.values_per_row = bd.dim() == 1 ? in.numel() : in.size(-1);
  problem.out = out.mutable_data_ptr();
  problem.out_int32 = out_int32;
  if (!search_sorted(problem)) return Fallback::kDeclined;
  if (fault_injected(Kernel::kSearchsorted)) {
    out.view(-1)[0].fill_(-1);  // test-only (kwker::inject_fault): a wrong answer
  }
  if (!out.is_same(result)) result.copy_(out);
  return std::nullopt;
}

Tensor empty_positions(bool out_int32) { return at::detail::empty_cpu({0}, out_int32 ? at::kInt : at::kLong); }

Tensor& searchsorted_out(const Tensor& boundaries, const Tensor& self, bool out_int32, bool right,
                         std::optional<c10::string_view> side, const std::optional<Tensor>& sorter_opt,
                         Tensor& result) {
  CallRecord call(Kernel::kSearchsorted);
  const Tensor sorter = sorter_opt.value_or(Tensor());
  const std::optional<std::string_view> side_view =
      side ? std::optional<std::string_view>(std::string_view(side->data(), side->size())) : std::nullopt;
  if (auto why = search_on_kwker(boundaries, self, out_int32, right, side_view, sorter, result)) {
    call.fell_back(*why);
    return at::cpu::searchsorted_outf(boundaries, self, out_int32, right, side, sorter_opt, result);
  }
  call.served();
  return result;
}

Tensor searchsorted(const Tensor& boundaries, const Tensor& self, bool out_int32, bool right,
                    std::optional<c10::string_view> side, const std::optional<Tensor>& sorter) {
  Tensor result = empty_positions(out_int32);
  searchsorted_out(boundaries, self, out_int32, right, side, sorter, result);
  return result;
}

Tensor& bucketize_out(const Tensor& self, const Tensor& boundaries, bool out_int32, bool right, Tensor& result) {
  CallRecord call(Kernel::kSearchsorted);
  std::optional<Fallback> why;
  if (boundaries.dim() != 1) {
    why = Fallback::kArguments;  // torch raises
  } else {
    why = search_on_kwker(boundaries, self, out_int32, right, std::nullopt, Tensor(), result);
  }
  if (why) {
    call.fell_back(*why);
    return at::cpu::bucketize_outf(self, boundaries, out_int32, right, result);
  }
  call.served();
  return result;
}

Tensor bucketize(const Tensor& self, const Tensor& boundaries, bool out_int32, bool right) {
  Tensor result = empty_positions(out_int32);
  bucketize_out(self, boundaries, out_int32, right, result);
  return result;
}

static_assert(std::is_same_v<decltype(searchsorted), at::_ops::searchsorted_Tensor::schema>);
static_assert(std::is_same_v<decltype(searchsorted_out), at::_ops::searchsorted_Tensor_out::schema>);
static_assert(std::is_same_v<decltype(bucketize), at::_ops::bucketize_Tensor::schema>);
static_assert(std::is_same_v<decltype(bucketize_out), at::_ops::bucketize_Tensor_out::schema>);

}  // namespace

void register_searchsorted_kernels(torch::Library& library) {
  library.impl("searchsorted.Tensor", TORCH_FN(searchsorted));
  library.impl("searchsorted.Tensor_out", TORCH_FN(searchsorted_out));
  library.impl("bucketize.Tensor", TORCH_FN(bucketize));
  library.impl("bucketize.Tensor_out", TORCH_FN(bucketize_out));
}

}  // namespace kwker::adapter
