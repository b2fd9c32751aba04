// kwker::adam_step and kwker::sgd_step: what the patched single-tensor functions of torch.optim call
// (python/kwker/optim.py). Each takes the lists torch's function was given, steps the parameters it
// covers in one pass (kwker/optim.h) and returns the positions of the others, which torch's own
// function then steps.
//
// Covered: dense (non-overlapping) float32/float64 CPU tensors whose gradient and state have the
// parameter's sizes and strides, no memory shared between what is written and anything else, CPU
// float32/float64 step counters. torch's kernels must be the FMA-contracting GCC build at the AVX2 or
// AVX-512 capability (the arithmetic steps-inl.h reproduces), and the thread's MXCSR must be the
// default (no flush-to-zero, no denormals-are-zero, round to nearest).
#include <ATen/Context.h>
#include <ATen/Version.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernel_state.h"
#include "kwker/cpu.h"
#include "kwker/optim.h"
#include "torch_facts.h"

// MKL's vector square roots, exported by libtorch_cpu where torch is built with MKL (weak: absent
// otherwise). MKL_INT is 32-bit: torch uses MKL's LP64 interface.
extern "C" {
__attribute__((weak)) void vmsSqrt(int n, const float* in, float* out, long long mode);
__attribute__((weak)) void vmdSqrt(int n, const double* in, double* out, long long mode);
__attribute__((weak)) int MKL_Set_Num_Threads_Local(int n);
}

