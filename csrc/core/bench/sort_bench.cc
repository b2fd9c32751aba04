// Core-only timing of kwker::sort_rows on one float32 row (no torch): for profiling the kernel
// itself, e.g. `perf record ./kwker_core_bench 151936 introsort`. Ratios against torch come from
// `python -m kwker bench`, not from here.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string_view>
#include <vector>

#include "kwker/sort.h"

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 151936;
  const bool stable = argc > 2 && std::strcmp(argv[2], "stable") == 0;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 200;
  // normal | zeros | sorted | bytes (float32); timestamps (int64: ascending, some equal, wide keys)
  const char* distribution = argc > 4 ? argv[4] : "normal";
  const bool descending = argc > 5 && std::strcmp(argv[5], "desc") == 0;
  std::mt19937 rng(0);
  std::normal_distribution<float> normal;
  const std::string_view d = distribution;
  const bool timestamps = d == "timestamps";
  std::vector<float> input(n), values(n);
  std::vector<int64_t> times(n), time_values(n), indices(n);
  int64_t t = 1'700'000'000'000'000'000;
  for (int64_t i = 0; i < n; ++i) {
    input[i] = d == "zeros" ? 0.0f : d == "sorted" ? static_cast<float>(i)
             : d == "bytes" ? static_cast<float>(rng() % 256) : normal(rng);
    times[i] = t += static_cast<int64_t>(rng() % 2'000'000);
  }
  kwker::SortRowsProblem p;
  p.dtype = timestamps ? kwker::DType::kInt64 : kwker::DType::kFloat32;
  p.order = descending ? kwker::SortOrder::kDescending : kwker::SortOrder::kAscending;
  p.ties = stable ? kwker::TieOrder::kStable : kwker::TieOrder::kIntrosort;
  p.row_length = n;
  p.outer_sizes = {};
  p.input = {timestamps ? static_cast<void*>(times.data()) : input.data(), 1, {}};
  p.values = {timestamps ? static_cast<void*>(time_values.data()) : values.data(), 1, {}};
  p.indices = {indices.data(), 1, {}};
  kwker::sort_rows(p);
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) kwker::sort_rows(p);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / reps;
  std::printf("%s n=%lld %s: %.3f ms per sort (%.1f ns per element)\n", distribution, static_cast<long long>(n),
              stable ? "stable" : "introsort", ms, ms * 1e6 / n);
}
