#include "analysis/steps/op_classifier.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "proto/xspace/names.h"

namespace podscope::analysis {
namespace {

// ASCII lower case, as std::tolower in the C locale, without its call per character: kernel names are long and
// every distinct one is searched for a dozen words.
char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (lower(s[i]) != prefix[i]) return false;
  }
  return true;
}

bool contains_nocase(std::string_view s, std::string_view needle) {
  if (needle.empty()) return true;
  if (needle.size() > s.size()) return false;
  for (size_t i = 0; i + needle.size() <= s.size(); ++i) {
    if (lower(s[i]) == needle.front() && starts_with_nocase(s.substr(i), needle)) return true;
  }
  return false;
}

// `name` is `base` or `base.N` (an XLA instance suffix).
bool is_instance_of(std::string_view name, std::string_view base) { return strip_instance_suffix(name) == base; }

// XLA collectives, matched as prefixes ("all-reduce-start", "all-reduce.3", "reduce-scatter.1").
constexpr std::array<std::string_view, 6> kCollectivePrefixes = {"all-reduce", "allreduce",  "reduce-scatter",
                                                                 "all-gather", "all-to-all", "collective-permute"};
// Names of high-flops work: XLA ops and GPU kernels that run on matrix units.
constexpr std::array<std::string_view, 4> kHighFlopsPrefixes = {"convolution", "fusion", "dot", "custom-call"};
constexpr std::array<std::string_view, 7> kHighFlopsSubstrings = {"gemm",   "convolve", "cutlass", "xmma",
                                                                  "matmul", "einsum",   "cudnn"};

}  // namespace

std::string_view strip_instance_suffix(std::string_view name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string_view::npos || dot + 1 == name.size()) return name;
  for (size_t i = dot + 1; i < name.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return name;
  }
  return name.substr(0, dot);
}

bool is_op_line(PlaneKind kind, std::string_view line_name) {
  switch (kind) {
    case PlaneKind::kGpu: return line_name.substr(0, 8) == "Stream #" || line_name == xspace::kHostCollectivesLineName;
    case PlaneKind::kTpu: return line_name == xspace::kXlaOpsLineName;
    case PlaneKind::kCustom:
      return line_name != xspace::kStepsLineName && line_name != xspace::kCountersLineName &&
             line_name != xspace::kInputPipelineLineName;
  }
  return false;
}

OpKind classify_op(std::string_view name, std::string_view line_name, bool has_flops) {
  // GPU memory copies: CUPTI names ("Memcpy HtoD"), TF names ("MemcpyH2D"), or the stream's kind.
  if (contains_nocase(name, "memcpyh2d") || contains_nocase(name, "htod") ||
      contains_nocase(line_name, "(memcpyh2d)")) {
    return OpKind::kHostToDevice;
  }
  if (contains_nocase(name, "memcpyd2h") || contains_nocase(name, "dtoh") ||
      contains_nocase(line_name, "(memcpyd2h)")) {
    return OpKind::kDeviceToHost;
  }
  // A memset writes device memory, as a device-to-device copy does (HTA counts both as memory, not compute).
  if (contains_nocase(name, "memcpyd2d") || contains_nocase(name, "dtod") || contains_nocase(name, "memcpyp2p") ||
      contains_nocase(name, "ptop") || contains_nocase(line_name, "(memcpyd2d)") ||
      contains_nocase(line_name, "(memcpyp2p)") || starts_with_nocase(name, "memset")) {
    return OpKind::kDeviceToDevice;
  }
  if (starts_with_nocase(name, "nccl")) return OpKind::kCollective;  // ncclKernel_*, ncclDevKernel_*
  for (std::string_view prefix : kCollectivePrefixes) {
    if (starts_with_nocase(name, prefix)) return OpKind::kCollective;
  }
  if (starts_with_nocase(name, xspace::kRecvDoneEventName) || is_instance_of(name, "recv")) {
    return OpKind::kRecvDone;
  }
  if (is_instance_of(name, xspace::kSendEventName) || starts_with_nocase(name, "send-done")) return OpKind::kSend;
  if (starts_with_nocase(name, xspace::kInfeedEventName)) return OpKind::kInfeed;
  if (starts_with_nocase(name, xspace::kOutfeedEventName)) return OpKind::kOutfeed;
  if (has_flops) return OpKind::kHighFlopsCompute;
  for (std::string_view prefix : kHighFlopsPrefixes) {
    if (starts_with_nocase(name, prefix)) return OpKind::kHighFlopsCompute;
  }
  for (std::string_view part : kHighFlopsSubstrings) {
    if (contains_nocase(name, part)) return OpKind::kHighFlopsCompute;
  }
  return OpKind::kLowFlopsCompute;
}

std::string_view op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::kCollective: return "collective";
    case OpKind::kInfeed: return "infeed";
    case OpKind::kOutfeed: return "outfeed";
    case OpKind::kSend: return "send";
    case OpKind::kRecvDone: return "recv-done";
    case OpKind::kHighFlopsCompute: return "high-flops compute";
    case OpKind::kLowFlopsCompute: return "low-flops compute";
    case OpKind::kHostToDevice: return "host to device";
    case OpKind::kDeviceToHost: return "device to host";
    case OpKind::kDeviceToDevice: return "device to device";
  }
  return "unknown";
}

}  // namespace podscope::analysis
