// The analysis' JSON, written straight into a string: protobuf's JSON form of a proto3 message, walked through its
// reflection, and a writer for the files whose schema is ours (pod_viewer.json). Both write exactly the bytes
// protobuf's own printer (util::BinaryToJsonString over a type resolver, the message serialized deterministically)
// writes for the same content: the same field order, whitespace, number formats and string escapes. The printer
// serializes the message, reparses it through type descriptors and builds a tree of every field before writing:
// for the analysis' outputs that cost more than reading the capture; this writes as it walks.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/message.h"

namespace podscope::analysis {

// Protobuf's JSON whitespace: one space of indent per level, a space after each colon and a newline after the
// outermost value when `indented`; none at all otherwise.
class JsonWriter {
 public:
  explicit JsonWriter(bool indented);

  void begin_object();
  void end_object();
  void begin_array();
  void end_array();
  // The next member's name, inside an object.
  void key(std::string_view name);
  void string(std::string_view value);
  // Finite values as protobuf prints them (the shortest of 15 or 17 significant digits that reads back the
  // same: 6 or 9 for float); NaN and the infinities as the strings "NaN", "Infinity", "-Infinity".
  void number(double value);
  void number(float value);
  void number(int64_t value);
  void number(uint64_t value);
  void number(int32_t value) { number(static_cast<int64_t>(value)); }
  void number(uint32_t value) { number(static_cast<uint64_t>(value)); }
  void boolean(bool value);

  std::string take() && { return std::move(out_); }

 private:
  // Before every value: the separator, the newline and indent, and the member's name when one is pending.
  void prefix();
  void end(char close);
  void newline(size_t level);
  void raw_number(std::string_view digits);

  std::string out_;
  const bool indented_;
  // Per open container (the first entry stands for the top level): whether nothing was written in it yet.
  std::vector<bool> empty_;
  std::string_view pending_key_;
  bool has_pending_key_ = false;
};

// `message` (proto3) in protobuf's JSON form, every field printed (zeros, empty lists and maps included), map
// entries in key order, Any as its "@type" and the packed message's fields; the bytes of protobuf's printer with
// always_print_primitive_fields. Fails on well-known types other than Any, which no analysis result holds. An Any
// whose message does not parse (strings that are not UTF-8) is left to protobuf's printer, whole message and all.
absl::StatusOr<std::string> message_to_json(const google::protobuf::Message& message, bool indented);

// Protobuf's own printer with the same options (the message serialized deterministically, printed through a type
// resolver with every primitive field): what message_to_json falls back to, and what its tests hold it to.
absl::StatusOr<std::string> protobuf_printer_json(const google::protobuf::Message& message, bool indented);

// The same, written into `writer` as one value (a member's value after `writer.key()`, or an array element);
// DATA_LOSS for an Any whose message does not parse.
absl::Status write_message_json(const google::protobuf::Message& message, JsonWriter& writer);

}  // namespace podscope::analysis
