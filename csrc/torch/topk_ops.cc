// aten::topk and aten::topk.values on Kwker.
//
// Covered: strided CPU tensors of uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64
// (torch rejects bool and complex), any dim, any strides, 1 <= k <= the dim's size, rows of at least
// kMinRowLength, and short rows (kMinShortRowLength..kMaxShortRowLength, elements of up to 32 bits,
// sorted or k == 1). Everything else, and every argument torch must reject or resize, goes to
// torch's own CPU kernel (at::cpu::, no dispatcher round trip). Results, ties included: see
// kwker/topk.h.
#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/EmptyTensor.h>
#include <ATen/ops/topk_cpu_dispatch.h>
#include <ATen/ops/topk_ops.h>
#include <torch/library.h>

#include <optional>
#include <type_traits>
#include <vector>

#include "kernel_state.h"
#include "kwker/topk.h"
#include "registry.h"
#include "tensors.h"

namespace kwker::adapter {
namespace {

using at::Tensor;

// Below this many elements torch's own kernel is as fast (its per-call cost dominates).
constexpr int64_t kMinElements = 64;
// Shorter rows cost Kwker more per row than torch (timed on 4096 float32 rows: 8..64 long 0.85x,
// 128 long 1.4x).
constexpr int64_t kMinRowLength = 128;
// For k <= 2, torch's heap of one or two elements is as fast up to about this length (timed on
// 4096 float32 rows, AMD EPYC AVX2: 128 long 0.95x; 256 long 1.4x-1.65x).
constexpr int64_t kMaxSmallK = 2;
constexpr int64_t kMinSmallKRowLength = 256;
constexpr int64_t kMaxRowLength = (int64_t{1} << 32) - 1;  // positions travel in 32 bits
// Rows up to this long (keys of up to 32 bits, sorted output or k == 1) take the short-row path.
constexpr int64_t kMaxShortRowLength = 256;
constexpr int64_t kMinShortRowLength = 4;

std::optional<Fallback> why_torch_selects(const Tensor& self, int64_t k, int64_t dim, bool sorted) {
  if (!enabled_for_this_thread()) return Fallback::kDisabled;
  if (!plain_strided(self)) return Fallback::kLayout;
  const auto dtype = core_dtype(self.scalar_type());
  if (!dtype || *dtype == DType::kBool) return Fallback::kDtype;
  if (c10::isFloatingType(self.scalar_type()) && denormals_are_zero()) return Fallback::kDenormalsAreZero;
  if (self.dim() == 0) return Fallback::kSmall;
  if (dim < -self.dim() || dim >= self.dim()) return Fallback::kArguments;
  const int64_t n = self.size(dim < 0 ? dim + self.dim() : dim);
  if (k < 0 || k > n) return Fallback::kArguments;
  if (k == 0 || self.numel() < kMinElements) return Fallback::kSmall;
  const bool short_row = n >= kMinShortRowLength && n <= kMaxShortRowLength && self.element_size() <= 4 &&
                         (sorted || k == 1);
  if (!short_row && (n < kMinRowLength || (k <= kMaxSmallK && n < kMinSmallKRowLength))) return Fallback::kSmall;
  if (n > kMaxRowLength) return Fallback::kTooLong;
  return std::nullopt;
}

std::vector<int64_t> output_sizes(const Tensor& self, int64_t k, int64_t dim) {
  std::vector<int64_t> sizes = self.sizes().vec();
  sizes[dim] = k;
  return sizes;
}

// out= tensors Kwker can write directly, resized as torch resizes them: no element written twice,
// no overlap with the input or each other.
bool out_tensors_usable(const Tensor& self, at::IntArrayRef sizes, const Tensor& values, const Tensor& indices) {
  const auto strides = c10::contiguous_strides(sizes);
  return resize_out_like_torch(values, sizes, strides, self.scalar_type()) &&
         resize_out_like_torch(indices, sizes, strides, at::kLong) && no_internal_overlap(values) &&
         no_internal_overlap(indices) && distinct(values, self) && distinct(indices, self) &&
         distinct(values, indices);
}

void run_topk(const Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted, const Tensor& values,
              const Tensor& indices) {
  std::vector<int64_t> outer_sizes, input_strides, values_strides, indices_strides;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (d == dim) continue;
    outer_sizes.push_back(self.size(d));
    input_strides.push_back(self.stride(d));
    values_strides.push_back(values.stride(d));
    indices_strides.push_back(indices.stride(d));
  }
  TopKRowsProblem problem{};
  problem.dtype = *core_dtype(self.scalar_type());
  problem.largest = largest;
  problem.sorted = sorted;
  problem.k = k;
  problem.row_length = self.size(dim);
  problem.outer_sizes = outer_sizes;
  problem.input = {const_cast<void*>(self.const_data_ptr()), self.stride(dim), input_strides};
  problem.values = {values.mutable_data_ptr(), values.stride(dim), values_strides};
  problem.indices = {indices.mutable_data_ptr(), indices.stride(dim), indices_strides};
  topk_rows(problem);
  if (fault_injected(Kernel::kTopk)) {
    *indices.mutable_data_ptr<int64_t>() = -1;  // test-only (kwker::inject_fault): a wrong answer
  }
}

int64_t wrapped(int64_t dim, const Tensor& self) { return dim < 0 ? dim + self.dim() : dim; }

std::tuple<Tensor, Tensor> topk(const Tensor& self, c10::SymInt k_sym, int64_t dim, bool largest, bool sorted) {
  CallRecord call(Kernel::kTopk);
  const int64_t k = k_sym.guard_int(__FILE__, __LINE__);
  if (const auto why = why_torch_selects(self, k, dim, sorted)) {
    call.fell_back(*why);
    return at::cpu::topk_symint(self, std::move(k_sym), dim, largest, sorted);
  }
  dim = wrapped(dim, self);
  const std::vector<int64_t> sizes = output_sizes(self, k, dim);
  Tensor values = at::detail::empty_cpu(sizes, self.scalar_type());
  Tensor indices = at::detail::empty_cpu(sizes, at::kLong);
  run_topk(self, k, dim, largest, sorted, values, indices);
  call.served();
  return {std::move(values), std::move(indices)};
}

std::tuple<Tensor&, Tensor&> topk_values(const Tensor& self, c10::SymInt k_sym, int64_t dim, bool largest,
                                         bool sorted, Tensor& values, Tensor& indices) {
  CallRecord call(Kernel::kTopk);
  const int64_t k = k_sym.guard_int(__FILE__, __LINE__);
  std::optional<Fallback> why = why_torch_selects(self, k, dim, sorted);
  if (!why && !out_tensors_usable(self, output_sizes(self, k, wrapped(dim, self)), values, indices)) {
    why = Fallback::kOutTensors;
  }
  if (why) {
    call.fell_back(*why);
    return at::cpu::topk_symint_outf(self, std::move(k_sym), dim, largest, sorted, values, indices);
  }
  run_topk(self, k, wrapped(dim, self), largest, sorted, values, indices);
  call.served();
  return {values, indices};
}

static_assert(std::is_same_v<decltype(topk), at::_ops::topk::schema>);
static_assert(std::is_same_v<decltype(topk_values), at::_ops::topk_values::schema>);

}  // namespace

void register_topk_kernels(torch::Library& library) {
  library.impl("topk", TORCH_FN(topk));
  library.impl("topk.values", TORCH_FN(topk_values));
}

}  // namespace kwker::adapter
