// Embedding gradients and bag max compiled for scalar: embedding-inl.h.
#include <cstdint>
#include <cstring>


#include "embedding/embedding_kernels.h"
#include "float16.h"

namespace kwker::embedding_detail::scalar {
#include "embedding/embedding-inl.h"
}  // namespace kwker::embedding_detail::scalar
