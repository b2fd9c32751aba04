// kwker::adam_step / sgd_step against a reference written line by line from torch/optim/adam.py and
// sgd.py (each line one rounding, FMAs where torch's GCC-built kernels contract, Python doubles for
// the scalars), on every ISA: lengths around every vector width and tail and the 16384-element
// chunks, several tensors of different step counts in one call, every option. The square root is
// the correctly rounded one here (no MKL in the core tests), plus a call path checked with a
// stand-in function; Kwker's copy of MKL's AVX-512 sqrt is checked against MKL in the pytest suite.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kwker/cpu.h"
#include "kwker/optim.h"
#include "sort_test_util.h"

namespace kwker_test {
namespace {

using kwker::AdamHyper;
using kwker::AdamTensor;
using kwker::SgdHyper;
using kwker::SgdTensor;

constexpr int64_t kLengths[] = {0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 100, 4095, 4097, 16383, 16385, 40000};

template <typename T>
std::vector<T> random_values(int64_t n, std::mt19937_64& rng, double scale) {
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<T> v(static_cast<size_t>(n));
  for (T& x : v) x = static_cast<T>(normal(rng));
  for (int64_t i = 0; i < n; i += 7) v[static_cast<size_t>(i)] = T(0);  // zero gradients, v stays 0
  return v;
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// ---- references -----------------------------------------------------------------------------------

template <typename T>
T lerp(T self, T end, T weight) {  // torch's Lerp.h, contracted as GCC builds it
  return std::abs(weight) < T(0.5) ? std::fma(weight, end - self, self)
                                   : std::fma(-(end - self), T(1) - weight, end);
}

template <typename T, typename Sqrt>
void reference_adam(const AdamHyper& h, double step, std::vector<T>& p, const std::vector<T>& grad,
                    std::vector<T>& m, std::vector<T>& v, Sqrt sqrt) {
  const double bias_correction1 = 1 - std::pow(h.beta1, step);
  const double bias_correction2 = 1 - std::pow(h.beta2, step);
  const double step_size = h.lr / bias_correction1;
  const double bias_correction2_sqrt = std::pow(bias_correction2, 0.5);
  for (size_t i = 0; i < p.size(); ++i) {
    T g = h.maximize ? -grad[i] : grad[i];
    if (h.weight_decay != 0) {
      if (h.decoupled_weight_decay) {
        p[i] = p[i] * static_cast<T>(1 - h.lr * h.weight_decay);
      } else {
        g = std::fma(p[i], static_cast<T>(h.weight_decay), g);
      }
    }
    m[i] = lerp(m[i], g, static_cast<T>(1 - h.beta1));
    v[i] = v[i] * static_cast<T>(h.beta2);
    v[i] = std::fma(static_cast<T>(1 - h.beta2) * g, g, v[i]);
    T denom = sqrt(v[i]) / static_cast<T>(bias_correction2_sqrt);
    denom = denom + static_cast<T>(h.eps);
    p[i] = p[i] + (static_cast<T>(-step_size) * m[i]) / denom;
  }
}

template <typename T>
void reference_sgd(const SgdHyper& h, bool first_step, std::vector<T>& p, const std::vector<T>& grad,
                   std::vector<T>& buffer) {
  for (size_t i = 0; i < p.size(); ++i) {
    T g = h.maximize ? -grad[i] : grad[i];
    if (h.weight_decay != 0) g = std::fma(p[i], static_cast<T>(h.weight_decay), g);
    if (h.momentum != 0) {
      buffer[i] = first_step ? g
                             : std::fma(g, static_cast<T>(1 - h.dampening), buffer[i] * static_cast<T>(h.momentum));
      g = h.nesterov ? std::fma(buffer[i], static_cast<T>(h.momentum), g) : buffer[i];
    }
    p[i] = std::fma(g, static_cast<T>(-h.lr), p[i]);
  }
}

// ---- Adam -----------------------------------------------------------------------------------------

// Which ISAs have a copy of which of MKL's float sqrt paths.
bool has_copy(kwker::Isa isa, kwker::MklSqrtPath path) {
  return path == kwker::MklSqrtPath::kSse ? isa != kwker::Isa::kScalar : isa == kwker::Isa::kAvx512;
}

const AdamHyper kAdamConfigs[] = {
    {1e-3, 0.9, 0.999, 0.0, 1e-8, false, false, {}},
    {1e-2, 0.8, 0.99, 0.1, 1e-8, true, false, {}},     // L2 weight decay, maximize
    {1e-3, 0.9, 0.999, 0.01, 1e-8, false, true, {}},   // AdamW
    {0.1, 0.3, 0.5, 0.5, 1e-3, false, true, {}},       // 1 - beta1 >= 0.5: lerp's other formula
};

// Steps every length as one tensor of one call, `steps` times, against the reference.
template <typename T, typename Sqrt>
void check_adam(const AdamHyper& hyper, int steps, Sqrt reference_sqrt) {
  std::mt19937_64 rng(42);
  struct State {
    std::vector<T> p, m, v;
  };
  std::vector<State> ours, theirs;
  for (int64_t n : kLengths) {
    State s{random_values<T>(n, rng, 1.0), std::vector<T>(n), std::vector<T>(n)};
    ours.push_back(s);
    theirs.push_back(s);
  }
  for (int step = 1; step <= steps; ++step) {
    std::vector<std::vector<T>> grads;
    std::vector<AdamTensor<T>> tensors;
    for (size_t t = 0; t < ours.size(); ++t) {
      grads.push_back(random_values<T>(kLengths[t], rng, std::pow(10.0, step % 4 - 2)));
    }
    for (size_t t = 0; t < ours.size(); ++t) {
      // Tensor t has taken t % 3 extra steps: one call mixes step counts.
      const double count = step + static_cast<double>(t % 3);
      tensors.push_back({ours[t].p.data(), grads[t].data(), ours[t].m.data(), ours[t].v.data(),
                         kLengths[t], count});
      reference_adam(hyper, count, theirs[t].p, grads[t], theirs[t].m, theirs[t].v, reference_sqrt);
    }
    kwker::adam_step(hyper, std::span<const AdamTensor<T>>(tensors));
    for (size_t t = 0; t < ours.size(); ++t) {
      SCOPED_TRACE("length " + std::to_string(kLengths[t]) + ", step " + std::to_string(step));
      ASSERT_TRUE(same_bits(ours[t].m, theirs[t].m));
      ASSERT_TRUE(same_bits(ours[t].v, theirs[t].v));
      ASSERT_TRUE(same_bits(ours[t].p, theirs[t].p));
    }
  }
}

template <typename T>
T correctly_rounded_sqrt(T x) { return std::sqrt(x); }

TEST(AdamStep, MatchesTorchArithmeticOnEveryIsa) {
  for_each_isa([](kwker::Isa) {
    for (const AdamHyper& hyper : kAdamConfigs) {
      SCOPED_TRACE("lr " + std::to_string(hyper.lr) + " beta1 " + std::to_string(hyper.beta1));
      check_adam<float>(hyper, 6, &correctly_rounded_sqrt<float>);
      check_adam<double>(hyper, 6, &correctly_rounded_sqrt<double>);
    }
  });
}

// A stand-in for MKL's sqrt, one ulp off the correctly rounded one: shows the step uses the function
// it is given (the call path, in 4096-element blocks), on every element.
void sqrt_one_ulp_up_f32(int64_t n, const float* in, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::nextafter(std::sqrt(in[i]), INFINITY);
}
void sqrt_one_ulp_up_f64(int64_t n, const double* in, double* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::nextafter(std::sqrt(in[i]), INFINITY);
}

TEST(AdamStep, UsesTheSquareRootItIsGiven) {
  for_each_isa([](kwker::Isa) {
    AdamHyper hyper = kAdamConfigs[2];
    hyper.sqrt = {&sqrt_one_ulp_up_f32, &sqrt_one_ulp_up_f64, std::nullopt};
    check_adam<float>(hyper, 3, [](float x) { return std::nextafter(std::sqrt(x), INFINITY); });
    check_adam<double>(hyper, 3, [](double x) { return std::nextafter(std::sqrt(x), INFINITY); });
  });
}

// Told that torch's float sqrt takes one of MKL's paths, the step computes Kwker's copy of that path
// in registers (the sqrt function it is given, here a deliberately wrong one, goes unused), on every
// element, tails included; on an ISA without the copy it calls the function instead.
TEST(AdamStep, ComputesTheMklPathItIsToldInRegisters) {
  for (const auto path : kwker::kMklSqrtPaths) {
    SCOPED_TRACE(std::string(kwker::mkl_sqrt_path_name(path)) + " path");
    for_each_isa([path](kwker::Isa isa) {
      AdamHyper hyper = kAdamConfigs[2];
      hyper.sqrt = {&sqrt_one_ulp_up_f32, &sqrt_one_ulp_up_f64, path};
      if (has_copy(isa, path)) {
        check_adam<float>(hyper, 3, [path](float x) {
          float root;
          EXPECT_TRUE(kwker::mkl_sqrt_f32(path, 1, &x, &root));
          return root;
        });
      } else {
        check_adam<float>(hyper, 3, [](float x) { return std::nextafter(std::sqrt(x), INFINITY); });
      }
    });
  }
}

// ---- SGD ------------------------------------------------------------------------------------------

const SgdHyper kSgdConfigs[] = {
    {0.1, 0.0, 0.0, 0.0, false, false},
    {0.1, 0.9, 0.0, 1e-4, false, false},
    {0.05, 0.9, 0.0, 0.01, true, true},  // nesterov, maximize
    {0.05, 0.5, 0.3, 0.0, false, false},  // dampening
};

template <typename T>
void check_sgd(const SgdHyper& hyper) {
  std::mt19937_64 rng(7);
  std::vector<std::vector<T>> p_ours, p_theirs, b_ours, b_theirs;
  for (int64_t n : kLengths) {
    p_ours.push_back(random_values<T>(n, rng, 1.0));
    p_theirs.push_back(p_ours.back());
    b_ours.emplace_back(n, T(-1));  // garbage: the first step must overwrite it
    b_theirs.emplace_back(n, T(-1));
  }
  for (int step = 0; step < 4; ++step) {
    std::vector<std::vector<T>> grads;
    std::vector<SgdTensor<T>> tensors;
    for (int64_t n : kLengths) grads.push_back(random_values<T>(n, rng, 1.0));
    for (size_t t = 0; t < p_ours.size(); ++t) {
      tensors.push_back({p_ours[t].data(), grads[t].data(), b_ours[t].data(), kLengths[t], step == 0});
      reference_sgd(hyper, step == 0, p_theirs[t], grads[t], b_theirs[t]);
    }
    kwker::sgd_step(hyper, std::span<const SgdTensor<T>>(tensors));
    for (size_t t = 0; t < p_ours.size(); ++t) {
      SCOPED_TRACE("length " + std::to_string(kLengths[t]) + ", step " + std::to_string(step));
      ASSERT_TRUE(same_bits(p_ours[t], p_theirs[t]));
      ASSERT_TRUE(same_bits(b_ours[t], b_theirs[t]));
    }
  }
}

TEST(SgdStep, MatchesTorchArithmeticOnEveryIsa) {
  for_each_isa([](kwker::Isa) {
    for (const SgdHyper& hyper : kSgdConfigs) {
      SCOPED_TRACE("momentum " + std::to_string(hyper.momentum));
      check_sgd<float>(hyper);
      check_sgd<double>(hyper);
    }
  });
}

// ---- Kwker's copy of MKL's sqrt -----------------------------------------------------------------

TEST(MklSqrtCopy, Avx2HasTheSsePathAvx512HasBoth) {
  for_each_isa([](kwker::Isa isa) {
    for (const auto path : kwker::kMklSqrtPaths) {
      float in = 2.0f, out = 0.0f;
      EXPECT_EQ(kwker::mkl_sqrt_f32(path, 1, &in, &out), has_copy(isa, path));
      if (!has_copy(isa, path)) EXPECT_EQ(out, 0.0f);  // nothing written
      // Within an ulp (the SSE path starts from the CPU's own rsqrtps approximation).
      if (has_copy(isa, path)) EXPECT_NEAR(out, std::sqrt(2.0f), 2e-7f);
    }
  });
}

// A copy of MKL's sqrt: within an ulp of sqrt, and MKL's answers on special values.
void check_mkl_sqrt_copy(kwker::MklSqrtPath path) {
  std::vector<float> in;
  for (uint64_t bits = 0; bits <= 0x7f800000u; bits += 997) in.push_back(std::bit_cast<float>(static_cast<uint32_t>(bits)));
  std::vector<float> out(in.size());
  ASSERT_TRUE(kwker::mkl_sqrt_f32(path, static_cast<int64_t>(in.size()), in.data(), out.data()));
  for (size_t i = 0; i < in.size(); ++i) {
    const float exact = std::sqrt(in[i]);
    ASSERT_TRUE(out[i] == exact || out[i] == std::nextafter(exact, INFINITY) ||
                out[i] == std::nextafter(exact, 0.0f))
        << "sqrt(" << in[i] << ") = " << out[i] << ", correctly rounded " << exact;
  }
  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, -1.0f, -0x1p-149f,
                            std::bit_cast<float>(0x7f800001u), std::bit_cast<float>(0xffc01234u)};
  const uint32_t expected[] = {0x0u, 0x80000000u, 0x7f800000u, 0x7fc00000u, 0x7fc00000u, 0x7fc00000u,
                               0x7fc00001u, 0xffc01234u};
  float got[std::size(specials)];
  ASSERT_TRUE(kwker::mkl_sqrt_f32(path, std::size(specials), specials, got));
  for (size_t i = 0; i < std::size(specials); ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), expected[i]) << "input bits " << std::bit_cast<uint32_t>(specials[i]);
  }
}

