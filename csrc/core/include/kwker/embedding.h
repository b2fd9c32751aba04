// Embedding weight gradients and EmbeddingBag max mode, with torch's exact results.
//
// embedding_dense_backward: grad_weight[k] = sum of alpha_i * grad[i] over the indices i with
// indices[i] == k, added one at a time in index order, as torch's CPU kernel adds them (one add_stub
// call per index): for float32/float64 acc + grad when alpha is 1, else one fused multiply-add (what
// torch's AVX2/AVX-512 kernels compute in vector bodies and, contracted, in scalar tails); for
// float16/bfloat16 the vector body computes T(fma(g, alpha, acc)) in float, the scalar tail
// T(acc + T(alpha * g)). alpha is 1, or T(1.0 / count) under scale_grad_by_freq.
//
// embedding_bag_max: per bag, per column, the first element or a later one strictly greater (compared
// as float for 16-bit types), so ties keep the earliest index and a NaN sticks only as a bag's first
// element; empty bags give 0 and index 0. The backward adds each non-empty bag's gradient column into
// the row its max index names, bags in ascending order (torch's index_add_ per column).
//
// Where a result is NaN its bits would follow the instructions torch's compiler chose (which NaN
// operand an FMA propagates), so the functions report it and the caller runs torch's kernel.
#pragma once

#include <cstdint>

#include "kwker/dtype.h"
#include "kwker/pages_written.h"

namespace kwker {

enum class IndexType : uint8_t { kInt32, kInt64 };

struct EmbeddingBackwardProblem {
  DType dtype;  // float32, float64, float16 or bfloat16
  IndexType index_type;
  const void* grad;     // num_indices contiguous rows of dim elements
  const void* indices;  // num_indices
  int64_t num_indices;
  int64_t dim;
  int64_t num_weights;
  int64_t padding_idx;  // indices equal to it add nothing (-1: none)
  bool scale_grad_by_freq;  // then every index must lie in [0, num_weights)
  // float16/bfloat16: the length of torch's vector step (2 * Vectorized<T>::size()); a row's elements
  // before its last multiple are the vector body, the rest the scalar tail.
  int64_t torch_vector_elements;
  void* grad_weight;  // num_weights contiguous rows of dim elements, zeros on entry
};

// Indices outside [0, num_weights) add nothing, as in torch. False: a result is NaN (grad_weight is
// then unspecified). The caller zeroes grad_weight.
bool embedding_dense_backward(const EmbeddingBackwardProblem& problem);

// Which pages of grad_weight the backward adds to (kwker/pages_written.h).
int64_t embedding_dense_backward_pages(const EmbeddingBackwardProblem& problem, const PagesWrittenQuery& query);

struct BagMaxProblem {
  DType dtype;
  IndexType index_type;  // of indices, offsets and all index outputs
  const void* weight;    // num_weights rows; elements along a row contiguous
  int64_t num_weights;
  int64_t dim;
  int64_t weight_row_stride;  // elements
  const void* indices;
  int64_t num_indices;
  // Bag b holds indices [offsets[b], offsets[b + 1]), the last bag [offsets[num_bags - 1], num_indices).
  const void* offsets;
  int64_t num_bags;
  int64_t padding_idx;  // compared as the index type, as torch compares it
  void* output;         // num_bags x dim, contiguous
  void* max_indices;    // num_bags x dim, contiguous
  void* bag_size;       // num_bags: bag length less its padding indices
  void* offset2bag;     // num_indices: the bag of each index
};

// False, with nothing useful written, for what Kwker leaves to torch: offsets that do not start at 0 or
// pass num_indices, or an index outside [0, num_weights) (torch raises), decreasing offsets (torch
// answers; Kwker does not reproduce it), and tables of more than 2^31 - 1 rows unless float64.
bool embedding_bag_max(const BagMaxProblem& problem);

struct BagMaxBackwardProblem {
  DType dtype;
  IndexType index_type;
  const void* grad;  // num_bags x dim, strides in elements
  int64_t grad_stride0, grad_stride1;
  const void* max_indices;  // num_bags x dim
  int64_t max_indices_stride0, max_indices_stride1;
  const void* bag_size;  // num_bags
  int64_t bag_size_stride;
  int64_t num_bags;
  int64_t dim;
  int64_t num_weights;
  void* grad_weight;  // num_weights x dim, contiguous, zeros on entry
};

// False when a non-empty bag's max index is outside [0, num_weights) (torch raises) or a result is NaN.
bool embedding_bag_max_backward(const BagMaxBackwardProblem& problem);

// As embedding_dense_backward_pages, for the max backward.
int64_t embedding_bag_max_backward_pages(const BagMaxBackwardProblem& problem, const PagesWrittenQuery& query);

}  // namespace kwker
