// fresh_pages.h. zeros_for_sparse_writes: memset the resident pages, hand back the rest, fault in what
// will be written. empty_for_dense_writes: at::empty and a huge-page mark.
#include "fresh_pages.h"

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace kwker::adapter {
namespace {

// Below this, zeroing takes well under a millisecond: not worth the system calls.
constexpr int64_t kMinBytes = int64_t{4} << 20;
// From this size on glibc maps every request by itself (its mmap threshold cannot exceed it), so a
// huge-page mark stays on this tensor's own mapping rather than on heap memory others will reuse.
constexpr int64_t kMinHugeBytes = int64_t{32} << 20;
// Measured on Xeon and Zen 4 servers and VMs: one huge-page fault (zeroing 2 MiB) costs about what 128
// small-page faults cost, and a small-page fault about what at::zeros spends on one fresh page.
constexpr int64_t kSmallFaultsPerHugeFault = 128;
// A run of absent pages handed back (one system call) should spare at least this many page faults.
constexpr int64_t kMinPagesPerRun = 16;
// Pages faulted in per parallel work item.
constexpr int64_t kGrainPages = 256;

// Does posix_memalign (what torch's CPU allocator calls) resolve to glibc's, not a preloaded allocator's?
bool allocator_is_glibc() {
  static const bool glibc = [] {
    Dl_info allocator{}, libc{};
    return dladdr(reinterpret_cast<void*>(&posix_memalign), &allocator) != 0 &&
           dladdr(reinterpret_cast<void*>(&gnu_get_libc_version), &libc) != 0 &&
           allocator.dli_fbase == libc.dli_fbase;
  }();
  return glibc;
}

int64_t page_size() {
  static const int64_t size = sysconf(_SC_PAGESIZE);
  return size;
}

// The size of a transparent huge page where madvise(MADV_HUGEPAGE) gets them, else 0.
int64_t huge_page_size() {
  static const int64_t size = [] {
    std::string enabled;
    std::getline(std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled"), enabled);
    int64_t bytes = 0;
    std::ifstream("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size") >> bytes;
    const bool usable = enabled.find("[always]") != std::string::npos || enabled.find("[madvise]") != std::string::npos;
    return usable ? bytes : 0;
  }();
  return size;
}

// The pages of one size the tensor spans, and which of them its kernel will write.
struct PageMap {
  int64_t page_bytes = 0;
  int64_t first_page_offset = 0;  // of the data, within page 0
  int64_t count = 0;              // pages written, or more than the limit asked
  std::vector<uint8_t> written;

  PageMap(uintptr_t address, int64_t nbytes, int64_t page, int64_t max_pages, PagesWritten pages_written)
      : page_bytes(page), first_page_offset(static_cast<int64_t>(address % page)) {
    written.assign(static_cast<size_t>((first_page_offset + nbytes + page - 1) / page), 0);
    count = pages_written(PagesWrittenQuery{page, first_page_offset, max_pages, written.data()});
  }
};

// Writes a zero into one byte of each listed page (the write fault maps a zeroed page), in parallel.
void fault_in(const std::vector<char*>& pages) {
  at::parallel_for(0, static_cast<int64_t>(pages.size()), kGrainPages, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) *static_cast<volatile char*>(pages[static_cast<size_t>(i)]) = 0;
  });
}

// Which whole pages of a range are resident (mincore), and how the others lie: in how many runs.
struct Residency {
  std::vector<unsigned char> resident;  // 1 per resident page, else 0
  bool known = false;                   // mincore answered
  int64_t absent_pages = 0, absent_runs = 0;

  Residency(char* first, int64_t pages, int64_t page) : resident(static_cast<size_t>(pages)) {
    known = mincore(first, static_cast<size_t>(pages * page), resident.data()) == 0;
    for (int64_t p = 0; known && p < pages; ++p) {
      resident[static_cast<size_t>(p)] &= 1;
      if (resident[static_cast<size_t>(p)]) continue;
      ++absent_pages;
      if (p == 0 || resident[static_cast<size_t>(p - 1)]) ++absent_runs;
    }
  }

  // Handing back the absent pages takes a system call per run. Heap memory a sparse-write kernel
  // (this one) left behind is absent in thousands of short runs, where the calls would cost many
  // times the faults they save; at::zeros then makes it all resident, for the next call's memset.
  bool worth_handing_back() const { return absent_pages > 0 && absent_runs * kMinPagesPerRun <= absent_pages; }
};

}  // namespace

