#include "kineto/trace_json_splitter.h"

#include <algorithm>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "absl/strings/str_cat.h"

namespace podscope::kineto {
namespace {

// Whole events are handed on once this many bytes of them wait (and at the end of every piece fed): windows of a
// few MiB keep simdjson's index of one small, and each window's copy cheap.
constexpr size_t kWindowBytes = size_t{1} << 20;
// A key longer than this is none the splitter looks for: only its first bytes are kept.
constexpr size_t kMaxKeyBytes = 64;
constexpr std::string_view kEventsKey = "traceEvents";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

}  // namespace

TraceJsonSplitter::TraceJsonSplitter(WindowSink sink, std::vector<std::string> kept_fields)
    : sink_(std::move(sink)), kept_fields_(std::move(kept_fields)) {}

absl::Status TraceJsonSplitter::feed(std::string_view text) {
  if (!error_.ok() || where_ == Where::kAfterObject) return error_;  // what follows the object is not read
  pending_.append(text);
  scan();
  // The whole events before a fault of the text go to the sink first: an error of theirs comes first in the text.
  if (window_start_ != SIZE_MAX) {
    if (absl::Status events = emit_window(); !events.ok()) error_ = events;
  }
  compact();
  return error_;
}

absl::StatusOr<std::string_view> TraceJsonSplitter::finish() {
  if (!error_.ok()) return error_;
  if (where_ != Where::kAfterObject) {
    fail(where_ == Where::kBeforeObject ? "the text holds no JSON object" : "the text ends inside the trace's object",
         pending_.size());
    return error_;
  }
  if (fields_.back() == ',') fields_.back() = '}';  // the last field's comma
  else fields_ += '}';
  const size_t size = fields_.size();
  fields_.append(kWindowPadding, '\0');
  return std::string_view(fields_.data(), size);
}

void TraceJsonSplitter::scan() {
  const size_t end = pending_.size();
  size_t i = pos_;
  while (i < end && error_.ok()) {
    if (where_ == Where::kElement) {
      i = scan_element(i);
      continue;
    }
    const char c = pending_[i];
    switch (where_) {
      case Where::kBeforeObject:
        if (is_space(c)) break;
        if (c != '{') return fail("the text is not a JSON object", i);
        where_ = Where::kBeforeFirstKey;
        break;
      case Where::kBeforeFirstKey:
      case Where::kBeforeKey:
        if (is_space(c)) break;
        if (c == '}' && where_ == Where::kBeforeFirstKey) {
          where_ = Where::kAfterObject;
          break;
        }
        if (c != '"') return fail("expected a field's name", i);
        key_.clear();
        escaped_ = false;
        where_ = Where::kKey;
        break;
      case Where::kKey:
        if (escaped_) {
          escaped_ = false;
        } else if (c == '\\') {
          escaped_ = true;
        } else if (c == '"') {
          where_ = Where::kBeforeColon;
          break;
        }
        if (key_.size() <= kMaxKeyBytes) key_ += c;
        break;
      case Where::kBeforeColon:
        if (is_space(c)) break;
        if (c != ':') return fail("expected ':' after a field's name", i);
        where_ = Where::kBeforeValue;
        break;
      case Where::kBeforeValue:
        if (is_space(c)) break;
        if (c == ',' || c == '}' || c == ']') return fail("a field without a value", i);
        events_value_ = key_ == kEventsKey;
        if (events_value_ && c == '[') {
          reached_events_ = true;
          fields_.append("\"traceEvents\":[],");
          where_ = Where::kBeforeFirstElement;
          break;
        }
        // Another type of value under traceEvents is kept, for the parser to say what it is.
        keep_value_ = events_value_ || std::find(kept_fields_.begin(), kept_fields_.end(), key_) != kept_fields_.end();
        value_start_ = i;
        depth_ = 0;
        in_string_ = false;
        escaped_ = false;
        where_ = Where::kValue;
        continue;  // this byte is the value's first
      case Where::kValue:
        if (keep_value_ && i - value_start_ + fields_.size() > kMaxTracePieceBytes) {
          error_ = absl::ResourceExhaustedError(absl::StrCat("the trace's field \"", key_, "\" at byte ",
                                                             dropped_ + value_start_, " is longer than the ",
                                                             kMaxTracePieceBytes, "-byte bound on one piece"));
          return;
        }
        if (in_string_) {
          if (escaped_) escaped_ = false;
          else if (c == '\\') escaped_ = true;
          else if (c == '"') in_string_ = false;
        } else if (c == '"') {
          in_string_ = true;
        } else if (c == '{' || c == '[') {
          ++depth_;
        } else if ((c == '}' || c == ']') && depth_ > 0) {
          --depth_;
        } else if (c == ']') {
          return fail("unbalanced ']'", i);
        } else if (depth_ == 0 && (c == ',' || c == '}')) {
          end_value(i);
          where_ = c == ',' ? Where::kBeforeKey : Where::kAfterObject;
        }
        break;
      case Where::kBeforeFirstElement:
      case Where::kBeforeElement:
        if (is_space(c)) break;
        if (c == ']' && where_ == Where::kBeforeFirstElement) {
          where_ = Where::kAfterValue;
          break;
        }
        if (c == ',' || c == ']' || c == '}') return fail("expected an event", i);
        element_start_ = i;
        depth_ = 0;
        in_string_ = false;
        escaped_ = false;
        where_ = Where::kElement;
        continue;  // this byte is the event's first
      case Where::kAfterValue:
        if (is_space(c)) break;
        if (c == ',') where_ = Where::kBeforeKey;
        else if (c == '}') where_ = Where::kAfterObject;
        else return fail("expected ',' or '}' after a field", i);
        break;
      case Where::kElement: break;  // scanned above
      case Where::kAfterObject: i = end; continue;
    }
    ++i;
  }
  pos_ = std::min(i, end);
}

// The hot loop: most of a trace's text is inside its events, and most of that inside strings. 64 bytes at a time
// where SSE2 is there and the bytes hold no backslash (nearly all of a trace): which bytes are inside strings comes
// from the quotes' running parity, and only the brackets and commas outside strings are looked at one by one.
size_t TraceJsonSplitter::scan_element(size_t i) {
  const size_t end = pending_.size();
  while (i < end) {
#if defined(__SSE2__)
    if (end - i >= 64 && !escaped_) {
      const size_t next = scan_block(i);
      if (next != i) {
        if (where_ != Where::kElement || !error_.ok()) return next;
        i = next;
        continue;
      }
    }
#endif
    i = scan_bytes(i, std::min(end, i + 64));
    if (where_ != Where::kElement || !error_.ok()) return i;
  }
  if (end - element_start_ > kMaxTracePieceBytes) end_element(end);  // refused there
  return end;
}

#if defined(__SSE2__)
namespace {

// The bits of the bytes of `text[0..64)` that equal `c`, byte 0 the lowest.
inline uint64_t bytes_equal(const __m128i (&blocks)[4], char c) {
  const __m128i wanted = _mm_set1_epi8(c);
  uint64_t mask = 0;
  for (int b = 0; b < 4; ++b) {
    mask |= uint64_t{static_cast<uint16_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(blocks[b], wanted)))} << (16 * b);
  }
  return mask;
}

