// The YAML config loader on arbitrary documents: every document gives OK or an error status naming the line, never
// an abort (yaml-cpp throws on shapes it did not expect). Seeds: configs/.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/options.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // One option of each kind, named as the agent's are, so real config files are meaningful seeds.
  std::string listen = "0.0.0.0:8466";
  int64_t sample_interval_ms = 1000;
  bool verbose = false;
  std::vector<std::string> upstream;
  podscope::OptionSet options;
  options.add_string("listen", &listen, "address");
  options.add_int("sample_interval_ms", &sample_interval_ms, "period", 10, 60000);
  options.add_bool("verbose", &verbose, "chatty");
  options.add_list("upstream", &upstream, "servers");
  (void)options.apply_yaml(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.yaml");
  return 0;
}
