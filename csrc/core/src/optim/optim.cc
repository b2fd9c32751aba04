// adam_step / sgd_step: the scalars torch's single-tensor functions compute in Python, then every
// tensor cut into chunks spread over kwker::parallel_for, each chunk stepped by the ISA variant in use.
// Chunk boundaries do not change results: every element gets the same arithmetic (steps-inl.h).
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "kwker/cpu.h"
#include "kwker/optim.h"
#include "kwker/parallel.h"
#include "optim/optim_kernels.h"

namespace kwker {
namespace {

using optim_detail::AdamScalars;
using optim_detail::OptimKernels;
using optim_detail::SgdScalars;

constexpr int64_t kChunk = 16384;     // elements per work item
constexpr int64_t kGrainChunks = 2;   // at least 32768 elements per thread, torch's GRAIN_SIZE

const OptimKernels& kernels() {
  switch (active_isa()) {
    case Isa::kAvx512: return optim_detail::avx512::kKernels;
    case Isa::kAvx2: return optim_detail::avx2::kKernels;
    case Isa::kScalar: break;
  }
  return optim_detail::scalar::kKernels;
}

// Python's float arithmetic of _single_tensor_adam (libm pow, as Python's ** calls it), then each
// scalar rounded to T where torch passes it to a kernel.
template <typename T>
AdamScalars<T> adam_scalars(const AdamHyper& h, double step) {
  const double bias_correction1 = 1 - std::pow(h.beta1, step);
  const double bias_correction2 = 1 - std::pow(h.beta2, step);
  const double step_size = h.lr / bias_correction1;
  const double bias_correction2_sqrt = std::pow(bias_correction2, 0.5);
  const bool weight_decay = h.weight_decay != 0;
  AdamScalars<T> s{};
  s.maximize = h.maximize;
  s.l2_weight_decay = weight_decay && !h.decoupled_weight_decay;
  s.decoupled_weight_decay = weight_decay && h.decoupled_weight_decay;
  s.weight_decay = static_cast<T>(h.weight_decay);
  s.decay = static_cast<T>(1 - h.lr * h.weight_decay);
  s.lerp_weight = static_cast<T>(1 - h.beta1);
  s.lerp_weight_small = std::abs(s.lerp_weight) < T(0.5);
  s.beta2 = static_cast<T>(h.beta2);
  s.one_minus_beta2 = static_cast<T>(1 - h.beta2);
  s.bias_correction2_sqrt = static_cast<T>(bias_correction2_sqrt);
  s.eps = static_cast<T>(h.eps);
  s.neg_step_size = static_cast<T>(-step_size);
  if constexpr (std::is_same_v<T, float>) {
    s.sqrt_call = h.sqrt.f32;
    if (h.sqrt.f32 != nullptr) s.mkl_sqrt_path = h.sqrt.f32_path;
  } else {
    s.sqrt_call = h.sqrt.f64;
  }
  return s;
}

template <typename T>
SgdScalars<T> sgd_scalars(const SgdHyper& h) {
  SgdScalars<T> s{};
  s.maximize = h.maximize;
  s.has_weight_decay = h.weight_decay != 0;
  s.weight_decay = static_cast<T>(h.weight_decay);
  s.has_momentum = h.momentum != 0;
  s.momentum = static_cast<T>(h.momentum);
  s.one_minus_dampening = static_cast<T>(1 - h.dampening);
  s.nesterov = h.nesterov;
  s.neg_lr = static_cast<T>(-h.lr);
  return s;
}

struct Chunk {
  size_t tensor;
  int64_t begin, end;
};

// Calls run(tensor index, begin, end) on chunks of at most kChunk elements covering every tensor.
template <typename Tensor, typename F>
void for_each_chunk(std::span<const Tensor> tensors, const F& run) {
  std::vector<Chunk> chunks;
  for (size_t t = 0; t < tensors.size(); ++t) {
    for (int64_t b = 0; b < tensors[t].numel; b += kChunk) {
      chunks.push_back({t, b, std::min(tensors[t].numel, b + kChunk)});
    }
  }
  parallel_for(0, static_cast<int64_t>(chunks.size()), kGrainChunks, [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) run(chunks[c].tensor, chunks[c].begin, chunks[c].end);
  });
}

template <typename T>
void adam_step_impl(const AdamHyper& hyper, std::span<const AdamTensor<T>> tensors) {
  const OptimKernels& k = kernels();
  std::vector<AdamScalars<T>> scalars;
  scalars.reserve(tensors.size());
  for (const auto& t : tensors) {
    scalars.push_back(scalars.empty() || t.step != tensors[scalars.size() - 1].step
                          ? adam_scalars<T>(hyper, t.step)
                          : scalars.back());
  }
  const auto kernel = [&] {
    if constexpr (std::is_same_v<T, float>) return k.adam_f32; else return k.adam_f64;
  }();
  for_each_chunk(tensors, [&](size_t i, int64_t b, int64_t e) {
    const AdamTensor<T>& t = tensors[i];
    kernel(scalars[i], t.param + b, t.grad + b, t.exp_avg + b, t.exp_avg_sq + b, e - b);
  });
}

template <typename T>
void sgd_step_impl(const SgdHyper& hyper, std::span<const SgdTensor<T>> tensors) {
  const SgdScalars<T> scalars = sgd_scalars<T>(hyper);
  const OptimKernels& k = kernels();
  const auto kernel = [&] {
    if constexpr (std::is_same_v<T, float>) return k.sgd_f32; else return k.sgd_f64;
  }();
  for_each_chunk(tensors, [&](size_t i, int64_t b, int64_t e) {
    const SgdTensor<T>& t = tensors[i];
    T* buffer = scalars.has_momentum ? t.momentum_buffer + b : nullptr;
    kernel(scalars, t.param + b, t.grad + b, buffer, t.first_step, e - b);
  });
}

}  // namespace

bool mkl_sqrt_f32(MklSqrtPath path, int64_t n, const float* in, float* out) {
  return kernels().mkl_sqrt_f32(path, n, in, out);
}

void adam_step(const AdamHyper& h, std::span<const AdamTensor<float>> t) { adam_step_impl(h, t); }
void adam_step(const AdamHyper& h, std::span<const AdamTensor<double>> t) { adam_step_impl(h, t); }
void sgd_step(const SgdHyper& h, std::span<const SgdTensor<float>> t) { sgd_step_impl(h, t); }
void sgd_step(const SgdHyper& h, std::span<const SgdTensor<double>> t) { sgd_step_impl(h, t); }

}  // namespace kwker
