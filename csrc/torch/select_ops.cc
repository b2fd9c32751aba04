// aten::kthvalue.values, aten::median, aten::median.dim_values, aten::nanmedian and
// aten::nanmedian.dim_values on Kwker (the functional overloads are composites that call these).
//
// Covered: strided CPU tensors of uint8, int8, int16, int32, int64, float16, bfloat16, float32,
// float64 (torch rejects bool), any dim with a non-zero stride, rows of at least kMinMedianRowLength
// (kthvalue: kMinKthValueRowLength).
// Everything else, and every argument torch must reject, goes to torch's own CPU kernel (at::cpu::,
// no dispatcher round trip). out= tensors are resized by torch's own helpers, as torch resizes them.
// Results, ties included: see kwker/select.h.
#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/native/SortingUtils.h>
#include <ATen/ops/kthvalue_cpu_dispatch.h>
#include <ATen/ops/kthvalue_ops.h>
#include <ATen/ops/median_cpu_dispatch.h>
#include <ATen/ops/median_ops.h>
#include <ATen/ops/nanmedian_cpu_dispatch.h>
#include <ATen/ops/nanmedian_ops.h>
#include <torch/library.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <type_traits>
#include <vector>

#include "kernel_state.h"
#include "kwker/select.h"
#include "registry.h"
#include "tensors.h"

