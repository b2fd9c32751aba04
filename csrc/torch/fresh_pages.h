// Large tensors whose fresh pages are mapped the cheap way for what the caller's kernel then does.
//
// zeros_for_sparse_writes: zero-filled tensors for kernels that then write only some of their pages
// (an embedding's weight gradient: only the rows of looked-up ids receive additions).
//
// at::zeros is at::empty and a memset. When the memory is fresh from the kernel (glibc maps fresh pages
// for every large request no free block can hold), the memset faults every page in, one 4 KiB page at a
// time, and writes what the kernel has just zeroed. Here the memory is the same at::empty; each of its
// pages that is not resident is handed back (madvise MADV_DONTNEED: the next touch maps a page the
// kernel zeroes) instead of written, and resident pages are zeroed as at::zeros zeroes them. The pages
// the caller's kernel will write are then faulted in by one write each (a kernel that reads before it
// writes would fault each twice: once to map the shared zero page, once to copy it). Pages no one
// writes cost nothing until read (a read maps the shared zero page). Where the writes spread over most
// of a large table that is wholly fresh, it is also marked for transparent huge pages (madvise
// MADV_HUGEPAGE, what torch's allocator does under THP_MEM_ALLOC_ENABLE): the kernel then zeroes 2 MiB
// per fault.
//
// Which of these pays is decided by the caller's map of the pages it will write: small pages when few
// are written, huge ones when many are, at::zeros when neither saves half of its cost. Memory reused
// from glibc's heap can be resident in part, in many short runs (what an earlier call of this left
// behind): handing those back would take a system call per run, so there too this is at::zeros, which
// leaves the memory resident and the next call's at::zeros a memset, as torch's is. The result is
// at::zeros': same allocator and storage, same values. Only glibc's allocator is trusted to hand out
// private anonymous memory, where MADV_DONTNEED means zeros: under any other (a preloaded jemalloc,
// tcmalloc), and for tensors under 4 MiB, this is at::zeros.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/FunctionRef.h>

#include <cstdint>

#include "kwker/pages_written.h"

namespace kwker::adapter {

// The caller's kernel, answering which pages of the tensor it will write.
using PagesWritten = c10::function_ref<int64_t(const PagesWrittenQuery& query)>;

at::Tensor zeros_for_sparse_writes(at::IntArrayRef sizes, const at::TensorOptions& options, PagesWritten pages_written);

// at::empty for a kernel that writes the tensor from its start on (an output): from 32 MiB on, where
// glibc maps the request by itself unless a free heap block holds it, a fresh mapping (no page resident)
// is marked for transparent huge pages before the first write, so that the writes fault in 2 MiB at a
// time (one fault, one kernel zeroing) instead of 4 KiB. Otherwise, or under another allocator, plain
// at::empty.
at::Tensor empty_for_dense_writes(at::IntArrayRef sizes, const at::TensorOptions& options);

}  // namespace kwker::adapter
