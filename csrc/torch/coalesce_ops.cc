// aten::_coalesce at the SparseCPU key on Kwker (family "coalesce"): what Tensor.coalesce() runs for a
// sparse COO CPU tensor not marked coalesced. Results: see kwker/coalesce.h.
//
// Covered: values of bool, integer and float types (dense dims of any shape), any sparse_dim, at least
// kMinNnz elements. torch's own kernel runs for complex values, indices outside the sizes, a NaN sum,
// and a thread whose MXCSR is not the default.
#include <ATen/SparseTensorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/_coalesce_native.h>
#include <ATen/ops/_coalesce_ops.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <optional>
#include <type_traits>
#include <vector>

#include "fresh_pages.h"
#include "kernel_state.h"
#include "kwker/coalesce.h"
#include "registry.h"
#include "tensors.h"
#include "torch_facts.h"

namespace kwker::adapter {
namespace {

using at::Tensor;

// Fewer elements than this: torch's walk is as fast as Kwker's sort and walk.
constexpr int64_t kMinNnz = 64;

std::optional<Fallback> why_torch_coalesces(const Tensor& self) {
  if (!enabled_for_this_thread()) return Fallback::kDisabled;
  if (!self.device().is_cpu() || self.layout() != at::kSparse) return Fallback::kLayout;
  if (self.is_coalesced()) return Fallback::kArguments;  // torch's internal assert fails: its error
  if (!core_dtype(self.scalar_type())) return Fallback::kDtype;
  if (self._nnz() < kMinNnz) return Fallback::kSmall;
  if (c10::isFloatingType(self.scalar_type()) && !float_mode_is_default()) return Fallback::kFloatMode;
  return std::nullopt;
}

Tensor coalesce(const Tensor& self) {
  CallRecord call(Kernel::kCoalesce);
  if (auto why = why_torch_coalesces(self)) {
    call.fell_back(*why);
    return at::native::_coalesce_sparse_cpu(self);
  }
  const Tensor indices = self._indices();
  const Tensor values = self._values().contiguous();
  const int64_t sparse_dim = self.sparse_dim(), nnz = self._nnz();
  Tensor new_indices = empty_for_dense_writes(indices.sizes(), indices.options());
  Tensor new_values = empty_for_dense_writes(values.sizes(), values.options());
  const std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().begin() + sparse_dim);
  CoalesceProblem problem{};
  problem.dtype = *core_dtype(self.scalar_type());
  problem.nnz = nnz;
  problem.sparse_dim = sparse_dim;
  problem.sizes = sizes.data();
  problem.indices = indices.const_data_ptr<int64_t>();
  problem.indices_stride0 = indices.stride(0);
  problem.indices_stride1 = indices.stride(1);
  problem.values = values.const_data_ptr();
  problem.block_elements = nnz ? values.numel() / nnz : 0;
  // torch sorts the keys as a view of the indices when sparse_dim is 1; along stride 0 (expanded
  // indices) its sort returns the identity, which is the stable order of those equal keys.
  problem.torch_sorts_stably = (nnz >= kTorchRadixMinElements && torch_radix_sorts_1d_integers()) ||
                               (sparse_dim == 1 && indices.stride(1) == 0);
  problem.new_indices = new_indices.mutable_data_ptr<int64_t>();
  problem.new_values = new_values.mutable_data_ptr();
  const int64_t coalesced = kwker::coalesce(problem);
  if (coalesced < 0) {
    call.fell_back(Fallback::kDeclined);  // an index outside the sizes, or a NaN sum
    return at::native::_coalesce_sparse_cpu(self);
  }
  if (fault_injected(Kernel::kCoalesce) && new_indices.numel() > 0) {
    new_indices.view(-1)[0].fill_(-1);  // test-only (kwker::inject_fault): a wrong answer
  }
  // As torch builds its result: a sparse tensor of self's sizes aliasing the new indices and values,
  // marked coalesced, narrowed to the coalesced count.
  Tensor dst = at::empty({0}, self.options());
  auto* impl = static_cast<at::SparseTensorImpl*>(dst.unsafeGetTensorImpl());
  impl->resize_(sparse_dim, self.dense_dim(), self.sizes());
  impl->set_indices_and_values_unsafe(new_indices, new_values);
  dst._coalesced_(true);
  impl->set_nnz_and_narrow(coalesced);
  call.served();
  return dst;
}

static_assert(std::is_same_v<decltype(coalesce), at::_ops::_coalesce::schema>);

}  // namespace

void register_coalesce_kernels(torch::Library& library) { library.impl("_coalesce", TORCH_FN(coalesce)); }

}  // namespace kwker::adapter