// Bit k: the parity of the bits 0..k.
inline uint64_t prefix_xor(uint64_t x) {
  x ^= x << 1;
  x ^= x << 2;
  x ^= x << 4;
  x ^= x << 8;
  x ^= x << 16;
  x ^= x << 32;
  return x;
}

}  // namespace

// The 64 bytes at `i`: where the element ends in them, else i + 64; `i` itself when they hold a backslash (then they
// go byte by byte).
size_t TraceJsonSplitter::scan_block(size_t i) {
  const char* text = pending_.data() + i;
  const __m128i blocks[4] = {_mm_loadu_si128(reinterpret_cast<const __m128i*>(text)),
                             _mm_loadu_si128(reinterpret_cast<const __m128i*>(text + 16)),
                             _mm_loadu_si128(reinterpret_cast<const __m128i*>(text + 32)),
                             _mm_loadu_si128(reinterpret_cast<const __m128i*>(text + 48))};
  if (bytes_equal(blocks, '\\') != 0) return i;
  // '[' and ']' are '{' and '}' but for bit 5.
  const __m128i bit5 = _mm_set1_epi8(0x20);
  const __m128i folded[4] = {_mm_or_si128(blocks[0], bit5), _mm_or_si128(blocks[1], bit5),
                             _mm_or_si128(blocks[2], bit5), _mm_or_si128(blocks[3], bit5)};
  // A byte is inside a string from its opening quote up to, not with, its closing one.
  const uint64_t inside = prefix_xor(bytes_equal(blocks, '"')) ^ (in_string_ ? ~uint64_t{0} : 0);
  uint64_t structural = (bytes_equal(folded, '{') | bytes_equal(folded, '}') | bytes_equal(blocks, ',')) & ~inside;
  for (; structural != 0; structural &= structural - 1) {
    const auto k = static_cast<size_t>(__builtin_ctzll(structural));
    const char c = text[k];
    if (c == '{' || c == '[') {
      ++depth_;
    } else if ((c == '}' || c == ']') && depth_ > 0) {
      --depth_;
    } else if (c == ',' && depth_ > 0) {
      continue;
    } else {
      in_string_ = false;
      return scan_bytes(i + k, i + k + 1);  // the element's end, where the bytewise loop says what it is
    }
  }
  in_string_ = (inside >> 63) != 0;
  return i + 64;
}
#endif