namespace kwker::adapter {
namespace {

using at::Tensor;

// Below this many elements torch's own kernel is as fast (its per-call cost dominates).
constexpr int64_t kMinElements = 64;
// Shorter rows cost Kwker more per row than torch (rows of 262144 x 9 elements, AMD EPYC AVX2: median
// of 3 strided 0.82x, of 4 1.7x; kthvalue of 4 1.03-1.2x, of 5 1.2-1.55x).
constexpr int64_t kMinMedianRowLength = 4;
constexpr int64_t kMinKthValueRowLength = 5;
// median()/nanmedian() of more elements go to torch: Kwker's per-thread work buffers (32 bytes per
// element, kept for later calls) would reach a gigabyte, torch's copy 4-8 bytes per element.
constexpr int64_t kMaxWholeTensorElements = int64_t{1} << 25;

// Why torch handles a call on `self` along `dim` (nullopt: the whole tensor); `k` only for kthvalue.
std::optional<Fallback> why_torch_selects(const Tensor& self, std::optional<int64_t> dim, int64_t k,
                                          SelectRule rule) {
  if (!enabled_for_this_thread()) return Fallback::kDisabled;
  if (!plain_strided(self)) return Fallback::kLayout;
  const auto dtype = core_dtype(self.scalar_type());
  if (!dtype || *dtype == DType::kBool) return Fallback::kDtype;
  if (c10::isFloatingType(self.scalar_type()) && denormals_are_zero()) return Fallback::kDenormalsAreZero;
  if (!dim) {
    if (self.numel() < kMinElements) return Fallback::kSmall;  // empty included: torch's NaN
    if (self.numel() > kMaxWholeTensorElements) return Fallback::kTooLong;
    return std::nullopt;
  }
  if (self.dim() == 0) return Fallback::kSmall;
  if (*dim < -self.dim() || *dim >= self.dim()) return Fallback::kArguments;
  const int64_t d = *dim < 0 ? *dim + self.dim() : *dim;
  const int64_t n = self.size(d);
  if (n == 0 || self.numel() == 0) return Fallback::kArguments;  // torch's errors or empty outputs
  if (rule == SelectRule::kKthValue && (k < 1 || k > n)) return Fallback::kArguments;
  // Stride 0: torch's median reads the row as if it were contiguous (past the tensor's elements).
  if (self.stride(d) == 0 && n > 1) return Fallback::kZeroStride;
  const int64_t min_row_length = rule == SelectRule::kKthValue ? kMinKthValueRowLength : kMinMedianRowLength;
  if (self.numel() < kMinElements || n < min_row_length) return Fallback::kSmall;
  if (n > kMaxSelectRowLength) return Fallback::kTooLong;
  return std::nullopt;
}

// Output tensors, already shaped, Kwker can write: no element twice, no overlap with the input or
// each other.
bool writable(const Tensor& self, const Tensor& values, const Tensor& indices) {
  return no_internal_overlap(values) && no_internal_overlap(indices) && distinct(values, self) &&
         distinct(indices, self) && distinct(values, indices);
}

// Selects along `dim` into values / indices (shaped with dim kept, or dropped).
void run_select(const Tensor& self, int64_t dim, SelectRule rule, int64_t k, const Tensor& values,
                const Tensor& indices, bool keepdim) {
  std::vector<int64_t> outer_sizes, input_strides, values_strides, indices_strides;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (d == dim) continue;
    const int64_t out = keepdim || d < dim ? d : d - 1;
    outer_sizes.push_back(self.size(d));
    input_strides.push_back(self.stride(d));
    values_strides.push_back(values.stride(out));
    indices_strides.push_back(indices.stride(out));
  }
  SelectRowsProblem problem{};
  problem.dtype = *core_dtype(self.scalar_type());
  problem.rule = rule;
  problem.k = k;
  problem.row_length = self.size(dim);
  problem.outer_sizes = outer_sizes;
  problem.input = {const_cast<void*>(self.const_data_ptr()), self.stride(dim), input_strides};
  problem.values = {values.mutable_data_ptr(), 0, values_strides};
  problem.indices = {indices.mutable_data_ptr(), 0, indices_strides};
  select_rows(problem);
}

int64_t wrapped(int64_t dim, const Tensor& self) { return dim < 0 ? dim + self.dim() : dim; }

Kernel kernel_of(SelectRule rule) { return rule == SelectRule::kKthValue ? Kernel::kKthvalue : Kernel::kMedian; }

void inject_fault_if_asked(SelectRule rule, const Tensor& indices) {
  if (fault_injected(kernel_of(rule)) && indices.numel() > 0) {
    *indices.mutable_data_ptr<int64_t>() = -1;  // test-only (kwker::inject_fault): a wrong answer
  }
}

std::tuple<Tensor&, Tensor&> kthvalue_values(const Tensor& self, c10::SymInt k_sym, int64_t dim, bool keepdim,
                                             Tensor& values, Tensor& indices) {
  CallRecord call(Kernel::kKthvalue);
  const int64_t k = k_sym.guard_int(__FILE__, __LINE__);
  std::optional<Fallback> why = why_torch_selects(self, dim, k, SelectRule::kKthValue);
  // What torch checks before it resizes: it must raise these itself.
  if (!why && !(plain_strided(values) && self.options().type_equal(values.options()) && plain_strided(indices) &&
                indices.scalar_type() == at::kLong && distinct(values, self))) {
    why = Fallback::kOutTensors;
  }
  if (!why) {
    dim = wrapped(dim, self);
    // torch's own resize (it keeps a dim-less out tensor's strides by unsqueezing it first); torch,
    // if it runs after all, finds the outputs already shaped and resizes nothing.
    at::native::_reduction_with_indices_allocate_or_resize_output(values, indices, self, dim, keepdim);
    if (!writable(self, values, indices)) why = Fallback::kOutTensors;
  }
  if (why) {
    call.fell_back(*why);
    return at::cpu::kthvalue_symint_outf(self, std::move(k_sym), dim, keepdim, values, indices);
  }
  run_select(self, dim, SelectRule::kKthValue, k, values, indices, true);
  inject_fault_if_asked(SelectRule::kKthValue, indices);
  if (!keepdim) {
    values.squeeze_(dim);
    indices.squeeze_(dim);
  }
  call.served();
  return {values, indices};
}

template <SelectRule kRule>
std::tuple<Tensor&, Tensor&> median_dim_values(const Tensor& self, int64_t dim, bool keepdim, Tensor& values,
                                               Tensor& indices) {
  CallRecord call(Kernel::kMedian);
  std::optional<Fallback> why = why_torch_selects(self, dim, 0, kRule);
  if (!why && !(plain_strided(values) && values.scalar_type() == self.scalar_type() && plain_strided(indices) &&
                indices.scalar_type() == at::kLong)) {
    why = Fallback::kOutTensors;
  }
  if (!why) {
    dim = wrapped(dim, self);
    std::vector<int64_t> out_sizes = self.sizes().vec();
    if (keepdim) {
      out_sizes[dim] = 1;
    } else {
      out_sizes.erase(out_sizes.begin() + dim);
    }
    at::native::resize_output(values, out_sizes);
    at::native::resize_output(indices, out_sizes);
    if (!writable(self, values, indices)) why = Fallback::kOutTensors;
  }
  if (why) {
    call.fell_back(*why);
    if constexpr (kRule == SelectRule::kMedian) return at::cpu::median_outf(self, dim, keepdim, values, indices);
    return at::cpu::nanmedian_outf(self, dim, keepdim, values, indices);
  }
  run_select(self, dim, kRule, 0, values, indices, keepdim);
  inject_fault_if_asked(kRule, indices);
  call.served();
  return {values, indices};
}

template <SelectRule kRule>
Tensor median_all(const Tensor& self) {
  CallRecord call(Kernel::kMedian);
  std::optional<Fallback> why = why_torch_selects(self, std::nullopt, 0, kRule);
  if (!why) {
    const Tensor in = self.contiguous();
    Tensor out = at::detail::empty_cpu({}, self.scalar_type());
    if (median_of_all(*core_dtype(self.scalar_type()), kRule == SelectRule::kNanMedian, in.const_data_ptr(),
                      in.numel(), out.mutable_data_ptr())) {
      if (fault_injected(Kernel::kMedian)) out.fill_(1);  // test-only (kwker::inject_fault)
      call.served();
      return out;
    }
    why = Fallback::kDeclined;  // torch's bits depend on its algorithm here
  }
  call.fell_back(*why);
  if constexpr (kRule == SelectRule::kMedian) return at::cpu::median(self);
  return at::cpu::nanmedian(self);
}

static_assert(std::is_same_v<decltype(kthvalue_values), at::_ops::kthvalue_values::schema>);
static_assert(std::is_same_v<decltype(median_dim_values<SelectRule::kMedian>), at::_ops::median_dim_values::schema>);
static_assert(std::is_same_v<decltype(median_all<SelectRule::kMedian>), at::_ops::median::schema>);
static_assert(std::is_same_v<decltype(median_dim_values<SelectRule::kNanMedian>),
                             at::_ops::nanmedian_dim_values::schema>);
static_assert(std::is_same_v<decltype(median_all<SelectRule::kNanMedian>), at::_ops::nanmedian::schema>);

}  // namespace

void register_kthvalue_kernels(torch::Library& library) {
  library.impl("kthvalue.values", TORCH_FN(kthvalue_values));
}

void register_median_kernels(torch::Library& library) {
  library.impl("median", TORCH_FN(median_all<SelectRule::kMedian>));
  library.impl("median.dim_values", TORCH_FN(median_dim_values<SelectRule::kMedian>));
  library.impl("nanmedian", TORCH_FN(median_all<SelectRule::kNanMedian>));
  library.impl("nanmedian.dim_values", TORCH_FN(median_dim_values<SelectRule::kNanMedian>));
}

}  // namespace kwker::adapter
