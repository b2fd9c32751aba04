// What the installed torch's own CPU kernels do that Kwker's answers must follow, asked of torch once.
#pragma once

#include <cstdint>

namespace kwker::adapter {

// torch's GRAIN_SIZE: from this size on, torch sorts 1-D integer tensors with fbgemm's radix sort.
inline constexpr int64_t kTorchRadixMinElements = 32768;

// Does this torch sort 1-D integer tensors of kTorchRadixMinElements or more stably even with
// stable=False (fbgemm's radix sort)?
bool torch_radix_sorts_1d_integers();

// Do torch's pointwise kernels run its AVX2 or AVX-512 build, where vec::fmadd is one FMA and GCC
// contracts the scalar tails' a + b * c to one too?
bool torch_kernels_fuse_multiply_add();

// The length of one step of the vector body of torch's float16/bfloat16 add (cpu_kernel_vec: elements
// before the row's last multiple of it are body, the rest scalar tail), found by running torch's
// embedding backward once on an input where the candidates 16, 32 and 64 give different bits; 0 if
// none matches. (torch 2.14.1 on AVX-512 and on AVX2: 32.)
int64_t torch_vector_step_16bit();

}  // namespace kwker::adapter
