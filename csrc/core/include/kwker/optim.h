// One-pass optimizer steps that give, bit for bit, what torch.optim's default CPU path gives: the
// single-tensor Adam/AdamW and SGD of torch/optim/adam.py and sgd.py, which run one ATen pointwise
// kernel per line. Each element here goes through the same roundings those kernels make, in the same
// order (see src/optim/steps-inl.h for the arithmetic and why it matches), so the whole step is one
// read and one write of each tensor instead of eight to eleven passes.
//
// The hyper-parameters come as Python computes them (doubles); each is rounded to the element type
// where torch's kernels receive it. Tensors are flat arrays (the adapter passes only dense tensors
// whose state and gradients share the parameter's strides; element order then does not matter).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace kwker {

// out[i] = sqrt(in[i]) for i < n, computed as torch's exp_avg_sq.sqrt() computes it. torch built with
// MKL calls MKL's vector square root (vmsSqrt/vmdSqrt, high-accuracy mode: within an ulp, not always
// correctly rounded), so the adapter passes that one; null means the correctly rounded instruction.
template <typename T>
using VectorSqrt = void (*)(int64_t n, const T* in, T* out);

// The code paths of MKL's single-precision vsSqrt (high accuracy) that Kwker has in-register copies
// of: kAvx512, what MKL runs on Intel CPUs with AVX-512 (rsqrt14, one FMA correction); kSse, what it
// runs on AMD CPUs, with or without AVX-512 (the CPU's rsqrtps, two corrections, no FMA). Intel CPUs
// with AVX2 only get a path of MKL's that Kwker has no copy of.
enum class MklSqrtPath : uint8_t { kAvx512, kSse };
inline constexpr MklSqrtPath kMklSqrtPaths[] = {MklSqrtPath::kAvx512, MklSqrtPath::kSse};

// "avx512" or "sse": how the adapter's test hooks and the tests name a path.
constexpr std::string_view mkl_sqrt_path_name(MklSqrtPath path) {
  return path == MklSqrtPath::kAvx512 ? "avx512" : "sse";
}

// How torch's exp_avg_sq.sqrt() computes on this machine.
struct TorchSqrt {
  VectorSqrt<float> f32 = nullptr;
  VectorSqrt<double> f64 = nullptr;
  // f32 is MKL's vsSqrt and gives what mkl_sqrt_f32(*f32_path, ...) gives (the adapter checked): the
  // step then computes it in registers, in one pass.
  std::optional<MklSqrtPath> f32_path;
};

struct AdamHyper {
  double lr, beta1, beta2, weight_decay, eps;
  bool maximize = false;
  bool decoupled_weight_decay = false;  // AdamW
  TorchSqrt sqrt;
};

// Kwker's in-register copy of one of MKL's vsSqrt paths over an array, for checking it against MKL.
// Returns false, writing nothing, where the active ISA has no copy of that path (AVX-512 has both,
// AVX2 kSse only, scalar none).
bool mkl_sqrt_f32(MklSqrtPath path, int64_t n, const float* in, float* out);

template <typename T>
struct AdamTensor {
  T* param;
  const T* grad;
  T* exp_avg;
  T* exp_avg_sq;
  int64_t numel;
  double step;  // the step count after this step's increment, as torch reads it (step_t.item())
};

struct SgdHyper {
  double lr, momentum, dampening, weight_decay;
  bool nesterov = false;
  bool maximize = false;
};

template <typename T>
struct SgdTensor {
  T* param;
  const T* grad;
  T* momentum_buffer;  // unused when momentum == 0
  int64_t numel;
  bool first_step;     // the buffer is new: torch sets it to the gradient (a clone) instead of updating it
};

// Steps every tensor, spread over kwker::parallel_for.
void adam_step(const AdamHyper& hyper, std::span<const AdamTensor<float>> tensors);
void adam_step(const AdamHyper& hyper, std::span<const AdamTensor<double>> tensors);
void sgd_step(const SgdHyper& hyper, std::span<const SgdTensor<float>> tensors);
void sgd_step(const SgdHyper& hyper, std::span<const SgdTensor<double>> tensors);

}  // namespace kwker