// Both copies (MKL's AVX-512 path, its SSE path) are within an ulp and agree on the special values,
// on every ISA that has them.
TEST(MklSqrtCopy, WithinAnUlpAndSpecialValues) {
  for_each_isa([](kwker::Isa isa) {
    for (const auto path : kwker::kMklSqrtPaths) {
      SCOPED_TRACE(std::string(kwker::mkl_sqrt_path_name(path)) + " path");
      if (has_copy(isa, path)) check_mkl_sqrt_copy(path);
    }
  });
}

// The SSE path gives the same bits 8 and 16 lanes wide (AVX-512 runs rsqrtps on each half).
TEST(MklSqrtCopy, SsePathSameOnAvx2AndAvx512) {
  if (kwker::detected_isa() != kwker::Isa::kAvx512) GTEST_SKIP() << "needs an AVX-512 CPU";
  std::vector<float> in;
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 331) in.push_back(std::bit_cast<float>(static_cast<uint32_t>(bits)));
  const auto n = static_cast<int64_t>(in.size());
  std::vector<float> avx2(in.size()), avx512(in.size());
  for_each_isa([&](kwker::Isa isa) {
    if (isa == kwker::Isa::kScalar) return;
    ASSERT_TRUE(kwker::mkl_sqrt_f32(kwker::MklSqrtPath::kSse, n, in.data(),
                                    (isa == kwker::Isa::kAvx2 ? avx2 : avx512).data()));
  });
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(avx2[i]), std::bit_cast<uint32_t>(avx512[i]))
        << "input bits " << std::bit_cast<uint32_t>(in[i]);
  }
}

}  // namespace
}  // namespace kwker_test
