// Embedding gradients and bag max compiled for avx2: embedding-inl.h.
#include <cstdint>
#include <cstring>
#include <immintrin.h>

#include "embedding/embedding_kernels.h"
#include "float16.h"

namespace kwker::embedding_detail::avx2 {
#include "embedding/embedding-inl.h"
}  // namespace kwker::embedding_detail::avx2
