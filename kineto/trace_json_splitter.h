// Cuts a Chrome trace's JSON text — an object whose `traceEvents` array holds the events — into pieces that a JSON
// parser takes whole, as the text arrives in chunks of any size (a file read, or inflated, a chunk at a time):
// windows of whole events, and the object's few other fields that the reader asks for. Only the event being cut and
// the events not yet handed on are held, never the text: a trace of gigabytes is parsed in a few MiB. The cuts follow
// JSON's lexical structure (strings and their escapes, nesting depth, the commas between values); the syntax inside
// each piece is the parser's to check. Fields nobody asked for are skipped as they pass, whatever their size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace podscope::kineto {

// The longest single event, and the most text of the fields kept besides the events, that a trace may hold: past
// it the trace is refused with an error naming the bound, so one piece can never hold the whole text.
inline constexpr size_t kMaxTracePieceBytes = size_t{16} << 20;

class TraceJsonSplitter {
 public:
  // Takes one window: whole events, in the trace's order, as the text of a JSON array (`[e1,e2,...]`) followed by at
  // least `kWindowPadding` readable bytes (simdjson's padding), valid until the sink returns.
  using WindowSink = std::function<absl::Status(std::string_view events)>;
  static constexpr size_t kWindowPadding = 64;

  // `kept_fields`: the top-level fields (besides traceEvents) whose text finish() returns, by their names as written.
  TraceJsonSplitter(WindowSink sink, std::vector<std::string> kept_fields);

  // The next piece of the text. The events it completes are handed to the sink before it returns. An error (text
  // that is not a JSON object, a piece past kMaxTracePieceBytes, the sink's own) is final.
  absl::Status feed(std::string_view text);

  // After the last piece: the top-level object's kept fields as a JSON object's text, each traceEvents array among
  // them empty (`"traceEvents":[]`: its events went to the sink), followed by kWindowPadding readable bytes. An error
  // when the text ended before the object did.
  absl::StatusOr<std::string_view> finish();

  // Whether the text so far has reached a `traceEvents` array of the top-level object: what makes it a Chrome trace.
  bool reached_events() const { return reached_events_; }

 private:
  enum class Where : uint8_t {
    kBeforeObject,
    kBeforeFirstKey,
    kBeforeKey,
    kKey,
    kBeforeColon,
    kBeforeValue,
    kValue,
    kBeforeFirstElement,
    kBeforeElement,
    kElement,
    kAfterValue,
    kAfterObject,
  };

  void scan();
  size_t scan_element(size_t i);
  size_t scan_block(size_t i);
  size_t scan_bytes(size_t i, size_t limit);
  void end_value(size_t end);
  void end_element(size_t end);
  absl::Status emit_window();
  void compact();
  void fail(std::string_view what, size_t at);

  WindowSink sink_;
  std::vector<std::string> kept_fields_;
  absl::Status error_;
  std::string pending_;   // the text not yet handed on, from the earliest byte still needed
  uint64_t dropped_ = 0;  // bytes of the text before pending_
  size_t pos_ = 0;        // the next byte of pending_ to scan
  Where where_ = Where::kBeforeObject;
  bool in_string_ = false;
  bool escaped_ = false;
  uint64_t depth_ = 0;  // nesting inside the current value or element
  std::string key_;     // the current top-level key, as written (escapes kept)
  bool keep_value_ = false;
  bool events_value_ = false;
  size_t value_start_ = 0;
  size_t element_start_ = 0;
  size_t window_start_ = SIZE_MAX;  // the first event not handed on yet, when there is one
  size_t window_end_ = 0;           // the end of the last whole event
  std::string window_;
  std::string fields_ = "{";  // the kept fields, `"key":value,` each
  bool reached_events_ = false;
};

// Whether `text`, the first bytes of a file's text (not necessarily all of it), is a Chrome trace's: a JSON object
// that reaches its `traceEvents` array within them.
bool is_chrome_trace_text(std::string_view text);

}  // namespace podscope::kineto
