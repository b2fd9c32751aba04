// What every adapter kernel consults and records: is Kwker on for this call, and counters per kernel
// family (calls, served by Kwker, fell back to torch and why). No torch headers here.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

namespace kwker::adapter {

enum class Kernel : uint8_t { kSort, kAdam, kSgd, kTopk, kKthvalue, kMedian, kSearchsorted, kUnique, kQuantile,
                              kEmbedding, kEmbeddingBag, kCoalesce, kCount };
const char* kernel_name(Kernel k);

// Why a call went to torch's own kernel.
enum class Fallback : uint8_t {
  kDisabled,      // Kwker switched off (uninstalled, KWKER_DISABLE, disabled(), or outside accelerated())
  kDtype,         // element type not covered
  kLayout,        // not a plain strided tensor, or a named tensor
  kSmall,         // below the size where Kwker is faster, or a 0-dim / empty tensor
  kZeroStride,    // stride 0 along the sorted dim: torch's identity answer is already cheap
  kTooLong,       // a row longer than the kernel indexes
  kArguments,     // arguments torch handles itself (errors, optional flags, ...)
  kOutTensors,    // out= tensors that torch must resize, convert or check
  kDeclined,      // the kernel saw torch is as fast on this input (e.g. presorted rows with ties)
  kDenormalsAreZero,  // torch.set_flush_denormal(True): torch's float comparisons see subnormals as 0
  kTorchCapability,   // torch's kernels here are not the FMA-contracting AVX2/AVX-512 build Kwker matches
  kFloatMode,         // the thread's MXCSR is not the default (flush-to-zero, denormals-are-zero, rounding)
  kAutograd,          // inputs needing gradients: torch's composite runs, so autograd records its ops
  kNanResult,         // a result is NaN, whose bits follow the instructions torch's compiler chose
  kCount,
};
const char* fallback_name(Fallback f);

struct KernelCounters {
  std::atomic<int64_t> calls{0};
  std::atomic<int64_t> served{0};
  std::array<std::atomic<int64_t>, static_cast<size_t>(Fallback::kCount)> fallbacks{};
};

KernelCounters& counters(Kernel k);
std::string stats_json();
void reset_stats();

// Whether Kwker's kernels run for the calling thread: the thread's accelerated()/disabled() state
// if set, else the process-wide switch that install() turns on.
bool enabled_for_this_thread();

// Whether install()/accelerated() registered the family and it is on for the calling thread. For the
// families torch reaches through ops of Kwker's own (the optimizers), not through an aten override.
bool kernel_active(Kernel k);

// Test-only: makes a kernel family return a wrong answer (the probe must then switch it off).
bool fault_injected(Kernel k);
void set_fault_injected(Kernel k, bool on);
bool kernel_from_name(const std::string& name, Kernel* out);

// Whether the calling thread compares floats with subnormals read as zero (MXCSR.DAZ, which
// torch.set_flush_denormal(True) sets): torch's comparator then ties subnormals with zero.
bool denormals_are_zero();

// Whether the calling thread's MXCSR has its default: no FTZ, no DAZ, round to nearest even.
bool float_mode_is_default();

// Records a call and returns whether the kernel should serve it; otherwise records the reason.
class CallRecord {
 public:
  explicit CallRecord(Kernel k) : counters_(counters(k)) {
    counters_.calls.fetch_add(1, std::memory_order_relaxed);
  }
  void served() { counters_.served.fetch_add(1, std::memory_order_relaxed); }
  void fell_back(Fallback why) {
    counters_.fallbacks[static_cast<size_t>(why)].fetch_add(1, std::memory_order_relaxed);
  }

 private:
  KernelCounters& counters_;
};

}  // namespace kwker::adapter
