#include "daemon/heap.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdio>

namespace podscope {
namespace {

// Resident pages of this process, from /proc/self/statm; 0 when unreadable.
size_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long size = 0, resident = 0;
  const int read = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return read == 2 ? resident * static_cast<size_t>(sysconf(_SC_PAGESIZE)) : 0;
}

}  // namespace

size_t return_free_heap() {
  const size_t before = resident_bytes();
  malloc_trim(0);
  const size_t after = resident_bytes();
  return before > after ? before - after : 0;
}

void keep_heap_thresholds() {
  constexpr int kDefaultThresholdBytes = 128 << 10;
  mallopt(M_MMAP_THRESHOLD, kDefaultThresholdBytes);
  mallopt(M_TRIM_THRESHOLD, kDefaultThresholdBytes);
}

void keep_freed_heap_for_reuse() {
  constexpr int kLargestHeapBlock = 32 << 20;  // glibc's largest mmap threshold
  mallopt(M_MMAP_THRESHOLD, kLargestHeapBlock);
  // The heap's top goes back to the system once 16 MiB of it are free: kept longer, it added to the peak of what
  // the CLI builds after the analysis (the pod traces, larger blocks that are mapped apart), 10 % on a pod.
  mallopt(M_TRIM_THRESHOLD, kLargestHeapBlock / 2);
}

}  // namespace podscope