namespace kwker::adapter {
namespace {

using at::Tensor;
using at::TensorList;

// The mode torch's vml.h passes: VML_HA | VML_FTZDAZ_OFF | VML_ERRMODE_IGNORE.
constexpr long long kTorchVmlMode = 0x2 | 0x140000 | 0x100;

// Called on torch's worker threads, inside at::parallel_for: MKL must not open a parallel region of
// its own there (nested, it costs microseconds a call).
void mkl_sqrt_f32(int64_t n, const float* in, float* out) {
  const int previous = MKL_Set_Num_Threads_Local(1);
  vmsSqrt(static_cast<int>(n), in, out, kTorchVmlMode);
  MKL_Set_Num_Threads_Local(previous);
}

void mkl_sqrt_f64(int64_t n, const double* in, double* out) {
  const int previous = MKL_Set_Num_Threads_Local(1);
  vmdSqrt(static_cast<int>(n), in, out, kTorchVmlMode);
  MKL_Set_Num_Threads_Local(previous);
}

// Which of MKL's float sqrt paths MKL takes here, among those the active ISA has a copy of: the one
// whose copy gives MKL's bits on about a million bit patterns spread over all floats (every exponent,
// both signs, subnormals, zeros, infinities, NaNs), checked once per ISA; none where no copy does.
std::optional<kwker::MklSqrtPath> mkl_sqrt_path_here() {
  // Per kwker::Isa: -2 unknown, -1 none, else the path.
  static std::array<std::atomic<int>, static_cast<size_t>(kwker::Isa::kAvx512) + 1> verdicts{-2, -2, -2};
  std::atomic<int>& verdict = verdicts[static_cast<size_t>(kwker::active_isa())];
  const auto answer = [](int v) {
    return v < 0 ? std::nullopt : std::optional(static_cast<kwker::MklSqrtPath>(v));
  };
  if (const int v = verdict.load(); v >= -1) return answer(v);
  std::vector<float> in;
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 4093) {
    const auto b = static_cast<uint32_t>(bits);
    float x;
    std::memcpy(&x, &b, sizeof x);
    in.push_back(x);
  }
  for (float x : {0.0f, -0.0f, INFINITY, -INFINITY, 0x1p-78f, 0x1p-79f, 0x1p-149f, 0x1p-126f}) in.push_back(x);
  const auto n = static_cast<int64_t>(in.size());
  std::vector<float> theirs(in.size()), ours(in.size());
  mkl_sqrt_f32(n, in.data(), theirs.data());
  int found = -1;
  for (const auto path : kwker::kMklSqrtPaths) {
    if (kwker::mkl_sqrt_f32(path, n, in.data(), ours.data()) &&
        std::memcmp(theirs.data(), ours.data(), in.size() * sizeof(float)) == 0) {
      found = static_cast<int>(path);
      break;
    }
  }
  verdict.store(found);
  return answer(found);
}

// How torch's sqrt kernel computes: with MKL's vector sqrt when torch has MKL (then Kwker needs it
// too: false when it cannot be found), else the correctly rounded instruction (null functions).
bool torch_sqrt(TorchSqrt* sqrt) {
  *sqrt = {};
  if (!at::hasMKL()) return true;
  if (vmsSqrt == nullptr || vmdSqrt == nullptr || MKL_Set_Num_Threads_Local == nullptr) return false;
  sqrt->f32 = &mkl_sqrt_f32;
  sqrt->f64 = &mkl_sqrt_f64;
  sqrt->f32_path = mkl_sqrt_path_here();
  return true;
}

// A tensor whose memory Kwker may read (and, unless read-only, write) as a flat array of `dtype`.
bool plain(const Tensor& t, c10::ScalarType dtype, bool written) {
  return t.defined() && t.layout() == at::kStrided && t.device().is_cpu() && t.scalar_type() == dtype &&
         !t.is_neg() && !t.is_conj() && !t._is_zerotensor() && !(written && t.is_inference());
}

bool same_layout(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.strides() == b.strides();
}

bool plain_step(const Tensor& step) {
  return step.defined() && step.layout() == at::kStrided && step.device().is_cpu() && step.dim() == 0 &&
         (step.scalar_type() == at::kFloat || step.scalar_type() == at::kDouble) &&
         !step.requires_grad() && !step.is_inference() && !step.is_neg();
}

// step_t += 1 as torch does it (in the counter's own type); returns the new count as .item() reads it.
double increment_step(const Tensor& step) {
  if (step.scalar_type() == at::kFloat) {
    float* p = static_cast<float*>(step.data_ptr());
    *p = *p + 1.0f;
    return *p;
  }
  double* p = static_cast<double*>(step.data_ptr());
  *p = *p + 1.0;
  return *p;
}

struct Extent {
  uintptr_t begin, end;
};

Extent extent(const Tensor& t) {
  const auto begin = reinterpret_cast<uintptr_t>(t.data_ptr());
  return {begin, begin + static_cast<uintptr_t>(t.numel()) * t.element_size()};
}

// Whether any written extent overlaps another written one or a read-only one (gradients may share
// memory among themselves: they are only read).
bool any_overlap(std::vector<Extent> written, const std::vector<Extent>& read_only) {
  std::erase_if(written, [](const Extent& e) { return e.begin == e.end; });
  std::sort(written.begin(), written.end(), [](const Extent& a, const Extent& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < written.size(); ++i) {
    if (written[i].begin < written[i - 1].end) return true;
  }
  for (const Extent& r : read_only) {
    if (r.begin == r.end) continue;
    // The first written extent ending after r begins is the only one that can overlap it.
    auto it = std::upper_bound(written.begin(), written.end(), r.begin,
                               [](uintptr_t x, const Extent& e) { return x < e.end; });
    if (it != written.end() && it->begin < r.end) return true;
  }
  return false;
}

// The positions left to torch, and the counters of every decision.
class Decisions {
 public:
  Decisions(Kernel kernel, size_t n) : kernel_(kernel), n_(n) {}
  std::vector<int64_t> all_to_torch(Fallback why) {
    std::vector<int64_t> all(n_);
    std::iota(all.begin(), all.end(), 0);
    for (size_t i = 0; i < n_; ++i) CallRecord(kernel_).fell_back(why);
    return all;
  }
  void to_torch(size_t i, Fallback why) {
    CallRecord(kernel_).fell_back(why);
    left_.push_back(static_cast<int64_t>(i));
  }
  void served() { CallRecord(kernel_).served(); }
  std::vector<int64_t> left() { return std::move(left_); }

 private:
  Kernel kernel_;
  size_t n_;
  std::vector<int64_t> left_;
};

// Why the whole call goes to torch, if it does.
std::optional<Fallback> call_fallback(Kernel kernel) {
  if (!kernel_active(kernel)) return Fallback::kDisabled;
  if (!torch_kernels_fuse_multiply_add()) return Fallback::kTorchCapability;
  if (!float_mode_is_default()) return Fallback::kFloatMode;
  return std::nullopt;
}

// Test-only (kwker::inject_fault): a wrong last bit in the first element stepped.
void inject_fault_if_asked(Kernel kernel, TensorList params, const std::vector<size_t>& covered) {
  if (!fault_injected(kernel)) return;
  for (size_t i : covered) {
    if (params[i].numel() == 0) continue;
    uint8_t* first = static_cast<uint8_t*>(params[i].data_ptr());
    first[0] ^= 1;  // little-endian: the lowest mantissa bit
    return;
  }
}

void bump_versions(std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors) t->unsafeGetTensorImpl()->bump_version();
}

std::vector<int64_t> adam_step(TensorList params, TensorList grads, TensorList exp_avgs,
                               TensorList exp_avg_sqs, TensorList steps, double lr, double beta1,
                               double beta2, double weight_decay, double eps, bool maximize,
                               bool decoupled_weight_decay) {
  const size_t n = params.size();
  Decisions decisions(Kernel::kAdam, n);
  if (grads.size() != n || exp_avgs.size() != n || exp_avg_sqs.size() != n || steps.size() != n ||
      !(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1)) {
    return decisions.all_to_torch(Fallback::kArguments);
  }
  if (auto why = call_fallback(Kernel::kAdam)) return decisions.all_to_torch(*why);

  std::vector<size_t> covered;
  std::vector<Extent> written, read_only;
  for (size_t i = 0; i < n; ++i) {
    const Tensor& p = params[i];
    const c10::ScalarType dtype = p.scalar_type();
    if (dtype != at::kFloat && dtype != at::kDouble) {
      decisions.to_torch(i, Fallback::kDtype);
      continue;
    }
    const bool layout_ok = plain(p, dtype, true) && p.is_non_overlapping_and_dense() &&
                           plain(grads[i], dtype, false) && same_layout(grads[i], p) &&
                           plain(exp_avgs[i], dtype, true) && same_layout(exp_avgs[i], p) &&
                           plain(exp_avg_sqs[i], dtype, true) && same_layout(exp_avg_sqs[i], p) &&
                           plain_step(steps[i]);
    if (!layout_ok) {
      decisions.to_torch(i, Fallback::kLayout);
      continue;
    }
    covered.push_back(i);
    written.insert(written.end(), {extent(p), extent(exp_avgs[i]), extent(exp_avg_sqs[i]), extent(steps[i])});
    read_only.push_back(extent(grads[i]));
  }
  if (any_overlap(std::move(written), read_only)) return decisions.all_to_torch(Fallback::kLayout);

  AdamHyper hyper{lr, beta1, beta2, weight_decay, eps, maximize, decoupled_weight_decay, {}};
  if (!torch_sqrt(&hyper.sqrt)) return decisions.all_to_torch(Fallback::kTorchCapability);
  std::vector<AdamTensor<float>> floats;
  std::vector<AdamTensor<double>> doubles;
  for (size_t i : covered) {
    const double step = increment_step(steps[i]);
    const Tensor& p = params[i];
    if (p.scalar_type() == at::kFloat) {
      floats.push_back({p.data_ptr<float>(), grads[i].const_data_ptr<float>(), exp_avgs[i].data_ptr<float>(),
                        exp_avg_sqs[i].data_ptr<float>(), p.numel(), step});
    } else {
      doubles.push_back({p.data_ptr<double>(), grads[i].const_data_ptr<double>(),
                         exp_avgs[i].data_ptr<double>(), exp_avg_sqs[i].data_ptr<double>(), p.numel(), step});
    }
    bump_versions({&p, &exp_avgs[i], &exp_avg_sqs[i], &steps[i]});
    decisions.served();
  }
  kwker::adam_step(hyper, floats);
  kwker::adam_step(hyper, doubles);
  inject_fault_if_asked(Kernel::kAdam, params, covered);
  return decisions.left();
}

std::vector<int64_t> sgd_step(TensorList params, TensorList grads, TensorList momentum_buffers,
                              c10::List<bool> first_step, double lr, double momentum, double dampening,
                              double weight_decay, bool nesterov, bool maximize) {
  const size_t n = params.size();
  Decisions decisions(Kernel::kSgd, n);
  const bool has_momentum = momentum != 0;
  if (grads.size() != n || (has_momentum && (momentum_buffers.size() != n || first_step.size() != n))) {
    return decisions.all_to_torch(Fallback::kArguments);
  }
  if (auto why = call_fallback(Kernel::kSgd)) return decisions.all_to_torch(*why);

  std::vector<size_t> covered;
  std::vector<Extent> written, read_only;
  for (size_t i = 0; i < n; ++i) {
    const Tensor& p = params[i];
    const c10::ScalarType dtype = p.scalar_type();
    if (dtype != at::kFloat && dtype != at::kDouble) {
      decisions.to_torch(i, Fallback::kDtype);
      continue;
    }
    bool layout_ok = plain(p, dtype, true) && p.is_non_overlapping_and_dense() &&
                     plain(grads[i], dtype, false) && same_layout(grads[i], p);
    if (has_momentum) {
      layout_ok = layout_ok && plain(momentum_buffers[i], dtype, true) && same_layout(momentum_buffers[i], p);
    }
    if (!layout_ok) {
      decisions.to_torch(i, Fallback::kLayout);
      continue;
    }
    covered.push_back(i);
    written.push_back(extent(p));
    if (has_momentum) written.push_back(extent(momentum_buffers[i]));
    read_only.push_back(extent(grads[i]));
  }
  if (any_overlap(std::move(written), read_only)) return decisions.all_to_torch(Fallback::kLayout);

  const SgdHyper hyper{lr, momentum, dampening, weight_decay, nesterov, maximize};
  std::vector<SgdTensor<float>> floats;
  std::vector<SgdTensor<double>> doubles;
  for (size_t i : covered) {
    const Tensor& p = params[i];
    const bool first = has_momentum && first_step.get(i);
    if (p.scalar_type() == at::kFloat) {
      floats.push_back({p.data_ptr<float>(), grads[i].const_data_ptr<float>(),
                        has_momentum ? momentum_buffers[i].data_ptr<float>() : nullptr, p.numel(), first});
    } else {
      doubles.push_back({p.data_ptr<double>(), grads[i].const_data_ptr<double>(),
                         has_momentum ? momentum_buffers[i].data_ptr<double>() : nullptr, p.numel(), first});
    }
    bump_versions({&p});
    if (has_momentum) bump_versions({&momentum_buffers[i]});
    decisions.served();
  }
  kwker::sgd_step(hyper, floats);
  kwker::sgd_step(hyper, doubles);
  inject_fault_if_asked(Kernel::kSgd, params, covered);
  return decisions.left();
}

std::optional<kwker::MklSqrtPath> mkl_sqrt_path_named(std::string_view name) {
  for (const auto path : kwker::kMklSqrtPaths) {
    if (name == kwker::mkl_sqrt_path_name(path)) return path;
  }
  return std::nullopt;
}

// Test-only: Kwker's in-register copy of MKL's float32 sqrt path ("avx512" or "sse") on a contiguous
// float32 tensor; raises where the active ISA has none (the tests compare it with torch.sqrt on every
// float).
Tensor mkl_sqrt_copy(const Tensor& x, c10::string_view path_name) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.is_contiguous() && x.device().is_cpu(),
              "kwker::mkl_sqrt_f32 takes a contiguous float32 CPU tensor");
  const auto path = mkl_sqrt_path_named(std::string_view(path_name.data(), path_name.size()));
  TORCH_CHECK(path.has_value(), "kwker::mkl_sqrt_f32: the path is \"avx512\" or \"sse\"");
  Tensor out = at::empty_like(x);
  TORCH_CHECK(kwker::mkl_sqrt_f32(*path, x.numel(), x.const_data_ptr<float>(), out.data_ptr<float>()),
              "kwker::mkl_sqrt_f32: the active ISA has no copy of MKL's ", path_name,
              " path (AVX-512 has both, AVX2 sse only)");
  return out;
}

