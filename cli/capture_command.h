// `podscope capture`: capture_tpu_profile's flags, defaults and absl flag syntax (booleans as `--X`, `--noX`,
// `--X=false`), fanned out by this process or by a coordinator; with --monitoring_level 1|2 it only monitors.
#pragma once

#include <cstdint>
#include <string>

#include "pod_capture/capture.h"
#include "tls/tls_config.h"

namespace CLI {
class App;
}

namespace podscope::cli {

struct CaptureFlags {
  std::string service_addr;
  std::string workers_list;
  std::string coordinator;
  std::string logdir;
  int64_t duration_ms = pod_capture::kDefaultCaptureDurationMs;
  int64_t last_ms = 0;  // > 0: the last N ms the agents' flight recorders hold
  int num_tracing_attempts = 3;
  bool include_dataset_ops = true;
  int host_tracer_level = 2;
  int device_tracer_level = 1;
  int python_tracer_level = 0;
  int64_t delay_ms = 0;
  int monitoring_level = 0;
  int num_queries = 100;
  bool display_timestamp = true;
  bool quiet = false;
  tls::TlsConfig tls;  // --tls_cert, --tls_key, --tls_ca
};

void add_capture_flags(CLI::App& command, CaptureFlags& flags);
// Returns the exit code: 0 all hosts, 3 some, 1 none, 2 usage error.
int run_capture_command(const CaptureFlags& flags);

}  // namespace podscope::cli