at::Tensor zeros_for_sparse_writes(at::IntArrayRef sizes, const at::TensorOptions& options, PagesWritten pages_written) {
  at::Tensor zeros = at::empty(sizes, options);
  const int64_t nbytes = static_cast<int64_t>(zeros.nbytes()), element = zeros.element_size();
  if (nbytes < kMinBytes || !allocator_is_glibc()) return zeros.zero_();
  const int64_t page = page_size();
  char* data = static_cast<char*>(zeros.mutable_data_ptr());
  const auto address = reinterpret_cast<uintptr_t>(data);
  const int64_t head = (page - static_cast<int64_t>(address % page)) % page;  // bytes before the first whole page
  const int64_t pages = (nbytes - head) / page;                              // whole pages
  if (head % element != 0) return zeros.zero_();

  char* first = data + head;
  Residency residency(first, pages, page);
  if (!residency.known || !residency.worth_handing_back()) return zeros.zero_();

  // In small-page faults, against at::zeros' one per page not resident; lazily only where that saves
  // half at least (faults in random order cost more than a memset's).
  const int64_t budget = residency.absent_pages / 2;
  const PageMap small(address, nbytes, page, budget, pages_written);
  std::optional<PageMap> huge;
  if (residency.absent_pages == pages && huge_page_size() > 0 && nbytes >= kMinHugeBytes) {
    huge.emplace(address, nbytes, huge_page_size(), budget / kSmallFaultsPerHugeFault, pages_written);
    if (huge->count * kSmallFaultsPerHugeFault >= std::min(small.count, budget + 1)) huge.reset();
  }
  if (!huge && small.count > budget) return zeros.zero_();
  if (huge) madvise(first, static_cast<size_t>(pages * page), MADV_HUGEPAGE);  // a hint: may fail

  at::Tensor flat = zeros.view({-1});
  const auto zero_bytes = [&](int64_t begin, int64_t end) {  // offsets from the data, element-aligned
    if (end > begin) flat.narrow(0, begin / element, (end - begin) / element).zero_();
  };
  zero_bytes(0, head);
  zero_bytes(head + pages * page, nbytes);
  std::vector<unsigned char>& resident = residency.resident;
  for (int64_t run = 0; run < pages;) {
    const bool in_memory = resident[static_cast<size_t>(run)];
    int64_t end = run + 1;
    while (end < pages && resident[static_cast<size_t>(end)] == in_memory) ++end;
    if (in_memory || madvise(first + run * page, static_cast<size_t>((end - run) * page), MADV_DONTNEED) != 0) {
      std::fill(resident.begin() + run, resident.begin() + end, 1);
      zero_bytes(head + run * page, head + end * page);
    }
    run = end;
  }

  // One byte of each page to be written that is not resident (of each huge page, when huge).
  const PageMap& map = huge ? *huge : small;
  std::vector<char*> to_fault;
  for (size_t p = 0; p < map.written.size(); ++p) {
    if (!map.written[p]) continue;
    const int64_t begin = std::max<int64_t>(head, static_cast<int64_t>(p) * map.page_bytes - map.first_page_offset);
    if (begin >= head + pages * page) continue;  // the tail, zeroed above
    if (!resident[static_cast<size_t>((begin - head) / page)]) to_fault.push_back(data + begin);
  }
  fault_in(to_fault);
  return zeros;
}

at::Tensor empty_for_dense_writes(at::IntArrayRef sizes, const at::TensorOptions& options) {
  at::Tensor empty = at::empty(sizes, options);
  const int64_t nbytes = static_cast<int64_t>(empty.nbytes()), huge = huge_page_size();
  if (nbytes < kMinHugeBytes || huge == 0 || !allocator_is_glibc()) return empty;
  const auto address = reinterpret_cast<uintptr_t>(empty.mutable_data_ptr());
  const uintptr_t first = (address + huge - 1) / huge * huge, end = (address + nbytes) / huge * huge;
  if (end <= first) return empty;
  // Only a fresh mapping: memory glibc reuses from its heap is marked no more (the mark would outlive
  // this tensor, and faults on it may stall for compaction).
  const auto huge_pages_bytes = static_cast<int64_t>(end - first);
  const Residency residency(reinterpret_cast<char*>(first), huge_pages_bytes / page_size(), page_size());
  if (residency.known && residency.absent_pages * page_size() == huge_pages_bytes) {
    madvise(reinterpret_cast<void*>(first), end - first, MADV_HUGEPAGE);  // a hint: may fail
  }
  return empty;
}

}  // namespace kwker::adapter
