// What a daemon's transport security looks like from Prometheus: podscope_plaintext_listen{address} 1 (and one
// warning at start) when it listens in plaintext on an address other hosts can reach, and, with TLS on,
// podscope_tls_cert_expiry_seconds: seconds until the served certificate's notAfter, re-read when its file
// changes (checked every tls_refresh_s, as gRPC re-reads it), and podscope_tls_handshakes_failed_total: callers whose
// handshake failed, each logged (at most one line a second) from gRPC's own log, which this takes over.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "absl/status/statusor.h"
#include "tls/tls_config.h"

namespace podscope::tls {

// The notAfter of the first certificate in the PEM file at `path`, in seconds since the Unix epoch.
absl::StatusOr<int64_t> certificate_not_after_unix_s(const std::string& path);

class TlsMetrics {
 public:
  // `listen` is the daemon's bound gRPC address.
  TlsMetrics(const TlsConfig& config, const std::string& listen, prometheus::Registry& registry,
             const prometheus::Labels& labels);
  ~TlsMetrics();
  TlsMetrics(const TlsMetrics&) = delete;
  TlsMetrics& operator=(const TlsMetrics&) = delete;

 private:
  void watch_certificate();
  void update_expiry();

  std::string cert_path_;
  std::chrono::seconds refresh_;
  prometheus::Gauge* expiry_ = nullptr;
  prometheus::Counter* handshakes_failed_ = nullptr;
  std::filesystem::file_time_type cert_mtime_{};
  int64_t not_after_unix_s_ = 0;
  bool have_not_after_ = false;
  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread watcher_;
};

}  // namespace podscope::tls
