// Cutting a Chrome trace's text into windows of whole events, whatever the pieces it arrives in; what it refuses;
// and telling a Chrome trace by the first bytes of its text.
#include "kineto/trace_json_splitter.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace podscope::kineto {
namespace {

struct Split {
  std::vector<std::string> events;  // each window's text, without its brackets, joined
  std::string fields;
  absl::Status status;
};

// Splits `text` fed in pieces of `piece` bytes.
Split split(std::string_view text, size_t piece, std::vector<std::string> kept = {"baseTimeNanoseconds"}) {
  Split out;
  TraceJsonSplitter splitter(
      [&](std::string_view window) {
        EXPECT_EQ(window.front(), '[');
        EXPECT_EQ(window.back(), ']');
        out.events.emplace_back(window.substr(1, window.size() - 2));
        return absl::OkStatus();
      },
      std::move(kept));
  for (size_t at = 0; at < text.size() && out.status.ok(); at += piece) {
    out.status = splitter.feed(text.substr(at, piece));
  }
  if (!out.status.ok()) return out;
  absl::StatusOr<std::string_view> fields = splitter.finish();
  if (fields.ok()) out.fields = std::string(*fields);
  else out.status = fields.status();
  return out;
}

// The windows' events, without the whitespace between them (which windows leave out where they are cut).
std::string joined(const std::vector<std::string>& windows) {
  std::string all;
  for (const std::string& w : windows) all += (all.empty() ? "" : ",") + w;
  std::erase_if(all, [](char c) { return c == ' ' || c == '\n'; });
  return all;
}

constexpr std::string_view kTrace = R"(
  {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "GPU \"0\" [x]"}],
   "traceEvents": [
    {"ph": "X", "name": "a,b}]", "args": {"x": [1, {"y": "\\"}]}},
    {"ph": "X", "name": "\u00e9\\\"", "ts": 1},
    {"ph": "M", "name": "thread_name"}
   ],
   "baseTimeNanoseconds": 1700000000000000000, "traceName": "t {[\""}
  trailing text is not read)";

TEST(TraceJsonSplitter, EveryPieceSizeGivesTheSameEventsAndFields) {
  const Split whole = split(kTrace, kTrace.size());
  ASSERT_TRUE(whole.status.ok()) << whole.status;
  EXPECT_EQ(joined(whole.events),
            R"({"ph":"X","name":"a,b}]","args":{"x":[1,{"y":"\\"}]}},{"ph":"X","name":"\u00e9\\\"","ts":1},)"
            R"({"ph":"M","name":"thread_name"})");
  EXPECT_EQ(whole.fields, R"({"traceEvents":[],"baseTimeNanoseconds":1700000000000000000})");
  for (size_t piece = 1; piece < kTrace.size(); ++piece) {
    const Split pieces = split(kTrace, piece);
    ASSERT_TRUE(pieces.status.ok()) << piece << ": " << pieces.status;
    EXPECT_EQ(joined(pieces.events), joined(whole.events)) << piece;
    EXPECT_EQ(pieces.fields, whole.fields) << piece;
  }
}

