// The heap's free memory, handed back to the system. glibc keeps what a program frees for reuse, in the arena of
// the thread that freed it, and gives pages back only from the top of each heap: after a large answer has been
// built and sent, the daemon would otherwise keep its peak for good.
#pragma once

#include <cstddef>

namespace podscope {

// Hands the free pages of every arena back to the system; returns how much resident memory that gave back (bytes,
// 0 when none). Costs a walk over the heap: call it after large frees, not per request.
size_t return_free_heap();

// Keeps glibc's default thresholds fixed: a block of 128 KiB or more is mapped on its own, and a heap whose free
// top passes 128 KiB gives it back. glibc otherwise raises both after a large block is freed (up to 32 and 64 MiB):
// a capture's build frees lists of many MiB on the thread that built it, the next build's lists then come from
// that thread's heap, and the free top of a thread's heap is one thing return_free_heap() cannot give back (tens of
// MiB kept after a few windows). Call once at start, before the threads.
void keep_heap_thresholds();

// For a short-lived process that builds large tables, frees them and builds others (the CLI's analysis): blocks of
// up to 32 MiB come from the heap, and what is freed stays there for the next block. By default glibc maps each
// large block afresh and unmaps it when freed, so every table grown or made again faulted its pages in anew (on a
// fast trainer's capture, 3 in 10 of the analysis' page faults). Free memory stays with the process until it
// exits or calls return_free_heap: daemons do not call this.
void keep_freed_heap_for_reuse();

}  // namespace podscope
