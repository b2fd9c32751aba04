#include "kwker/parallel.h"

#include <atomic>

namespace kwker {
namespace {

void serial_for(int64_t begin, int64_t end, int64_t, void* context, ParallelBody body) {
  if (begin < end) body(context, begin, end);
}

std::atomic<ParallelForImpl> g_impl{&serial_for};

}  // namespace

void set_parallel_for(ParallelForImpl impl) { g_impl.store(impl ? impl : &serial_for); }

void parallel_for(int64_t begin, int64_t end, int64_t grain, void* context, ParallelBody body) {
  g_impl.load(std::memory_order_relaxed)(begin, end, grain, context, body);
}

}  // namespace kwker
