// install / uninstall / per-thread switch / counters, and the kwker:: control ops Python calls.
//
// torch::Library(IMPL, "aten", key) objects created at run time hold every Kwker kernel: one for CPU,
// and one for each other key a family needs (AutogradCPU, SparseCPU); destroying them deregisters the
// kernels and torch's own are back exactly. Registration writes the
// dispatch table that torch reads without a lock, so it happens only in install()/uninstall() (and the
// first accelerated()); switching Kwker on and off afterwards is a flag the kernels read.
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <array>
#include <memory>
#include <xmmintrin.h>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "kernel_state.h"
#include "kwker/cpu.h"
#include "kwker/parallel.h"
#include "registry.h"

namespace kwker::adapter {
namespace {

std::atomic<bool> g_enabled_globally{false};
thread_local int g_thread_state = -1;  // -1: follow the global switch; 0: off; 1: on

std::array<KernelCounters, static_cast<size_t>(Kernel::kCount)> g_counters;
std::array<std::atomic<bool>, static_cast<size_t>(Kernel::kCount)> g_faults{};

// The dispatch keys Kwker registers kernels at, one torch::Library each.
enum class Key : uint8_t { kCpu, kAutogradCpu, kSparseCpu, kCount };
constexpr c10::DispatchKey kDispatchKeys[] = {c10::DispatchKey::CPU, c10::DispatchKey::AutogradCPU,
                                              c10::DispatchKey::SparseCPU};
constexpr uint8_t bit(Key k) { return uint8_t{1} << static_cast<unsigned>(k); }

struct Registration {
  std::array<std::unique_ptr<torch::Library>, static_cast<size_t>(Key::kCount)> libraries;
  std::vector<std::string> kernels;
};
std::mutex g_registration_mutex;
Registration g_registration;

// Overriding a CPU kernel makes torch warn once per process; that override is the whole point here.
class SilentWarnings : public c10::WarningHandler {
 public:
  void process(const c10::Warning&) override {}
};

void aten_parallel_for(int64_t begin, int64_t end, int64_t grain, void* context, ParallelBody body) {
  at::parallel_for(begin, end, grain, [&](int64_t b, int64_t e) { body(context, b, e); });
}

using RegisterFn = void (*)(torch::Library&);
struct KernelFamily {
  const char* name;
  RegisterFn register_kernels;
  // The keys its kernels go to: CPU for most. CompositeImplicitAutograd ops (quantile) go to AutogradCPU
  // too (a CPU kernel alone would take the composite's place for autograd; the kernels send inputs
  // needing gradients to the composite); sparse COO kernels (coalesce) to SparseCPU.
  uint8_t keys = bit(Key::kCpu);
};
// The optimizer families override no aten kernel: Python calls their kwker:: ops (optim_ops.cc), which
// check kernel_active().
constexpr KernelFamily kFamilies[] = {
    {"sort", &register_sort_kernels},
    {"adam", nullptr},
    {"sgd", nullptr},
    {"topk", &register_topk_kernels},
    {"kthvalue", &register_kthvalue_kernels},
    {"median", &register_median_kernels},  // median and nanmedian
    {"searchsorted", &register_searchsorted_kernels},  // searchsorted and bucketize
    {"unique", &register_unique_kernels},  // torch.unique, unique_consecutive along a dim
    {"quantile", &register_quantile_kernels, bit(Key::kCpu) | bit(Key::kAutogradCpu)},  // and nanquantile
    {"embedding", &register_embedding_kernels},  // embedding_dense_backward
    {"embedding_bag", &register_embedding_bag_kernels},  // max mode: forward and backward
    {"coalesce", &register_coalesce_kernels, bit(Key::kSparseCpu)},  // sparse COO _coalesce
};

std::atomic<uint32_t> g_registered_kernels{0};  // bit k: Kernel k is registered

uint32_t kernel_bits(const std::vector<std::string>& names) {
  uint32_t bits = 0;
  for (const auto& name : names) {
    Kernel k;
    if (kernel_from_name(name, &k)) bits |= 1u << static_cast<unsigned>(k);
  }
  return bits;
}

void install(std::vector<std::string> kernels, bool enable_globally) {
  std::lock_guard<std::mutex> lock(g_registration_mutex);
  for (const auto& name : kernels) {
    bool known = false;
    for (const auto& f : kFamilies) known |= name == f.name;
    TORCH_CHECK_VALUE(known, "kwker: unknown kernel family '", name, "'");
  }
  if (!g_registration.libraries[0] || g_registration.kernels != kernels) {
    for (auto& library : g_registration.libraries) library.reset();
    set_parallel_for(&aten_parallel_for);
    SilentWarnings silent;
    c10::WarningUtils::WarningHandlerGuard guard(&silent);
    decltype(g_registration.libraries) libraries;
    libraries[0] = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", kDispatchKeys[0], __FILE__, __LINE__);
    for (const auto& f : kFamilies) {
      for (const auto& name : kernels) {
        if (name != f.name || !f.register_kernels) continue;
        for (size_t k = 0; k < libraries.size(); ++k) {
          if (!(f.keys & (1u << k))) continue;
          if (!libraries[k]) {
            libraries[k] = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", kDispatchKeys[k],
                                                            __FILE__, __LINE__);
          }
          f.register_kernels(*libraries[k]);
        }
      }
    }
    g_registration.libraries = std::move(libraries);
    g_registered_kernels.store(kernel_bits(kernels));
    g_registration.kernels = std::move(kernels);
  }
  if (enable_globally) g_enabled_globally.store(true);
}

void uninstall() {
  std::lock_guard<std::mutex> lock(g_registration_mutex);
  g_enabled_globally.store(false);
  g_registered_kernels.store(0);
  for (auto& library : g_registration.libraries) library.reset();
  g_registration.kernels.clear();
}

bool is_registered() {
  std::lock_guard<std::mutex> lock(g_registration_mutex);
  return g_registration.libraries[0] != nullptr;
}

bool is_installed() { return is_registered() && g_enabled_globally.load(); }

int64_t set_thread_state(int64_t state) {
  TORCH_CHECK_VALUE(state >= -1 && state <= 1, "kwker: thread state must be -1, 0 or 1");
  const int previous = g_thread_state;
  g_thread_state = static_cast<int>(state);
  return previous;
}

std::string isa() { return std::string(isa_name(active_isa())); }
std::string detected() { return std::string(isa_name(detected_isa())); }

std::string cap_isa(const std::string& name) {
  Isa cap;
  TORCH_CHECK_VALUE(parse_isa(name, &cap), "kwker: unknown ISA '", name,
                    "' (expected scalar, avx2 or avx512)");
  return std::string(isa_name(set_isa_cap(cap)));
}

// For the decisions Python makes (optim.py: arguments its wrapper leaves to torch unseen by C++).
void record_fallback(const std::string& kernel, const std::string& reason, int64_t count) {
  Kernel k;
  TORCH_CHECK_VALUE(kernel_from_name(kernel, &k), "kwker: unknown kernel family '", kernel, "'");
  for (size_t f = 0; f < static_cast<size_t>(Fallback::kCount); ++f) {
    if (reason == fallback_name(static_cast<Fallback>(f))) {
      counters(k).calls.fetch_add(count);
      counters(k).fallbacks[f].fetch_add(count);
      return;
    }
  }
  TORCH_CHECK_VALUE(false, "kwker: unknown fallback reason '", reason, "'");
}

void inject_fault(const std::string& kernel, bool on) {
  Kernel k;
  TORCH_CHECK_VALUE(kernel_from_name(kernel, &k), "kwker: unknown kernel family '", kernel, "'");
  set_fault_injected(k, on);
}

std::string build_info() {
  std::ostringstream out;
  out << "{\"torch\": \"" << KWKER_TORCH_VERSION << "\", \"compiler\": \"gcc " << __VERSION__
      << "\", \"isas_compiled\": [\"scalar\", \"avx2\", \"avx512\"], \"kernels\": [";
  for (size_t i = 0; i < std::size(kFamilies); ++i) out << (i ? ", " : "") << '"' << kFamilies[i].name << '"';
  out << "]}";
  return out.str();
}

}  // namespace

