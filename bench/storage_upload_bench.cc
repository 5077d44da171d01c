// Uploads a local file as one object through the storage interface, as an agent uploads a capture: read a megabyte
// at a time into the store's writer, which sends parts of bounded size. Prints the wall time, the throughput and the
// process's peak resident memory above what it held before the upload. Driven by storage_upload_bench.py, which
// starts the server and times boto3's upload_file (and rclone, where installed) on the same file in the same run.
// Usage: storage_upload_bench FILE STORE_URL OBJECT_NAME
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "storage/store.h"

namespace {

// A line of /proc/self/status, in KiB.
long status_kib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: storage_upload_bench FILE STORE_URL OBJECT_NAME\n";
    return 2;
  }
  auto location = podscope::storage::parse_location(argv[2]);
  if (!location.ok()) {
    std::cerr << location.status() << "\n";
    return 2;
  }
  auto store = podscope::storage::open_store(*location);
  if (!store.ok()) {
    std::cerr << store.status() << "\n";
    return 1;
  }
  const long rss_before = status_kib("VmRSS");
  const auto start = std::chrono::steady_clock::now();
  auto writer = (*store)->create(argv[3], podscope::storage::LocalDurability::kRebuildable);
  if (!writer.ok()) {
    std::cerr << writer.status() << "\n";
    return 1;
  }
  std::FILE* in = std::fopen(argv[1], "rb");
  if (in == nullptr) {
    std::cerr << "cannot open " << argv[1] << "\n";
    return 1;
  }
  std::vector<char> buffer(1 << 20);
  absl::Status status;
  while (status.ok()) {
    const size_t n = std::fread(buffer.data(), 1, buffer.size(), in);
    if (n == 0) break;
    status = (*writer)->write(std::string_view(buffer.data(), n));
  }
  std::fclose(in);
  if (status.ok()) status = (*writer)->commit();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!status.ok()) {
    std::cerr << status << "\n";
    return 1;
  }
  const double mib = static_cast<double>((*writer)->bytes_written()) / (1 << 20);
  std::printf("podscope: %.0f MiB in %.2f s (%.1f MiB/s), peak RSS %.1f MiB above the %.1f MiB before\n", mib, seconds,
              mib / seconds, (status_kib("VmHWM") - rss_before) / 1024.0, rss_before / 1024.0);
  return 0;
}
