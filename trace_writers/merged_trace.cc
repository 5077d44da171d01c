#include "trace_writers/merged_trace.h"

#include <cstdio>

#include "trace_writers/json_text.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_reader.h"

namespace podscope::pod_capture {
namespace {

using tensorflow::profiler::XPlane;
using tensorflow::profiler::XStat;

constexpr size_t kFlushBytes = 1 << 20;

void append_double(std::string& out, double value) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", value);
  out += buf;
}

void append_stat_value(std::string& out, const XPlane& plane, const XStat& stat) {
  switch (stat.value_case()) {
    case XStat::kDoubleValue: append_double(out, stat.double_value()); break;
    case XStat::kUint64Value: out += std::to_string(stat.uint64_value()); break;
    case XStat::kInt64Value: out += std::to_string(stat.int64_value()); break;
    case XStat::kStrValue: append_json_string(out, stat.str_value()); break;
    case XStat::kCompressedStrValue: append_json_string(out, xspace::inflated_str_value(stat).value_or("")); break;
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
  out += "}}";
}

}  // namespace

JsonTraceWriter::JsonTraceWriter(run_directory::StreamedFile& out, std::optional<int64_t> time_base_ns,
                                 std::optional<TraceWindow> window)
    : out_(out), time_base_ns_(time_base_ns), window_(window) {
  buffer_ = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
}

void JsonTraceWriter::append_event_separator() {
  buffer_ += first_event_ ? "\n" : ",\n";
  first_event_ = false;
}

void JsonTraceWriter::flush_if_large() {
  if (buffer_.size() < kFlushBytes) return;
  out_.write(buffer_);
  buffer_.clear();
}

void JsonTraceWriter::add_plane(const PlaneOrigin& origin, const XPlane& plane) {
  ++pid_;
  append_event_separator();
  append_metadata_event(buffer_, "process_name", pid_, 0, std::string(origin.host_name) + " " + plane.name());
  const xspace::XPlaneReader reader(plane);
  for (const auto& line : plane.lines()) {
    const bool counters = line.name() == xspace::kCountersLineName;
    if (!counters) {
      append_event_separator();
      append_metadata_event(buffer_, "thread_name", pid_, line.id(),
                            line.display_name().empty() ? line.name() : line.display_name());
    }
    reader.for_each_event(line, [&](const xspace::XEventView& event) {
      const int64_t start_ns = event.start_ns() - origin.clock_offset_ns;
      const int64_t duration_ns = event.duration_ns();
      if (window_ && !window_->overlaps(start_ns, start_ns + duration_ns)) return;
      if (!time_base_ns_) time_base_ns_ = start_ns;
      append_event_separator();
      if (counters) {
        buffer_ += "{\"ph\":\"C\",\"pid\":" + std::to_string(pid_) + ",\"name\":";
        append_json_string(buffer_, event.name());
        buffer_ += ",\"ts\":";
        append_ns_as_us(buffer_, start_ns - *time_base_ns_);
        buffer_ += ",\"args\":{\"value\":";
        append_double(buffer_, event.double_stat(xspace::kCounterValueStat).value_or(0.0));
        buffer_ += "}}";
      } else {
        buffer_ +=
            "{\"ph\":\"X\",\"pid\":" + std::to_string(pid_) + ",\"tid\":" + std::to_string(line.id()) + ",\"name\":";
        append_json_string(buffer_, event.name());
        buffer_ += ",\"ts\":";
        append_ns_as_us(buffer_, start_ns - *time_base_ns_);
        buffer_ += ",\"dur\":";
        append_ns_as_us(buffer_, duration_ns);
        append_args(buffer_, plane, event.proto());
        buffer_ += "}";
      }
      flush_if_large();
    });
  }
}

void JsonTraceWriter::finish() {
  buffer_ += "\n],\"otherData\":{\"clock\":\"coordinator\",\"time_base_ns\":";
  buffer_ += std::to_string(time_base_ns_.value_or(0));
  buffer_ += "}}\n";
  out_.write(buffer_);
  buffer_.clear();
}

}  // namespace podscope::pod_capture
