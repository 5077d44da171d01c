// The name TensorFlow's profiler client gives a run (and its session): the local time as
// YYYY_MM_DD_HH_MM_SS. Every place that names a run without being told a name uses it, so a run directory
// the agent writes and one the CLI or coordinator writes for the same instant look alike.
#pragma once

#include <cstdint>
#include <string>

namespace podscope {

std::string tf_run_name(int64_t unix_ns);

}  // namespace podscope
