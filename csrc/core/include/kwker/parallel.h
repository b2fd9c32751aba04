// The one parallel-for the core uses. The torch adapter points it at at::parallel_for so that the core
// runs on torch's intra-op pool and honors torch.set_num_threads; by default it runs serially.
#pragma once

#include <cstdint>

namespace kwker {

// Calls body(context, begin, end) over disjoint chunks covering [begin, end), each at least `grain`
// long (except the last), possibly on several threads at once.
using ParallelBody = void (*)(void* context, int64_t begin, int64_t end);
using ParallelForImpl = void (*)(int64_t begin, int64_t end, int64_t grain, void* context,
                                 ParallelBody body);

void set_parallel_for(ParallelForImpl impl);

void parallel_for(int64_t begin, int64_t end, int64_t grain, void* context, ParallelBody body);

// Convenience over a callable: parallel_for(0, n, grain, [&](int64_t b, int64_t e) {...}).
template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  parallel_for(begin, end, grain, const_cast<F*>(&f), [](void* ctx, int64_t b, int64_t e) {
    (*static_cast<const F*>(ctx))(b, e);
  });
}

}  // namespace kwker
