// scratch_array.h: a 2 MiB-aligned anonymous mapping marked for huge pages, or the heap for small arrays.
#include "scratch_array.h"

#include <sys/mman.h>

#include <cstdint>
#include <new>

namespace kwker::scratch_detail {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;  // x86-64's transparent huge page

}  // namespace

void* allocate(size_t bytes, size_t& mapped) {
  mapped = 0;
  if (bytes < kHugePage) return ::operator new(bytes == 0 ? 1 : bytes);
  const size_t length = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  // Mapped with a huge page of slack, then trimmed to a 2 MiB-aligned range (huge pages need it).
  void* base = mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t start = reinterpret_cast<uintptr_t>(base);
  const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > start) munmap(base, aligned - start);
  const uintptr_t end = start + length + kHugePage;
  if (end > aligned + length) munmap(reinterpret_cast<void*>(aligned + length), end - aligned - length);
  madvise(reinterpret_cast<void*>(aligned), length, MADV_HUGEPAGE);  // a hint: without THP, small pages
  mapped = length;
  return reinterpret_cast<void*>(aligned);
}

void release(void* p, size_t mapped) {
  if (mapped == 0) {
    ::operator delete(p);
  } else {
    munmap(p, mapped);
  }
}

}  // namespace kwker::scratch_detail
