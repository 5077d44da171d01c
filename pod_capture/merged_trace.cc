#include "pod_capture/merged_trace.h"

#include <zlib.h>

#include <cstdio>
#include <stdexcept>

#include "pod_capture/json_text.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_reader.h"

namespace podscope::pod_capture {
namespace {

using tensorflow::profiler::XPlane;
using tensorflow::profiler::XStat;

void append_stat_value(std::string& out, const XPlane& plane, const XStat& stat) {
  switch (stat.value_case()) {
    case XStat::kDoubleValue: {
      char buf[40];
      std::snprintf(buf, sizeof buf, "%.17g", stat.double_value());
      out += buf;
      break;
    }
    case XStat::kUint64Value: out += std::to_string(stat.uint64_value()); break;
    case XStat::kInt64Value: out += std::to_string(stat.int64_value()); break;
    case XStat::kStrValue: append_json_string(out, stat.str_value()); break;
    case XStat::kBytesValue: {
      // Binary payloads are summarized by size; a trace viewer cannot show them anyway.
      std::string summary = std::to_string(stat.bytes_value().size());
      summary.append(" bytes");
      append_json_string(out, summary);
      break;
    }
    case XStat::kRefValue: {
      auto it = plane.stat_metadata().find(static_cast<int64_t>(stat.ref_value()));
      append_json_string(out, it == plane.stat_metadata().end() ? std::string() : it->second.name());
      break;
    }
    case XStat::VALUE_NOT_SET: out += "null"; break;
  }
}

void append_args(std::string& out, const XPlane& plane, const tensorflow::profiler::XEvent& event) {
  out += ",\"args\":{";
  bool first = true;
  auto add = [&](const XStat& stat) {
    auto it = plane.stat_metadata().find(stat.metadata_id());
    if (it == plane.stat_metadata().end()) return;
    if (!first) out.push_back(',');
    first = false;
    append_json_string(out, it->second.name());
    out.push_back(':');
    append_stat_value(out, plane, stat);
  };
  auto meta = plane.event_metadata().find(event.metadata_id());
  if (meta != plane.event_metadata().end()) {
    for (const auto& stat : meta->second.stats()) add(stat);
  }
  for (const auto& stat : event.stats()) add(stat);
  out.push_back('}');
}

void append_metadata_event(std::string& out, std::string_view what, int pid, int64_t tid, std::string_view name) {
  out += "{\"ph\":\"M\",\"name\":\"";
  out += what;
  out += "\",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid) + ",\"args\":{\"name\":";
  append_json_string(out, name);
  out += "}},\n";
}

}  // namespace

std::string merged_trace_json(const std::vector<HostTrace>& hosts) {
  std::string out = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  int pid = 0;
  for (const auto& host : hosts) {
    if (host.space == nullptr) continue;
    for (const auto& plane : host.space->planes()) {
      ++pid;
      append_metadata_event(out, "process_name", pid, 0, host.host_name + " " + plane.name());
      const xspace::XPlaneReader reader(plane);
      for (const auto& line : plane.lines()) {
        const bool counters = line.name() == xspace::kCountersLineName;
        if (!counters) {
          append_metadata_event(out, "thread_name", pid, line.id(),
                                line.display_name().empty() ? line.name() : line.display_name());
        }
        reader.for_each_event(line, [&](const xspace::XEventView& event) {
          const int64_t start_ns = event.start_ns() - host.clock_offset_ns;
          if (counters) {
            out += "{\"ph\":\"C\",\"pid\":" + std::to_string(pid) + ",\"name\":";
            append_json_string(out, event.name());
            out += ",\"ts\":";
            append_ns_as_us(out, start_ns);
            out += ",\"args\":{\"value\":";
            const auto value = event.double_stat(xspace::kCounterValueStat);
            char buf[40];
            std::snprintf(buf, sizeof buf, "%.17g", value.value_or(0.0));
            out += buf;
            out += "}},\n";
            return;
          }
          out += "{\"ph\":\"X\",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(line.id()) +
                 ",\"name\":";
          append_json_string(out, event.name());
          out += ",\"ts\":";
          append_ns_as_us(out, start_ns);
          out += ",\"dur\":";
          append_ns_as_us(out, event.duration_ns());
          append_args(out, plane, event.proto());
          out += "},\n";
        });
      }
    }
  }
  if (out.back() == '\n' && out[out.size() - 2] == ',') out.erase(out.size() - 2, 1);
  out += "]}\n";
  return out;
}

std::string gzip(const std::string& data) {
  z_stream stream{};
  // windowBits 15 + 16 selects the gzip wrapper.
  if (deflateInit2(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("deflateInit2 failed");
  }
  std::string out;
  out.resize(deflateBound(&stream, data.size()));
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&stream, Z_FINISH);
  deflateEnd(&stream);
  if (rc != Z_STREAM_END) throw std::runtime_error("gzip: deflate did not finish");
  out.resize(stream.total_out);
  return out;
}

}  // namespace podscope::pod_capture