// Test-only: the path of MKL's sqrt whose copy the optimizer steps use on this machine (the check
// above accepted it), or None.
std::optional<std::string> mkl_sqrt_copy_in_use() {
  TorchSqrt sqrt;
  if (!torch_sqrt(&sqrt) || sqrt.f32 == nullptr || !sqrt.f32_path) return std::nullopt;
  return std::string(kwker::mkl_sqrt_path_name(*sqrt.f32_path));
}

}  // namespace
}  // namespace kwker::adapter

TORCH_LIBRARY_FRAGMENT(kwker, m) {
  m.def("mkl_sqrt_f32(Tensor x, str path) -> Tensor", &kwker::adapter::mkl_sqrt_copy);
  m.def("mkl_sqrt_copy_in_use() -> str?", &kwker::adapter::mkl_sqrt_copy_in_use);
  using namespace kwker::adapter;
  m.def("adam_step(Tensor(a!)[] params, Tensor[] grads, Tensor(b!)[] exp_avgs, Tensor(c!)[] exp_avg_sqs, "
        "Tensor(d!)[] state_steps, float lr, float beta1, float beta2, float weight_decay, float eps, "
        "bool maximize, bool decoupled_weight_decay) -> int[]",
        &adam_step);
  m.def("sgd_step(Tensor(a!)[] params, Tensor[] grads, Tensor(b!)[] momentum_buffers, bool[] first_step, "
        "float lr, float momentum, float dampening, float weight_decay, bool nesterov, bool maximize) "
        "-> int[]",
        &sgd_step);
}