const char* kernel_name(Kernel k) {
  switch (k) {
    case Kernel::kSort: return "sort";
    case Kernel::kAdam: return "adam";
    case Kernel::kSgd: return "sgd";
    case Kernel::kTopk: return "topk";
    case Kernel::kKthvalue: return "kthvalue";
    case Kernel::kMedian: return "median";
    case Kernel::kSearchsorted: return "searchsorted";
    case Kernel::kUnique: return "unique";
    case Kernel::kQuantile: return "quantile";
    case Kernel::kEmbedding: return "embedding";
    case Kernel::kEmbeddingBag: return "embedding_bag";
    case Kernel::kCoalesce: return "coalesce";
    case Kernel::kCount: break;
  }
  return "?";
}

const char* fallback_name(Fallback f) {
  switch (f) {
    case Fallback::kDisabled: return "disabled";
    case Fallback::kDtype: return "dtype";
    case Fallback::kLayout: return "layout";
    case Fallback::kSmall: return "small";
    case Fallback::kZeroStride: return "zero_stride";
    case Fallback::kTooLong: return "too_long";
    case Fallback::kArguments: return "arguments";
    case Fallback::kOutTensors: return "out_tensors";
    case Fallback::kDeclined: return "declined";
    case Fallback::kDenormalsAreZero: return "denormals_are_zero";
    case Fallback::kTorchCapability: return "torch_capability";
    case Fallback::kFloatMode: return "float_mode";
    case Fallback::kAutograd: return "autograd";
    case Fallback::kNanResult: return "nan_result";
    case Fallback::kCount: break;
  }
  return "?";
}

