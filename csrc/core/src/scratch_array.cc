// scratch_array.h: a 2 MiB-aligned anonymous mapping marked for huge pages, or the heap for small arrays.
//
// Released mappings are kept for the next request they can hold (a few, up to kCachedBytes in all,
// resident: this much memory stays with the process), so that reusing them costs neither page faults
// nor the kernel's zeroing of every page, which for a fresh mapping is most of what a pass over it
// costs. (Marking kept pages MADV_FREE, to let the kernel take them back, made the next use fault
// them in again at several times the cost of a fresh mapping on the machines measured.)
#include "scratch_array.h"

#include <sys/mman.h>

#include <cstdint>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace kwker::scratch_detail {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;  // x86-64's transparent huge page
constexpr size_t kCachedMappings = 4;
constexpr size_t kCachedBytes = size_t{256} << 20;

struct Mapping {
  void* address;
  size_t length;
};

class MappingCache {
 public:
  // The smallest kept mapping of at least `length` bytes, taken out of the cache; null if none.
  void* take(size_t length, size_t& mapped) {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t best = kept_.size();
    for (size_t i = 0; i < kept_.size(); ++i) {
      if (kept_[i].length >= length && (best == kept_.size() || kept_[i].length < kept_[best].length)) best = i;
    }
    if (best == kept_.size()) return nullptr;
    const Mapping m = kept_[best];
    kept_.erase(kept_.begin() + static_cast<std::ptrdiff_t>(best));
    bytes_ -= m.length;
    mapped = m.length;
    return m.address;
  }

  // Keeps the mapping, dropping the oldest ones while the cache is over its limits.
  void keep(void* address, size_t length) {
    std::vector<Mapping> dropped;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      kept_.push_back({address, length});
      bytes_ += length;
      while (kept_.size() > kCachedMappings || bytes_ > kCachedBytes) {
        dropped.push_back(kept_.front());
        bytes_ -= kept_.front().length;
        kept_.erase(kept_.begin());
      }
    }
    for (const Mapping& m : dropped) munmap(m.address, m.length);
  }

 private:
  std::mutex mutex_;
  std::vector<Mapping> kept_;  // oldest first
  size_t bytes_ = 0;
};

MappingCache& cache() {
  static MappingCache* c = new MappingCache;  // never destroyed: scratch may be released at exit
  return *c;
}

void* map_huge(size_t length) {
  // Mapped with a huge page of slack, then trimmed to a 2 MiB-aligned range (huge pages need it).
  void* base = mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t start = reinterpret_cast<uintptr_t>(base);
  const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > start) munmap(base, aligned - start);
  const uintptr_t end = start + length + kHugePage;
  if (end > aligned + length) munmap(reinterpret_cast<void*>(aligned + length), end - aligned - length);
  madvise(reinterpret_cast<void*>(aligned), length, MADV_HUGEPAGE);  // a hint: without THP, small pages
  return reinterpret_cast<void*>(aligned);
}

}  // namespace

void* allocate(size_t bytes, size_t& mapped) {
  mapped = 0;
  if (bytes < kHugePage) return ::operator new(bytes == 0 ? 1 : bytes);
  const size_t length = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  if (void* kept = cache().take(length, mapped)) return kept;
  mapped = length;
  return map_huge(length);
}

void release(void* p, size_t mapped) {
  if (mapped == 0) {
    ::operator delete(p);
  } else if (mapped <= kCachedBytes) {
    cache().keep(p, mapped);
  } else {
    munmap(p, mapped);
  }
}

}  // namespace kwker::scratch_detail
