// aten::quantile and aten::nanquantile (Tensor and float q, functional and out=) on Kwker.
//
// These are CompositeImplicitAutograd ops: torch decomposes them into sort (or, from 2.14, an
// nth_element selection), gather and lerp, and autograd differentiates those. Kwker registers the
// same kernel at AutogradCPU and CPU: inputs that need gradients (grad mode on and an input requiring
// grad, or a forward-mode tangent) go to torch's composite, so autograd records it as before; all
// others are computed here. Only the order statistics come from Kwker (kwker/quantile.h); the rank
// arithmetic, weights and lerp are torch's own ops, called as quantile_compute calls them in the
// installed torch version (ranks in the input dtype before 2.14, in float64 from 2.14), so every
// rounding is torch's.
//
// Left to torch's composite: inputs needing gradients (`autograd`); anything torch must reject
// (`arguments`: its errors); fewer than kMinElements elements (`small`); inputs where torch's bits
// depend on which of equal elements its algorithm picks (`declined`): quantile of an input holding a
// NaN, nanquantile of a row of NaNs, an input holding both -0.0 and +0.0; flush-denormal mode.
#include <ATen/core/Tensor.h>
#include <ATen/EmptyTensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/nanquantile_compositeimplicitautograd_dispatch.h>
#include <ATen/ops/nanquantile_ops.h>
#include <ATen/ops/quantile_compositeimplicitautograd_dispatch.h>
#include <ATen/ops/quantile_ops.h>
#include <ATen/ops/scalar_tensor.h>
#include <torch/library.h>
#include <torch/version.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kernel_state.h"
#include "kwker/quantile.h"
#include "registry.h"
#include "tensors.h"

