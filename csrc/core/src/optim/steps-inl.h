// The element arithmetic of torch.optim's single-tensor Adam/AdamW and SGD: one pass over each chunk
// of memory (where MKL's square root must be called, a second pass over each L2-resident block).
//
// torch runs one ATen kernel per line of adam.py / sgd.py; each rounds its result to the element
// type. On x86-64 Linux wheels those kernels are built by GCC with AVX2/AVX-512 flags, and GCC
// contracts a·b + c into one FMA in both the vector bodies and the scalar tails (cpu_kernel_vec), so
// every element gets the same arithmetic wherever the chunk and tail boundaries fall. Line by line,
// with rn() one rounding and s(x) the Python double x rounded to the element type:
//
//   grad = -grad (maximize)                       exact
//   grad.add(param, alpha=wd)                     fma(param, s(wd), grad)          (ufunc add)
//   param.mul_(1 - lr*wd)                         rn(param · s(1 - lr·wd))
//   exp_avg.lerp_(grad, 1 - beta1)                w = s(1-beta1); |w| < 0.5: fma(w, grad - m, m)
//                                                 else fma(w - 1, grad - m, grad)  (LerpKernel)
//   exp_avg_sq.mul_(beta2)                        rn(v · s(beta2))
//     .addcmul_(grad, grad, value=1-beta2)        fma(rn(s(1-beta2) · grad), grad, v)
//   denom = (v.sqrt() / bc2_sqrt).add_(eps)       rn(rn(root(v) / s(bc2_sqrt)) + s(eps))
//                                                 root: torch's sqrt kernel (MKL's, passed in)
//   param.addcdiv_(m, denom, value=-step_size)    rn(param + rn(rn(s(-step_size) · m) / denom))
//   SGD buf.mul_(momentum).add_(grad, 1-damp)     fma(grad, s(1-damp), rn(buf · s(momentum)))
//   SGD grad.add(buf, alpha=momentum)             fma(buf, s(momentum), grad)      (nesterov)
//   SGD param.add_(grad, alpha=-lr)               fma(grad, s(-lr), param)
//
// The Python-side scalars (bias corrections with libm pow, step size) are computed in optim.cc the
// way Python computes them. Included inside namespace kwker::optim_detail::<isa>.

// The last count (< kWidth) elements of the arrays, copied into whole zero-padded vectors and back, so
// that tails get the vector arithmetic: one formula for every element. Copies out the first kOut.
template <typename T, int kArrays, int kOut>
struct PartialVector {
  static constexpr int kWidth = Lanes<T>::kWidth;
  alignas(64) T lanes[kArrays][kWidth] = {};
  std::array<T*, kArrays> where;
  int64_t count;
  PartialVector(std::array<T*, kArrays> arrays, int64_t n) : where(arrays), count(n) {
    for (int a = 0; a < kArrays; ++a) std::copy_n(where[a], count, lanes[a]);
  }
  ~PartialVector() {
    for (int a = 0; a < kOut; ++a) std::copy_n(lanes[a], count, where[a]);
  }
};

template <typename L, typename T>
struct AdamMath {
  using V = typename L::V;
  // A copy: stores through the vector types may alias anything, and would make every flag a reload.
  const AdamScalars<T> s;
  V weight_decay, decay, lerp_weight, lerp_weight_minus_one, beta2, one_minus_beta2;
  V bias_correction2_sqrt, eps, neg_step_size;

  explicit AdamMath(const AdamScalars<T>& scalars)
      : s(scalars), weight_decay(L::set(s.weight_decay)), decay(L::set(s.decay)),
        lerp_weight(L::set(s.lerp_weight)), lerp_weight_minus_one(L::set(s.lerp_weight - T(1))),
        beta2(L::set(s.beta2)), one_minus_beta2(L::set(s.one_minus_beta2)),
        bias_correction2_sqrt(L::set(s.bias_correction2_sqrt)), eps(L::set(s.eps)),
        neg_step_size(L::set(s.neg_step_size)) {}

  struct Moments {
    V param, exp_avg, exp_avg_sq;
  };

