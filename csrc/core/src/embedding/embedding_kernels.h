// What embedding.cc hands each ISA variant (embedding_<isa>.cc): ranges of weight rows (the dense
// backward) and of bags (the max forward), checked and partitioned by embedding.cc.
#pragma once

#include <cstdint>

#include "kwker/embedding.h"

namespace kwker::embedding_detail {

struct EmbeddingKernels {
  // Adds into grad_weight rows [begin, end) every index's gradient row in that range, in index order. counts: per weight row, its number of indices (scale_grad_by_freq), else null.
  // Returns whether a result was NaN.
  bool (*backward_rows)(const EmbeddingBackwardProblem& problem, const int64_t* counts, int64_t begin,
                        int64_t end);
  // Writes output, max_indices, bag_size and offset2bag of bags [begin, end).
  void (*bag_max_rows)(const BagMaxProblem& problem, int64_t begin, int64_t end);
};

namespace scalar { extern const EmbeddingKernels kKernels; }
namespace avx2 { extern const EmbeddingKernels kKernels; }
namespace avx512 { extern const EmbeddingKernels kKernels; }

}  // namespace kwker::embedding_detail
