// torch_facts.h, asked of the installed torch.
#include "torch_facts.h"

#include <ATen/Context.h>
#include <ATen/Version.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/embedding_dense_backward_cpu_dispatch.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/sort_cpu_dispatch.h>
#include <ATen/ops/zeros.h>

#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "kwker/embedding.h"

namespace kwker::adapter {

// An all-equal tensor tells: introsort would scramble its indices, a radix sort keeps them in order.
bool torch_radix_sorts_1d_integers() {
  static const bool radix = [] {
    const at::Tensor zeros = at::zeros({kTorchRadixMinElements}, at::TensorOptions().dtype(at::kLong));
    const at::Tensor indices = std::get<1>(at::cpu::sort(zeros, false, 0, false));
    const int64_t* p = indices.const_data_ptr<int64_t>();
    for (int64_t i = 0; i < kTorchRadixMinElements; ++i) {
      if (p[i] != i) return false;
    }
    return true;
  }();
  return radix;
}

bool torch_kernels_fuse_multiply_add() {
  const std::string capability = at::get_cpu_capability();
  return capability == "AVX2" || capability == "AVX512";
}

// torch's float16 embedding backward with scale_grad_by_freq on one row of 48 (three indices, so
// alpha = 1/3) tells: a vector step of 16 makes all 48 elements body, 32 the last 16 tail, 64 all tail.
// Each candidate is run through Kwker's kernel and compared with torch's bits.
int64_t torch_vector_step_16bit() {
  static const int64_t step = [] {
    constexpr int64_t kRows = 3, kDim = 48;
    std::vector<float> values(kRows * kDim);
    uint32_t state = 12345;
    for (float& v : values) {
      state = state * 1664525u + 1013904223u;
      v = static_cast<float>(state >> 8) * 0x1p-22f - 2.0f;
    }
    const at::Tensor grad = at::from_blob(values.data(), {kRows, kDim}, at::kFloat).to(at::kHalf);
    const at::Tensor indices = at::zeros({kRows}, at::TensorOptions().dtype(at::kLong));
    const at::Tensor expected = at::cpu::embedding_dense_backward(grad, indices, 1, -1, true);
    for (int64_t candidate : {16, 32, 64}) {
      at::Tensor got = at::zeros({1, kDim}, grad.options());
      EmbeddingBackwardProblem problem{};
      problem.dtype = DType::kFloat16;
      problem.index_type = IndexType::kInt64;
      problem.grad = grad.const_data_ptr();
      problem.indices = indices.const_data_ptr();
      problem.num_indices = kRows;
      problem.dim = kDim;
      problem.num_weights = 1;
      problem.padding_idx = -1;
      problem.scale_grad_by_freq = true;
      problem.torch_vector_elements = candidate;
      problem.grad_weight = got.mutable_data_ptr();
      if (embedding_dense_backward(problem) &&
          std::memcmp(got.const_data_ptr(), expected.const_data_ptr(), kDim * sizeof(uint16_t)) == 0) {
        return candidate;
      }
    }
    return int64_t{0};
  }();
  return step;
}

}  // namespace kwker::adapter
