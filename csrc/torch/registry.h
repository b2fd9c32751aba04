// Registration of Kwker's kernels at torch's CPU dispatch key. Each kernel family contributes one
// function that impl()s its overloads on the Library it is given.
#pragma once

namespace torch { class Library; }

namespace kwker::adapter {

void register_sort_kernels(torch::Library& library);
void register_topk_kernels(torch::Library& library);
void register_kthvalue_kernels(torch::Library& library);
void register_median_kernels(torch::Library& library);
void register_searchsorted_kernels(torch::Library& library);
void register_unique_kernels(torch::Library& library);
// Also called with an AutogradCPU library: quantile and nanquantile are CompositeImplicitAutograd ops.
void register_quantile_kernels(torch::Library& library);
void register_embedding_kernels(torch::Library& library);
void register_embedding_bag_kernels(torch::Library& library);
// Called with a SparseCPU library.
void register_coalesce_kernels(torch::Library& library);

}  // namespace kwker::adapter
