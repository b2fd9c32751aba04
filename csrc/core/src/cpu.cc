// CPUID + XGETBV detection (an ISA counts only if the OS saves its registers), and the KWKER_ISA cap.
#include "kwker/cpu.h"

#include <atomic>
#include <cpuid.h>
#include <cstdint>
#include <cstdlib>

namespace kwker {
namespace {

uint64_t read_xcr0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t{edx} << 32) | eax;
}

// Every instruction set the AVX2 build may use (CMakeLists.txt: -mavx2 -mfma -mbmi -mbmi2 -mlzcnt
// -mpopcnt -mf16c) must be present for kAvx2, and AVX-512 F, DQ, BW and VL for kAvx512.
Isa detect() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return Isa::kScalar;
  const bool osxsave = c & (1u << 27), fma = c & (1u << 12), avx = c & (1u << 28);
  const bool popcnt = c & (1u << 23), f16c = c & (1u << 29);
  if (!osxsave || !avx || !fma || !popcnt || !f16c) return Isa::kScalar;
  if (!__get_cpuid(0x80000001, &a, &b, &c, &d) || !(c & (1u << 5))) return Isa::kScalar;  // lzcnt (abm)
  const uint64_t xcr0 = read_xcr0();
  if ((xcr0 & 0x6) != 0x6) return Isa::kScalar;  // XMM and YMM state
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return Isa::kScalar;
  const bool avx2 = b & (1u << 5), bmi1 = b & (1u << 3), bmi2 = b & (1u << 8);
  if (!avx2 || !bmi1 || !bmi2) return Isa::kScalar;
  const bool avx512 = (b & (1u << 16)) && (b & (1u << 17)) && (b & (1u << 30)) && (b & (1u << 31));
  if (avx512 && (xcr0 & 0xE0) == 0xE0) return Isa::kAvx512;  // opmask, ZMM_Hi256, Hi16_ZMM state
  return Isa::kAvx2;
}

Isa env_cap() {
  const char* env = std::getenv("KWKER_ISA");
  Isa cap = Isa::kAvx512;
  if (env && *env) parse_isa(env, &cap);
  return cap;
}

Isa min_isa(Isa a, Isa b) { return static_cast<int>(a) < static_cast<int>(b) ? a : b; }

std::atomic<Isa>& active() {
  static std::atomic<Isa> isa{min_isa(detected_isa(), env_cap())};
  return isa;
}

}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "?";
}

bool parse_isa(std::string_view name, Isa* out) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (name == isa_name(isa)) {
      *out = isa;
      return true;
    }
  }
  return false;
}

Isa detected_isa() {
  static const Isa isa = detect();
  return isa;
}

Isa active_isa() { return active().load(std::memory_order_relaxed); }

Isa set_isa_cap(Isa cap) {
  active().store(min_isa(detected_isa(), cap), std::memory_order_relaxed);
  return active_isa();
}

}  // namespace kwker
