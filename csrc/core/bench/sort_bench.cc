// Core-only timing of kwker::sort_rows on one float32 row (no torch): for profiling the kernel
// itself, e.g. `perf record ./kwker_core_bench 151936 introsort`. Ratios against torch come from
// `python -m kwker bench`, not from here.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "kwker/sort.h"

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 151936;
  const bool stable = argc > 2 && std::strcmp(argv[2], "stable") == 0;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 200;
  std::mt19937 rng(0);
  std::normal_distribution<float> normal;
  std::vector<float> input(n), values(n);
  std::vector<int64_t> indices(n);
  for (auto& x : input) x = normal(rng);
  kwker::SortRowsProblem p;
  p.dtype = kwker::DType::kFloat32;
  p.order = kwker::SortOrder::kDescending;
  p.ties = stable ? kwker::TieOrder::kStable : kwker::TieOrder::kIntrosort;
  p.row_length = n;
  p.outer_sizes = {};
  p.input = {input.data(), 1, {}};
  p.values = {values.data(), 1, {}};
  p.indices = {indices.data(), 1, {}};
  kwker::sort_rows(p);
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) kwker::sort_rows(p);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / reps;
  std::printf("n=%lld %s: %.3f ms per sort (%.1f ns per element)\n", static_cast<long long>(n),
              stable ? "stable" : "introsort", ms, ms * 1e6 / n);
}
