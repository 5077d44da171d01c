#include "tls/tls_metrics.h"

#include <openssl/pem.h>
#include <openssl/x509.h>

#include <grpc/support/log.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string_view>

#include "daemon/log.h"

namespace podscope::tls {
namespace {

std::atomic<prometheus::Counter*> failed_handshakes{nullptr};
std::atomic<int64_t> failed_handshake_logged_s{-1};

// gRPC reports a failed TLS handshake (no certificate, another CA, an expired one, plaintext on the TLS port) only
// in its own log, at INFO: those lines become the daemon's warnings (at most one a second, each one counted), gRPC's
// errors its errors, and its other lines are dropped.
void forward_grpc_log(gpr_log_func_args* args) {
  const std::string_view message = args->message;
  if (message.find("Handshake failed") != std::string_view::npos) {
    if (prometheus::Counter* counter = failed_handshakes.load()) counter->Increment();
    const int64_t now_s =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
    if (failed_handshake_logged_s.exchange(now_s) != now_s) {
      PODSCOPE_LOG(kWarning) << "TLS handshake failed: " << message
                             << " (podscope_tls_handshakes_failed_total counts them all)";
    }
    return;
  }
  if (args->severity == GPR_LOG_SEVERITY_ERROR) PODSCOPE_LOG(kError) << "gRPC: " << message;
}

}  // namespace

absl::StatusOr<int64_t> certificate_not_after_unix_s(const std::string& path) {
  FILE* file = std::fopen(path.c_str(), "r");
  if (file == nullptr) return absl::NotFoundError("tls_cert \"" + path + "\": cannot open");
  X509* cert = PEM_read_X509(file, nullptr, nullptr, nullptr);
  std::fclose(file);
  if (cert == nullptr) return absl::InvalidArgumentError("tls_cert \"" + path + "\": no PEM certificate");
  std::tm not_after{};
  const bool converted = ASN1_TIME_to_tm(X509_get0_notAfter(cert), &not_after) == 1;
  X509_free(cert);
  if (!converted) return absl::InvalidArgumentError("tls_cert \"" + path + "\": unreadable notAfter");
  return static_cast<int64_t>(timegm(&not_after));
}

TlsMetrics::TlsMetrics(const TlsConfig& config, const std::string& listen, prometheus::Registry& registry,
                       const prometheus::Labels& labels)
    : cert_path_(config.cert), refresh_(config.refresh_s) {
  if (!config.serves_tls()) {
    if (is_loopback_address(listen)) return;
    PODSCOPE_LOG(kWarning) << "gRPC listens in plaintext on " << listen
                           << ": anyone who reaches it may capture; set tls_cert, tls_key and tls_client_ca";
    prometheus::Labels with_address = labels;
    with_address["address"] = listen;
    prometheus::BuildGauge()
        .Name("podscope_plaintext_listen")
        .Help("1 for a gRPC address served in plaintext that other hosts can reach")
        .Register(registry)
        .Add(with_address)
        .Set(1);
    return;
  }
  handshakes_failed_ = &prometheus::BuildCounter()
                            .Name("podscope_tls_handshakes_failed_total")
                            .Help("TLS handshakes of callers that failed (no or an untrusted certificate, not TLS)")
                            .Labels(labels)
                            .Register(registry)
                            .Add({});
  failed_handshakes = handshakes_failed_;
  gpr_set_log_function(forward_grpc_log);
  gpr_set_log_verbosity(GPR_LOG_SEVERITY_INFO);
  expiry_ = &prometheus::BuildGauge()
                 .Name("podscope_tls_cert_expiry_seconds")
                 .Help("Seconds until the served TLS certificate's notAfter (negative: expired)")
                 .Labels(labels)
                 .Register(registry)
                 .Add({});
  update_expiry();
  watcher_ = std::thread([this] { watch_certificate(); });
}

TlsMetrics::~TlsMetrics() {
  prometheus::Counter* mine = handshakes_failed_;
  failed_handshakes.compare_exchange_strong(mine, nullptr);
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

void TlsMetrics::watch_certificate() {
  pthread_setname_np(pthread_self(), "podscope-tlscert");
  std::unique_lock lock(mu_);
  while (!stop_cv_.wait_for(lock, refresh_, [this] { return stopping_; })) update_expiry();
}

// Re-reads notAfter when the file changed since the last read; the gauge counts down either way.
void TlsMetrics::update_expiry() {
  std::error_code error;
  const std::filesystem::file_time_type mtime = std::filesystem::last_write_time(cert_path_, error);
  if (!error && (!have_not_after_ || mtime != cert_mtime_)) {
    if (absl::StatusOr<int64_t> not_after = certificate_not_after_unix_s(cert_path_); not_after.ok()) {
      not_after_unix_s_ = *not_after;
      have_not_after_ = true;
      cert_mtime_ = mtime;
    } else {
      PODSCOPE_LOG(kWarning) << not_after.status().message();
    }
  }
  if (!have_not_after_) return;
  const int64_t now_s =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  expiry_->Set(static_cast<double>(not_after_unix_s_ - now_s));
}

}  // namespace podscope::tls