KernelCounters& counters(Kernel k) { return g_counters[static_cast<size_t>(k)]; }

bool fault_injected(Kernel k) {
  return g_faults[static_cast<size_t>(k)].load(std::memory_order_relaxed);
}

void set_fault_injected(Kernel k, bool on) { g_faults[static_cast<size_t>(k)].store(on); }

bool kernel_from_name(const std::string& name, Kernel* out) {
  for (size_t k = 0; k < static_cast<size_t>(Kernel::kCount); ++k) {
    if (name == kernel_name(static_cast<Kernel>(k))) {
      *out = static_cast<Kernel>(k);
      return true;
    }
  }
  return false;
}

bool denormals_are_zero() { return (_mm_getcsr() & 0x40) != 0; }

bool float_mode_is_default() {
  constexpr unsigned kDaz = 0x40, kRoundingControl = 0x6000, kFtz = 0x8000;
  return (_mm_getcsr() & (kDaz | kRoundingControl | kFtz)) == 0;
}

bool kernel_active(Kernel k) {
  return (g_registered_kernels.load(std::memory_order_relaxed) >> static_cast<unsigned>(k) & 1u) != 0 &&
         enabled_for_this_thread();
}

bool enabled_for_this_thread() {
  return g_thread_state < 0 ? g_enabled_globally.load(std::memory_order_relaxed) : g_thread_state == 1;
}

std::string stats_json() {
  std::ostringstream out;
  out << '{';
  for (size_t k = 0; k < g_counters.size(); ++k) {
    const KernelCounters& c = g_counters[k];
    int64_t fell_back = 0;
    std::ostringstream reasons;
    for (size_t f = 0; f < c.fallbacks.size(); ++f) {
      const int64_t n = c.fallbacks[f].load();
      if (n == 0) continue;
      reasons << (fell_back ? ", " : "") << '"' << fallback_name(static_cast<Fallback>(f)) << "\": " << n;
      fell_back += n;
    }
    out << (k ? ", " : "") << '"' << kernel_name(static_cast<Kernel>(k)) << "\": {\"calls\": "
        << c.calls.load() << ", \"kwker\": " << c.served.load() << ", \"torch\": " << fell_back
        << ", \"fallback_reasons\": {" << reasons.str() << "}}";
  }
  out << '}';
  return out.str();
}

void reset_stats() {
  for (KernelCounters& c : g_counters) {
    c.calls.store(0);
    c.served.store(0);
    for (auto& f : c.fallbacks) f.store(0);
  }
}

}  // namespace kwker::adapter

TORCH_LIBRARY(kwker, m) {
  using namespace kwker::adapter;
  m.def("install(str[] kernels, bool enable_globally) -> ()", &install);
  m.def("uninstall() -> ()", &uninstall);
  m.def("is_installed() -> bool", &is_installed);
  m.def("is_registered() -> bool", &is_registered);
  m.def("set_thread_state(int state) -> int", &set_thread_state);
  m.def("stats() -> str", &stats_json);
  m.def("reset_stats() -> ()", &reset_stats);
  m.def("isa() -> str", &isa);
  m.def("detected_isa() -> str", &detected);
  m.def("set_isa_cap(str name) -> str", &cap_isa);
  m.def("build_info() -> str", &build_info);
  m.def("record_fallback(str kernel, str reason, int count) -> ()", &record_fallback);
  // Test-only: the named kernel family returns wrong answers until switched off again.
  m.def("inject_fault(str kernel, bool on) -> ()", &inject_fault);
}
