// Runtime CPU feature detection and the ISA cap.
//
// The kernels are compiled once per ISA (scalar, AVX2+FMA, AVX-512) and one variant is chosen at run
// time: the best the CPU and the OS support (XGETBV is checked, not only CPUID), lowered by the
// KWKER_ISA environment variable ("scalar", "avx2", "avx512") read once, or by set_isa_cap() (tests).
#pragma once

#include <string_view>

namespace kwker {

enum class Isa : int { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

std::string_view isa_name(Isa isa);

// The best ISA this CPU and OS support, ignoring any cap.
Isa detected_isa();

// The ISA kernels use now: min(detected_isa(), cap).
Isa active_isa();

// Caps the ISA (min with what the CPU supports). Returns the ISA now active. Not for use while kernels
// run on other threads.
Isa set_isa_cap(Isa cap);

// Parses "scalar" / "avx2" / "avx512"; returns false for anything else.
bool parse_isa(std::string_view name, Isa* out);

}  // namespace kwker