// Random events whose strings hold brackets, commas, quotes and backslashes anywhere, some events longer than the
// splitter's 64-byte blocks: every piece size cuts them where a whole-text parse does.
TEST(TraceJsonSplitter, RandomEventsCutAlikeWhateverThePieces) {
  std::mt19937 random(7);
  const std::string alphabet = "ab {}[],:\"\\/\u00e9 ";
  auto random_string = [&](size_t max) {
    std::string out;
    for (size_t n = random() % max; n > 0; --n) {
      const char c = alphabet[random() % alphabet.size()];
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    return out;
  };
  for (int trace = 0; trace < 20; ++trace) {
    std::vector<std::string> events;
    std::string text = R"({"skipped": {"a": [")" + random_string(200) + R"("]}, "traceEvents": [)";
    for (int i = 0, n = static_cast<int>(random() % 40); i < n; ++i) {
      events.push_back(R"({"name":")" + random_string(150) + R"(","args":{"x":[")" + random_string(20) + R"(",{}]}})");
      text += (i == 0 ? "" : ",\n  ") + events.back();
    }
    text += R"(], "baseTimeNanoseconds": 3})";
    std::string expected;
    for (const std::string& e : events) expected += (expected.empty() ? "" : ",") + e;
    std::erase_if(expected, [](char c) { return c == ' ' || c == '\n'; });
    for (const size_t piece : {size_t{1}, size_t{2}, size_t{63}, size_t{64}, size_t{65}, size_t{1000}, text.size()}) {
      const Split s = split(text, piece);
      ASSERT_TRUE(s.status.ok()) << piece << ": " << s.status << "\n" << text;
      EXPECT_EQ(joined(s.events), expected) << piece << "\n" << text;
      EXPECT_EQ(s.fields, R"({"traceEvents":[],"baseTimeNanoseconds":3})") << piece;
    }
  }
}

TEST(TraceJsonSplitter, TextThatIsNoTraceObjectIsRefusedWhereItBreaks) {
  for (const auto& [text, expected] : std::vector<std::pair<std::string, std::string>>{
           {"", "holds no JSON object"},
           {"[1, 2]", "not a JSON object at byte 0"},
           {R"({"traceEvents": [{"a": 1},,{}]})", "expected an event at byte 26"},
           {R"({"traceEvents": [{"a": 1},]})", "expected an event"},
           {R"({"traceEvents": [{"a": 1}}]})", "unbalanced '}'"},
           {R"({"traceEvents": [{"a": 1}] "x": 1})", "expected ',' or '}'"},
           {R"({"a" 1})", "expected ':'"},
           {R"({"a": })", "a field without a value"},
           {R"({"traceEvents": [{"a": "unterminated}]})", "ends inside the trace's object"},
       }) {
    const Split s = split(text, 3);
    ASSERT_FALSE(s.status.ok()) << text;
    EXPECT_EQ(s.status.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_NE(s.status.message().find(expected), std::string::npos) << text << " → " << s.status;
  }
}

TEST(TraceJsonSplitter, AnEventPastTheBoundIsRefusedWithoutHoldingMore) {
  std::string text = R"({"traceEvents": [{"name": ")";
  TraceJsonSplitter splitter([](std::string_view) { return absl::OkStatus(); }, {});
  absl::Status status = splitter.feed(text);
  const std::string chunk(1 << 20, 'x');
  size_t fed = 0;
  while (status.ok() && fed < 2 * kMaxTracePieceBytes) {
    status = splitter.feed(chunk);
    fed += chunk.size();
  }
  ASSERT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_LE(fed, kMaxTracePieceBytes + chunk.size());
  EXPECT_NE(status.message().find(std::to_string(kMaxTracePieceBytes) + "-byte bound"), std::string::npos) << status;
}

TEST(TraceJsonSplitter, FieldsNobodyAskedForAreSkippedWhateverTheirSize) {
  std::string text = R"({"systemTraceEvents": ")" + std::string(kMaxTracePieceBytes + 10, 'x') +
                     R"(", "traceEvents": [], "baseTimeNanoseconds": 5})";
  const Split s = split(text, 1 << 20);
  ASSERT_TRUE(s.status.ok()) << s.status;
  EXPECT_EQ(s.fields, R"({"traceEvents":[],"baseTimeNanoseconds":5})");
}

TEST(ChromeTraceText, ATraceIsAnObjectThatReachesItsTraceEvents) {
  EXPECT_TRUE(is_chrome_trace_text(R"({"schemaVersion": 1, "traceEvents": [)"));
  EXPECT_TRUE(is_chrome_trace_text(R"(  {"displayTimeUnit":"ns","traceEvents":[{"ph":"X")"));
  EXPECT_FALSE(is_chrome_trace_text(R"({"schemaVersion": 1, "deviceProperties": [)"));  // not there yet
  EXPECT_FALSE(is_chrome_trace_text(R"({"steps": {"traceEvents": [1]}})"));             // nested, not the trace's
  EXPECT_FALSE(is_chrome_trace_text(R"({"traceEvents": 5})"));
  EXPECT_FALSE(is_chrome_trace_text(R"([{"ph": "X"}])"));
  EXPECT_FALSE(is_chrome_trace_text("overview_page"));
}

}  // namespace
}  // namespace podscope::kineto
