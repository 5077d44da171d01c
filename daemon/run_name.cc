#include "daemon/run_name.h"

#include <ctime>

namespace podscope {

std::string tf_run_name(int64_t unix_ns) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ns / 1'000'000'000);
  std::tm local{};
  localtime_r(&seconds, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y_%m_%d_%H_%M_%S", &local);
  return text;
}

}  // namespace podscope