namespace kwker::adapter {
namespace {

using at::Tensor;

// torch >= 2.14 computes ranks in float64 and rounds the linear weight once to the input dtype.
constexpr bool kRanksInFloat64 = TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 14);
// torch < 2.14 rejects longer reductions ("quantile() input tensor is too large").
constexpr int64_t kMaxReducedLengthBefore214 = int64_t{1} << 24;
constexpr int64_t kMinElements = 256;

enum class Interpolation { kLinear, kLower, kHigher, kMidpoint, kNearest };

std::optional<Interpolation> parse_interpolation(std::string_view s) {
  if (s == "linear") return Interpolation::kLinear;
  if (s == "lower") return Interpolation::kLower;
  if (s == "higher") return Interpolation::kHigher;
  if (s == "midpoint") return Interpolation::kMidpoint;
  if (s == "nearest") return Interpolation::kNearest;
  return std::nullopt;
}

bool needs_autograd(const Tensor& t) {
  return (at::GradMode::is_enabled() && t.requires_grad()) || t._fw_grad(/*level=*/0).defined();
}

// q's values, all in [0, 1] (NaN is not): torch checks the same and raises otherwise.
bool q_in_range(const Tensor& q) {
  const Tensor c = q.contiguous();
  for (int64_t i = 0; i < c.numel(); ++i) {
    const double v = c.scalar_type() == at::kFloat ? double(c.const_data_ptr<float>()[i]) : c.const_data_ptr<double>()[i];
    if (!(v >= 0 && v <= 1)) return false;
  }
  return true;
}

// The quantiles as torch's quantile_compute returns them (values, shape and strides), or nullopt
// with *why set.
std::optional<Tensor> quantile_on_kwker(const Tensor& self, const Tensor& q, std::optional<int64_t> dim, bool keepdim,
                                        std::string_view interpolation_name, bool ignore_nan, Fallback* why) {
  const auto fail = [&](Fallback f) -> std::optional<Tensor> {
    *why = f;
    return std::nullopt;
  };
  if (!enabled_for_this_thread()) return fail(Fallback::kDisabled);
  if (!plain_strided(self) || !plain_strided(q)) return fail(Fallback::kLayout);
  if (needs_autograd(self) || needs_autograd(q)) return fail(Fallback::kAutograd);
  const auto interpolation = parse_interpolation(interpolation_name);
  const c10::ScalarType dtype = self.scalar_type();
  if (!interpolation || self.numel() == 0 || q.dim() > 1 || (dtype != at::kFloat && dtype != at::kDouble) ||
      q.scalar_type() != dtype || !q_in_range(q)) {
    return fail(Fallback::kArguments);
  }
  if (dim && self.dim() > 0 && (*dim < -self.dim() || *dim >= self.dim())) return fail(Fallback::kArguments);
  if (denormals_are_zero()) return fail(Fallback::kDenormalsAreZero);
  if (self.dim() == 0 || self.numel() < kMinElements || q.numel() == 0) return fail(Fallback::kSmall);
  const int64_t d = dim ? (*dim < 0 ? *dim + self.dim() : *dim) : 0;
  const int64_t length = dim ? self.size(d) : self.numel();
  if (!kRanksInFloat64 && length > kMaxReducedLengthBefore214) return fail(Fallback::kArguments);

  // Rows along the reduced dim, and the shape torch gives them (reduced dims kept as 1 if keepdim).
  std::vector<int64_t> row_shape;
  if (dim) {
    row_shape = self.sizes().vec();
    if (keepdim) row_shape[d] = 1;
    else row_shape.erase(row_shape.begin() + d);
  } else if (keepdim) {
    row_shape.assign(self.dim(), 1);
  }
  const Tensor rows = dim ? self.movedim(d, -1).contiguous() : self.reshape({-1}).contiguous();
  const int64_t row_count = self.numel() / length;
  const DType core_type = dtype == at::kFloat ? DType::kFloat32 : DType::kFloat64;
  Tensor numbers = at::detail::empty_cpu({row_count, 1}, at::kLong);
  const RowsScan scan = scan_rows(core_type, rows.const_data_ptr(), row_count, length, numbers.mutable_data_ptr<int64_t>());
  if (scan.both_zero_signs || (ignore_nan ? scan.all_nan_row : scan.any_nan)) return fail(Fallback::kDeclined);

  // Ranks, as quantile_compute computes them (no row holds a NaN for quantile, and nanquantile's
  // all-NaN rows were declined, so its masked fills do nothing here).
  const Tensor q_row = (q.dim() == 0 ? q.reshape({1}) : q);
  const Tensor q_rank = kRanksInFloat64 ? q_row.to(at::kDouble) : q_row;
  Tensor ranks;
  if (ignore_nan) {
    ranks = q_rank.mul(numbers.sub(1));
    ranks.masked_fill_(ranks.lt(0), 0);
  } else {
    ranks = q_rank.mul(length - 1).expand({row_count, q_row.numel()}).contiguous();
  }
  if (*interpolation == Interpolation::kLower) ranks.floor_();
  if (*interpolation == Interpolation::kHigher) ranks.ceil_();
  if (*interpolation == Interpolation::kNearest) ranks.round_();

  // The order statistics at ranks_below (and ranks_above), found in one pass over the rows, into
  // contiguous tensors shaped as torch's gather returns them.
  const int64_t nq = q_row.numel();
  const bool interpolates = *interpolation == Interpolation::kLinear || *interpolation == Interpolation::kMidpoint;
  const Tensor ranks_below = ranks.to(at::kLong);
  const Tensor wanted = interpolates ? at::cat({ranks_below, ranks.ceil().to(at::kLong)}, -1) : ranks_below;
  Tensor selected = at::detail::empty_cpu({row_count, wanted.size(-1)}, dtype);
  RankSelectProblem p{};
  p.dtype = core_type;
  p.rows = rows.const_data_ptr();
  p.row_count = row_count;
  p.row_length = length;
  p.ranks = wanted.const_data_ptr<int64_t>();  // contiguous: a fresh to() or cat()
  p.ranks_per_row = wanted.size(-1);
  p.out = selected.mutable_data_ptr();
  select_ranks(p);
  std::vector<int64_t> values_shape = row_shape;
  values_shape.push_back(nq);
  Tensor values = at::detail::empty_cpu(values_shape, dtype);
  values.view({row_count, nq}).copy_(selected.narrow(1, 0, nq));
  if (interpolates) {
    const Tensor weights = *interpolation == Interpolation::kMidpoint ? at::full_like(ranks, 0.5, self.options())
                                                                      : ranks.sub(ranks_below).to(dtype);
    values.lerp_(selected.narrow(1, nq, nq).view(values.sizes()), weights.view(values.sizes()));
  }
  if (fault_injected(Kernel::kQuantile)) values.view(-1)[0].fill_(7);  // test-only (kwker::inject_fault)
  if (q.dim() == 0) return values.squeeze(-1);
  return values.unsqueeze(0).transpose(0, -1).squeeze(-1);
}

// torch's composite (autograd, errors, and everything Kwker leaves to torch).
template <bool kIgnoreNan, typename Q>
Tensor composite(const Tensor& self, Q q, std::optional<int64_t> dim, bool keepdim, c10::string_view i) {
  if constexpr (kIgnoreNan) return at::compositeimplicitautograd::nanquantile(self, q, dim, keepdim, i);
  return at::compositeimplicitautograd::quantile(self, q, dim, keepdim, i);
}

template <bool kIgnoreNan, typename Q>
Tensor& composite_out(const Tensor& self, Q q, std::optional<int64_t> dim, bool keepdim, c10::string_view i,
                      Tensor& out) {
  if constexpr (kIgnoreNan) return at::compositeimplicitautograd::nanquantile_outf(self, q, dim, keepdim, i, out);
  return at::compositeimplicitautograd::quantile_outf(self, q, dim, keepdim, i, out);
}

// q as a tensor: a float q as torch makes it one (after its own range check, which a bad q leaves to
// torch).
std::optional<Tensor> as_q_tensor(const Tensor& self, const Tensor& q) { return q; }
std::optional<Tensor> as_q_tensor(const Tensor& self, double q) {
  if (!(q >= 0 && q <= 1)) return std::nullopt;
  return at::scalar_tensor(q, self.options());
}

template <bool kIgnoreNan, typename Q>
Tensor quantile_functional(const Tensor& self, Q q, std::optional<int64_t> dim, bool keepdim,
                           c10::string_view interpolation) {
  CallRecord call(Kernel::kQuantile);
  Fallback why = Fallback::kArguments;
  if (const auto q_tensor = as_q_tensor(self, q)) {
    if (auto result = quantile_on_kwker(self, *q_tensor, dim, keepdim, interpolation, kIgnoreNan, &why)) {
      call.served();
      return *result;
    }
  }
  call.fell_back(why);
  return composite<kIgnoreNan>(self, q, dim, keepdim, interpolation);
}

// out=: torch checks out's dtype and device, resizes it (with its warning) and copies the result in.
bool out_usable(const Tensor& self, const Tensor& out) {
  return plain_strided(out) && out.scalar_type() == self.scalar_type() && !needs_autograd(out) && distinct(out, self);
}

template <bool kIgnoreNan, typename Q>
Tensor& quantile_out(const Tensor& self, Q q, std::optional<int64_t> dim, bool keepdim,
                     c10::string_view interpolation, Tensor& out) {
  CallRecord call(Kernel::kQuantile);
  Fallback why = Fallback::kArguments;
  const auto q_tensor = as_q_tensor(self, q);
  if (q_tensor && !out_usable(self, out)) why = Fallback::kOutTensors;
  if (q_tensor && out_usable(self, out)) {
    if (auto result = quantile_on_kwker(self, *q_tensor, dim, keepdim, interpolation, kIgnoreNan, &why)) {
      at::native::resize_output(out, result->sizes());
      out.copy_(*result);
      call.served();
      return out;
    }
  }
  call.fell_back(why);
  return composite_out<kIgnoreNan>(self, q, dim, keepdim, interpolation, out);
}

using TensorQ = const Tensor&;

static_assert(std::is_same_v<decltype(quantile_functional<false, TensorQ>), at::_ops::quantile::schema>);
static_assert(std::is_same_v<decltype(quantile_functional<false, double>), at::_ops::quantile_scalar::schema>);
static_assert(std::is_same_v<decltype(quantile_out<false, TensorQ>), at::_ops::quantile_out::schema>);
static_assert(std::is_same_v<decltype(quantile_out<false, double>), at::_ops::quantile_scalar_out::schema>);
static_assert(std::is_same_v<decltype(quantile_functional<true, TensorQ>), at::_ops::nanquantile::schema>);
static_assert(std::is_same_v<decltype(quantile_functional<true, double>), at::_ops::nanquantile_scalar::schema>);
static_assert(std::is_same_v<decltype(quantile_out<true, TensorQ>), at::_ops::nanquantile_out::schema>);
static_assert(std::is_same_v<decltype(quantile_out<true, double>), at::_ops::nanquantile_scalar_out::schema>);

}  // namespace

// Called with the CPU library and with the AutogradCPU one: the same kernels at both keys.
void register_quantile_kernels(torch::Library& library) {
  library.impl("quantile", TORCH_FN((quantile_functional<false, TensorQ>)));
  library.impl("quantile.scalar", TORCH_FN((quantile_functional<false, double>)));
  library.impl("quantile.out", TORCH_FN((quantile_out<false, TensorQ>)));
  library.impl("quantile.scalar_out", TORCH_FN((quantile_out<false, double>)));
  library.impl("nanquantile", TORCH_FN((quantile_functional<true, TensorQ>)));
  library.impl("nanquantile.scalar", TORCH_FN((quantile_functional<true, double>)));
  library.impl("nanquantile.out", TORCH_FN((quantile_out<true, TensorQ>)));
  library.impl("nanquantile.scalar_out", TORCH_FN((quantile_out<true, double>)));
}

}  // namespace kwker::adapter
