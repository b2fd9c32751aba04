// A question a kernel answers before it runs: which pages of its output will it write? The caller uses
// the answer to choose how to zero the output (pages never written need not be zeroed by hand).
#pragma once

#include <cstdint>

namespace kwker {

// Pages of page_bytes, the output's first byte lying first_page_offset bytes into page 0. The kernel sets
// written[p] to 1 for each page p it would write to (written: one byte per page the output spans,
// zeroed by the caller) and returns their number, or stops (written then incomplete) once that number
// passes max_pages. The output itself is not read.
struct PagesWrittenQuery {
  int64_t page_bytes;
  int64_t first_page_offset;
  int64_t max_pages;
  uint8_t* written;
};

}  // namespace kwker
