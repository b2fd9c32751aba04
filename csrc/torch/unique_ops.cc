// aten::_unique2 (torch.unique and Tensor.unique, flat: no dim) on Kwker.
//
// Covered: CPU tensors of uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64, any
// shape and strides (read contiguous), with or without inverse and counts (`sorted` is ignored, as
// torch's CPU kernel ignores it). Left to torch's own kernel: bool (torch counts trues, already one
// pass), fewer than kMinElements, float inputs whose answer depends on torch's sort (a NaN, or both
// -0.0 and +0.0: `declined`), flush-denormal mode. Results: see kwker/unique.h.
#include <ATen/core/Tensor.h>
#include <ATen/EmptyTensor.h>
#include <ATen/ops/_unique2_cpu_dispatch.h>
#include <ATen/ops/_unique2_ops.h>
#include <torch/library.h>

#include <optional>
#include <tuple>
#include <type_traits>

#include "kernel_state.h"
#include "kwker/unique.h"
#include "registry.h"
#include "tensors.h"

namespace kwker::adapter {
namespace {

using at::Tensor;

// Fewer elements: torch's own kernel is as fast (its per-call cost dominates).
constexpr int64_t kMinElements = 256;

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
    if (unique.prepare(*core_dtype(self.scalar_type()), input.const_data_ptr(), input.numel())) {
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

static_assert(std::is_same_v<decltype(unique2), at::_ops::_unique2::schema>);

}  // namespace

void register_unique_kernels(torch::Library& library) { library.impl("_unique2", TORCH_FN(unique2)); }

}  // namespace kwker::adapter
