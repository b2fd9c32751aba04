// What optim.cc hands each ISA variant (optim_<isa>.cc): one tensor's element scalars, already
// rounded to the element type where torch rounds them, and the flat arrays of one chunk.
#pragma once

#include <cstdint>

#include "kwker/optim.h"

namespace kwker::optim_detail {

template <typename T>
struct AdamScalars {
  bool maximize;
  bool l2_weight_decay;         // Adam: grad + weight_decay * param
  bool decoupled_weight_decay;  // AdamW: param * (1 - lr * weight_decay), before the update
  T weight_decay;
  T decay;
  T lerp_weight;                // 1 - beta1
  bool lerp_weight_small;       // |lerp_weight| < 0.5 picks torch's lerp formula
  T beta2;
  T one_minus_beta2;
  T bias_correction2_sqrt;
  T eps;
  T neg_step_size;              // -lr / (1 - beta1^step)
  VectorSqrt<T> sqrt_call;      // torch's sqrt function (MKL's), or null: the correctly rounded instruction
  std::optional<MklSqrtPath> mkl_sqrt_path;  // float: sqrt_call is MKL's and takes this path here
};

template <typename T>
struct SgdScalars {
  bool maximize;
  bool has_weight_decay;
  T weight_decay;
  bool has_momentum;
  T momentum;
  T one_minus_dampening;
  bool nesterov;
  T neg_lr;
};

struct OptimKernels {
  void (*adam_f32)(const AdamScalars<float>&, float* param, const float* grad, float* exp_avg,
                   float* exp_avg_sq, int64_t n);
  void (*adam_f64)(const AdamScalars<double>&, double* param, const double* grad, double* exp_avg,
                   double* exp_avg_sq, int64_t n);
  void (*sgd_f32)(const SgdScalars<float>&, float* param, const float* grad, float* buffer,
                  bool first_step, int64_t n);
  void (*sgd_f64)(const SgdScalars<double>&, double* param, const double* grad, double* buffer,
                  bool first_step, int64_t n);
  bool (*mkl_sqrt_f32)(MklSqrtPath path, int64_t n, const float* in, float* out);
};

namespace scalar { extern const OptimKernels kKernels; }
namespace avx2 { extern const OptimKernels kKernels; }
namespace avx512 { extern const OptimKernels kKernels; }

}  // namespace kwker::optim_detail
