// The Kineto converter on arbitrary text: parse and build, a status for every input, no crash, no allocation beyond
// what the text can hold. Seeds: tests/data/kineto and ../shared/testdata/kineto (the real traces as gzip bytes,
// which must fail cleanly and mutate into anything).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kineto/trace_converter.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto space = podscope::kineto::convert_kineto_json(std::string_view(reinterpret_cast<const char*>(data), size));
  return space.ok() && space->planes_size() < 0 ? 1 : 0;
}