size_t TraceJsonSplitter::scan_bytes(size_t i, size_t limit) {
  const char* text = pending_.data();
  while (i < limit) {
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
        ++i;
        continue;
      }
      while (i < limit && text[i] != '"' && text[i] != '\\') ++i;
      if (i == limit) break;
      if (text[i] == '\\') escaped_ = true;
      else in_string_ = false;
      ++i;
      continue;
    }
    switch (text[i]) {
      case '"': in_string_ = true; break;
      case '{':
      case '[': ++depth_; break;
      case '}':
      case ']':
        if (depth_ > 0) {
          --depth_;
          break;
        }
        if (text[i] == '}') {
          fail("unbalanced '}'", i);
          return limit;
        }
        end_element(i);
        where_ = Where::kAfterValue;
        return i + 1;
      case ',':
        if (depth_ > 0) break;
        end_element(i);
        where_ = Where::kBeforeElement;
        return i + 1;
      default: break;
    }
    ++i;
  }
  return limit;
}

void TraceJsonSplitter::end_value(size_t end) {
  if (!keep_value_) return;
  fields_.append("\"").append(key_).append("\":").append(pending_, value_start_, end - value_start_).append(",");
}

void TraceJsonSplitter::end_element(size_t end) {
  if (end - element_start_ > kMaxTracePieceBytes) {
    error_ = absl::ResourceExhaustedError(absl::StrCat("the trace's event at byte ", dropped_ + element_start_,
                                                       " is longer than the ", kMaxTracePieceBytes,
                                                       "-byte bound on one event"));
    return;
  }
  if (window_start_ == SIZE_MAX) window_start_ = element_start_;
  window_end_ = end;
  if (window_end_ - window_start_ >= kWindowBytes) error_ = emit_window();
}

absl::Status TraceJsonSplitter::emit_window() {
  const size_t size = window_end_ - window_start_;
  window_.resize(size + 2 + kWindowPadding);
  window_[0] = '[';
  std::memcpy(window_.data() + 1, pending_.data() + window_start_, size);
  window_[size + 1] = ']';
  std::memset(window_.data() + size + 2, 0, kWindowPadding);
  window_start_ = SIZE_MAX;
  return sink_(std::string_view(window_.data(), size + 2));
}

// Drops the text no longer needed, when that is at least as much as what must move.
void TraceJsonSplitter::compact() {
  if (where_ == Where::kAfterObject) {
    dropped_ += pending_.size();
    pos_ = 0;
    std::string().swap(pending_);
    return;
  }
  size_t keep = pos_;
  if (where_ == Where::kElement) keep = std::min(keep, element_start_);
  if (where_ == Where::kValue && keep_value_) keep = std::min(keep, value_start_);
  if (window_start_ != SIZE_MAX) keep = std::min(keep, window_start_);
  if (keep == 0 || keep < pending_.size() - keep) return;
  pending_.erase(0, keep);
  dropped_ += keep;
  pos_ -= keep;
  if (where_ == Where::kElement) element_start_ -= keep;
  if (where_ == Where::kValue && keep_value_) value_start_ -= keep;
  if (window_start_ != SIZE_MAX) {
    window_start_ -= keep;
    window_end_ -= keep;
  }
}

void TraceJsonSplitter::fail(std::string_view what, size_t at) {
  error_ = absl::InvalidArgumentError(absl::StrCat(std::string(what), " at byte ", dropped_ + at));
}

bool is_chrome_trace_text(std::string_view text) {
  TraceJsonSplitter splitter([](std::string_view) { return absl::OkStatus(); }, {});
  (void)splitter.feed(text);  // a fault after the events' start is the parse's to report
  return splitter.reached_events();
}

}  // namespace podscope::kineto