  // Weight decay and both moments, which are stored; the parameter is left to updated().
  Moments moments(const T* param, const T* grad_in, T* exp_avg, T* exp_avg_sq) const {
    V p = L::load(param);
    V g = L::load(grad_in);
    if (s.maximize) g = L::neg(g);
    if (s.l2_weight_decay) g = L::fma(p, weight_decay, g);
    if (s.decoupled_weight_decay) p = L::mul(p, decay);

    V m = L::load(exp_avg);
    const V diff = L::sub(g, m);
    m = s.lerp_weight_small ? L::fma(lerp_weight, diff, m) : L::fma(lerp_weight_minus_one, diff, g);
    L::store(exp_avg, m);

    V v = L::mul(L::load(exp_avg_sq), beta2);
    v = L::fma(L::mul(one_minus_beta2, g), g, v);
    L::store(exp_avg_sq, v);
    return {p, m, v};
  }

  // root: sqrt(exp_avg_sq) as torch's sqrt kernel computes it.
  V updated(V param, V exp_avg, V root) const {
    const V denom = L::add(L::div(root, bias_correction2_sqrt), eps);
    return L::add(param, L::div(L::mul(neg_step_size, exp_avg), denom));
  }

  // The whole step of one vector, the square root computed in registers by root_of.
  template <typename Root>
  void step(T* param, const T* grad_in, T* exp_avg, T* exp_avg_sq, const Root& root_of) const {
    const Moments now = moments(param, grad_in, exp_avg, exp_avg_sq);
    L::store(param, updated(now.param, now.exp_avg, root_of(now.exp_avg_sq)));
  }
};

// One pass: the square root in registers (the instruction, or Kwker's copy of MKL's path).
template <typename T, typename Root>
void adam_one_pass(const AdamMath<Lanes<T>, T>& vec, const Root& root_of, T* param, const T* grad,
                   T* exp_avg, T* exp_avg_sq, int64_t n) {
  constexpr int64_t kWidth = Lanes<T>::kWidth;
  int64_t i = 0;
  for (; i + kWidth <= n; i += kWidth) vec.step(param + i, grad + i, exp_avg + i, exp_avg_sq + i, root_of);
  if (i < n) {
    PartialVector<T, 4, 3> tail({param + i, exp_avg + i, exp_avg_sq + i, const_cast<T*>(grad + i)}, n - i);
    vec.step(tail.lanes[0], tail.lanes[3], tail.lanes[1], tail.lanes[2], root_of);
  }
}

// Two passes per block, the square roots in between by the function torch's kernel calls (MKL's).
template <typename T>
void adam_calling_sqrt(const AdamMath<Lanes<T>, T>& vec, VectorSqrt<T> vector_sqrt, T* param,
                       const T* grad, T* exp_avg, T* exp_avg_sq, int64_t n) {
  using L = Lanes<T>;
  constexpr int64_t kWidth = L::kWidth;
  // Big enough to spread each call's fixed cost, small enough for L2 between the passes.
  constexpr int64_t kBlock = 4096;
  alignas(64) T roots[kBlock];
  const auto first_pass = [&](T* p, const T* g, T* m, T* v) {
    const auto now = vec.moments(p, g, m, v);
    L::store(p, now.param);
  };
  const auto second_pass = [&](T* p, const T* m, const T* root) {
    L::store(p, vec.updated(L::load(p), L::load(m), L::load(root)));
  };
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t len = std::min(kBlock, n - b);
    T* p = param + b;
    T* m = exp_avg + b;
    T* v = exp_avg_sq + b;
    const T* g = grad + b;
    int64_t i = 0;
    for (; i + kWidth <= len; i += kWidth) first_pass(p + i, g + i, m + i, v + i);
    if (i < len) {
      PartialVector<T, 4, 3> tail({p + i, m + i, v + i, const_cast<T*>(g + i)}, len - i);
      first_pass(tail.lanes[0], tail.lanes[3], tail.lanes[1], tail.lanes[2]);
    }
    vector_sqrt(len, v, roots);
    for (i = 0; i + kWidth <= len; i += kWidth) second_pass(p + i, m + i, roots + i);
    if (i < len) {
      PartialVector<T, 3, 1> tail({p + i, m + i, roots + i}, len - i);
      second_pass(tail.lanes[0], tail.lanes[1], tail.lanes[2]);
    }
  }
}

