// Scratch arrays for passes that write to scattered places of a large array (a radix sort's scatter):
// from 2 MiB on they are backed by transparent huge pages where the system gives them (madvise
// MADV_HUGEPAGE), so that the scatter's writes, each into another 4 KiB page, do not miss the TLB
// nearly every time, and the array costs one page fault per 2 MiB instead of 512. Released, such an
// array's mapping is kept for the next one (scratch_array.cc), so that repeated calls do not pay the
// faults at all. Contents start unspecified (zeros, or what an earlier array left), as with new T[n].
#pragma once

#include <cstddef>

namespace kwker {

namespace scratch_detail {
void* allocate(size_t bytes, size_t& mapped);  // mapped: 0 for plain heap memory
void release(void* p, size_t mapped);
}  // namespace scratch_detail

template <typename T>
class ScratchArray {
 public:
  explicit ScratchArray(size_t n) : data_(static_cast<T*>(scratch_detail::allocate(n * sizeof(T), mapped_))) {}
  ~ScratchArray() { scratch_detail::release(data_, mapped_); }
  ScratchArray(const ScratchArray&) = delete;
  ScratchArray& operator=(const ScratchArray&) = delete;

  T* get() const { return data_; }

 private:
  size_t mapped_ = 0;
  T* data_;
};

}  // namespace kwker