template <typename T>
void adam(const AdamScalars<T>& s, T* param, const T* grad, T* exp_avg, T* exp_avg_sq, int64_t n) {
  using L = Lanes<T>;
  const AdamMath<L, T> vec(s);
  const auto one_pass = [&](const auto& root_of) {
    adam_one_pass(vec, root_of, param, grad, exp_avg, exp_avg_sq, n);
  };
  if (s.mkl_sqrt_path && with_mkl_sqrt<L>(*s.mkl_sqrt_path, one_pass)) return;
  if (s.sqrt_call != nullptr) {
    adam_calling_sqrt(vec, s.sqrt_call, param, grad, exp_avg, exp_avg_sq, n);
  } else {
    one_pass([](typename L::V x) { return L::sqrt(x); });
  }
}

// Kwker's copy of MKL's float square root `path` over an array, for the adapter's check; false where
// this ISA has none.
bool mkl_sqrt_f32(MklSqrtPath path, int64_t n, const float* in, float* out) {
  using L = Lanes<float>;
  return with_mkl_sqrt<L>(path, [&](const auto& root_of) {
    int64_t i = 0;
    for (; i + L::kWidth <= n; i += L::kWidth) L::store(out + i, root_of(L::load(in + i)));
    if (i < n) {
      PartialVector<float, 2, 1> tail({out + i, const_cast<float*>(in + i)}, n - i);
      L::store(tail.lanes[0], root_of(L::load(tail.lanes[1])));
    }
  });
}

template <typename L, typename T>
struct SgdMath {
  using V = typename L::V;
  const SgdScalars<T>& s;
  V weight_decay, momentum, one_minus_dampening, neg_lr;

  explicit SgdMath(const SgdScalars<T>& scalars)
      : s(scalars), weight_decay(L::set(s.weight_decay)), momentum(L::set(s.momentum)),
        one_minus_dampening(L::set(s.one_minus_dampening)), neg_lr(L::set(s.neg_lr)) {}

  void step(T* param, const T* grad_in, T* buffer, bool first_step) const {
    V p = L::load(param);
    V g = L::load(grad_in);
    if (s.maximize) g = L::neg(g);
    if (s.has_weight_decay) g = L::fma(p, weight_decay, g);
    if (s.has_momentum) {
      const V b = first_step ? g : L::fma(g, one_minus_dampening, L::mul(L::load(buffer), momentum));
      L::store(buffer, b);
      g = s.nesterov ? L::fma(b, momentum, g) : b;
    }
    L::store(param, L::fma(g, neg_lr, p));
  }
};

template <typename T>
void sgd(const SgdScalars<T>& s, T* param, const T* grad, T* buffer, bool first_step, int64_t n) {
  const SgdMath<Lanes<T>, T> vec(s);
  constexpr int64_t kWidth = Lanes<T>::kWidth;
  int64_t i = 0;
  auto buffer_at = [buffer](int64_t i) { return buffer ? buffer + i : nullptr; };  // null: no momentum
  for (; i + kWidth <= n; i += kWidth) vec.step(param + i, grad + i, buffer_at(i), first_step);
  if (i == n) return;
  if (buffer) {
    PartialVector<T, 3, 2> tail({param + i, buffer + i, const_cast<T*>(grad + i)}, n - i);
    vec.step(tail.lanes[0], tail.lanes[2], tail.lanes[1], first_step);
  } else {
    PartialVector<T, 2, 1> tail({param + i, const_cast<T*>(grad + i)}, n - i);
    vec.step(tail.lanes[0], tail.lanes[1], nullptr, first_step);
  }
}

const OptimKernels kKernels = {&adam<float>, &adam<double>, &sgd<float>, &sgd<double>, &mkl_sqrt_f32};
