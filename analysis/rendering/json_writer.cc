#include "analysis/rendering/json_writer.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <memory>

#include "absl/strings/escaping.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/type_resolver.h"
#include "google/protobuf/util/type_resolver_util.h"

namespace podscope::analysis {
namespace {

namespace pb = google::protobuf;

constexpr char kHex[] = "0123456789abcdef";

// The escape of a code point below 0xa0, or 0 bytes when it is written as it is: the C0 controls (the short
// forms where JSON has them), '"', '\\', '<' and '>' (so that the JSON can sit in an HTML page), DEL and the C1
// controls.
std::string_view common_escape(uint32_t cp, char* buffer) {
  switch (cp) {
    case '\b': return "\\b";
    case '\t': return "\\t";
    case '\n': return "\\n";
    case '\f': return "\\f";
    case '\r': return "\\r";
    case '"': return "\\\"";
    case '\\': return "\\\\";
    default: break;
  }
  if (cp < 0x20 || cp == '<' || cp == '>' || cp >= 0x7f) {
    buffer[0] = '\\', buffer[1] = 'u', buffer[2] = '0', buffer[3] = '0';
    buffer[4] = kHex[(cp >> 4) & 0xf], buffer[5] = kHex[cp & 0xf];
    return std::string_view(buffer, 6);
  }
  return {};
}

std::string_view hex_escape(uint32_t unit, char* buffer) {
  buffer[0] = '\\', buffer[1] = 'u';
  for (int i = 0; i < 4; ++i) buffer[2 + i] = kHex[(unit >> (12 - 4 * i)) & 0xf];
  return std::string_view(buffer, 6);
}

// The escape of a code point, or 0 bytes: beyond the common ones, the invisible and formatting characters that
// protobuf escapes to keep JavaScript readers safe (outside the BMP as a surrogate pair).
std::string_view escape_code_point(uint32_t cp, char* buffer) {
  if (cp < 0xa0) return common_escape(cp, buffer);
  const bool bmp_escaped =
      cp == 0xfeff || cp == 0xfff9 || cp == 0xfffa || cp == 0xfffb || cp == 0x00ad || cp == 0x06dd || cp == 0x070f ||
      cp == 0x17b4 || cp == 0x17b5 || (cp >= 0x0600 && cp <= 0x0603) || (cp >= 0x200b && cp <= 0x200f) ||
      (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x2064) || (cp >= 0x206a && cp <= 0x206f);
  if (bmp_escaped) return hex_escape(cp, buffer);
  if (cp == 0xe0001 || (cp >= 0x1d173 && cp <= 0x1d17a) || (cp >= 0xe0020 && cp <= 0xe007f)) {
    const uint32_t v = cp - 0x10000;
    hex_escape(0xd800 + (v >> 10), buffer);
    hex_escape(0xdc00 + (v & 0x3ff), buffer + 6);
    return std::string_view(buffer, 12);
  }
  return {};
}

bool plain_ascii(std::string_view s) {
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>') return false;
  }
  return true;
}

// Appends `s` escaped as protobuf escapes strings. Bytes that are not UTF-8 are dropped as protobuf drops them: a
// stray byte alone; a sequence broken by a byte that does not continue it, with that byte; a sequence that decodes
// to a surrogate or past U+10FFFF whole; a sequence cut by the end of the string.
void append_escaped(std::string& out, std::string_view s) {
  if (plain_ascii(s)) {
    out.append(s);
    return;
  }
  char buffer[12];
  size_t i = 0;
  while (i < s.size()) {
    const auto lead = static_cast<unsigned char>(s[i]);
    if (lead < 0x80) {
      const std::string_view escaped = common_escape(lead, buffer);
      if (escaped.empty()) {
        out.push_back(static_cast<char>(lead));
      } else {
        out.append(escaped);
      }
      ++i;
      continue;
    }
    uint32_t cp;
    int missing;
    if (lead <= 0xbf || lead > 0xf7) {
      ++i;
      continue;
    } else if (lead <= 0xdf) {
      cp = lead & 0x1f, missing = 1;
    } else if (lead <= 0xef) {
      cp = lead & 0x0f, missing = 2;
    } else {
      cp = lead & 0x07, missing = 3;
    }
    size_t end = i + 1;
    bool broken = false;
    while (missing > 0 && end < s.size()) {
      const auto next = static_cast<unsigned char>(s[end++]);
      --missing;
      cp = (cp << 6) | (next & 0x3f);
      if (next < 0x80 || next > 0xbf) {
        broken = true;
        break;
      }
    }
    if (!broken && missing > 0) return;  // cut by the end of the string
    if (broken || (cp & 0xfffff800) == 0xd800 || cp > 0x10ffff) {
      i = end;
      continue;
    }
    const std::string_view escaped = escape_code_point(cp, buffer);
    if (escaped.empty()) {
      out.append(s.substr(i, end - i));
    } else {
      out.append(escaped);
    }
    i = end;
  }
}

}  // namespace

JsonWriter::JsonWriter(bool indented) : indented_(indented), empty_{true} {}

void JsonWriter::newline(size_t level) {
  if (!indented_) return;
  out_.push_back('\n');
  out_.append(level, ' ');
}

void JsonWriter::prefix() {
  const bool first = empty_.back();
  empty_.back() = false;
  if (!first) out_.push_back(',');
  if (!first || empty_.size() > 1) newline(empty_.size() - 1);
  if (has_pending_key_) {
    out_.push_back('"');
    append_escaped(out_, pending_key_);
    out_.append(indented_ ? "\": " : "\":");
    has_pending_key_ = false;
  }
}

void JsonWriter::key(std::string_view name) {
  pending_key_ = name;
  has_pending_key_ = true;
}

void JsonWriter::begin_object() {
  prefix();
  out_.push_back('{');
  empty_.push_back(true);
}

void JsonWriter::begin_array() {
  prefix();
  out_.push_back('[');
  empty_.push_back(true);
}

void JsonWriter::end(char close) {
  const bool had_members = !empty_.back();
  empty_.pop_back();
  if (had_members) newline(empty_.size() - 1);
  out_.push_back(close);
  if (empty_.size() == 1 && indented_) out_.push_back('\n');
}

void JsonWriter::end_object() { end('}'); }
void JsonWriter::end_array() { end(']'); }

void JsonWriter::string(std::string_view value) {
  prefix();
  out_.push_back('"');
  append_escaped(out_, value);
  out_.push_back('"');
}

void JsonWriter::raw_number(std::string_view digits) {
  prefix();
  out_.append(digits);
}

void JsonWriter::number(double value) {
  if (std::isnan(value)) return string("NaN");
  if (std::isinf(value)) return string(value > 0 ? "Infinity" : "-Infinity");
  char buffer[40];
  auto printed = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::general, 15);
  double back = 0;
  const auto read = std::from_chars(buffer, printed.ptr, back);
  if (read.ec != std::errc{}) {  // from_chars refuses what strtod rounds (subnormals): ask strtod
    *printed.ptr = '\0';
    back = std::strtod(buffer, nullptr);
  }
  if (back != value) printed = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::general, 17);
  raw_number(std::string_view(buffer, static_cast<size_t>(printed.ptr - buffer)));
}

void JsonWriter::number(float value) {
  if (std::isnan(value)) return string("NaN");
  if (std::isinf(value)) return string(value > 0 ? "Infinity" : "-Infinity");
  char buffer[40];
  auto printed = std::to_chars(buffer, buffer + sizeof buffer - 1, value, std::chars_format::general, 6);
  *printed.ptr = '\0';
  // As protobuf checks it: strtof, and a range error counts as not reading back.
  errno = 0;
  const float back = std::strtof(buffer, nullptr);
  if (errno != 0 || back != value) {
    printed = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::general, 9);
  }
  raw_number(std::string_view(buffer, static_cast<size_t>(printed.ptr - buffer)));
}

// 64-bit integers are strings in protobuf's JSON (JavaScript numbers lose their low bits).
void JsonWriter::number(int64_t value) {
  char buffer[24];
  const auto printed = std::to_chars(buffer, buffer + sizeof buffer, value);
  raw_number(std::string_view(buffer, static_cast<size_t>(printed.ptr - buffer)));
}

void JsonWriter::number(uint64_t value) {
  char buffer[24];
  const auto printed = std::to_chars(buffer, buffer + sizeof buffer, value);
  raw_number(std::string_view(buffer, static_cast<size_t>(printed.ptr - buffer)));
}

void JsonWriter::boolean(bool value) { raw_number(value ? "true" : "false"); }

namespace {

constexpr std::string_view kAnyFullName = "google.protobuf.Any";

class MessagePrinter {
 public:
  explicit MessagePrinter(JsonWriter& writer) : w_(writer) {}

  absl::Status message(const pb::Message& m) {
    const pb::Descriptor* type = m.GetDescriptor();
    if (type->full_name() == kAnyFullName) return any(m);
    if (type->file()->package() == "google.protobuf") {
      return absl::InvalidArgumentError("no JSON form for the well-known type " + type->full_name());
    }
    w_.begin_object();
    if (absl::Status s = fields(m); !s.ok()) return s;
    w_.end_object();
    return absl::OkStatus();
  }

 private:
  // Every field in declaration order (protobuf's printer fills in the absent ones in its type's order).
  absl::Status fields(const pb::Message& m) {
    const pb::Descriptor* type = m.GetDescriptor();
    const pb::Reflection* r = m.GetReflection();
    for (int i = 0; i < type->field_count(); ++i) {
      const pb::FieldDescriptor* f = type->field(i);
      if (f->is_map()) {
        w_.key(f->json_name());
        if (absl::Status s = map(m, f); !s.ok()) return s;
      } else if (f->is_repeated()) {
        w_.key(f->json_name());
        w_.begin_array();
        const int n = r->FieldSize(m, f);
        for (int j = 0; j < n; ++j) {
          if (absl::Status s = element(m, f, j); !s.ok()) return s;
        }
        w_.end_array();
      } else if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
        if (!r->HasField(m, f)) continue;  // absent messages are left out
        w_.key(f->json_name());
        if (absl::Status s = message(r->GetMessage(m, f)); !s.ok()) return s;
      } else {
        // Scalars of a oneof (proto3 `optional` included) only when set; the others always, zeros too.
        if (f->containing_oneof() != nullptr && !r->HasField(m, f)) continue;
        w_.key(f->json_name());
        scalar(m, f);
      }
    }
    return absl::OkStatus();
  }

  void scalar(const pb::Message& m, const pb::FieldDescriptor* f) {
    const pb::Reflection* r = m.GetReflection();
    switch (f->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_INT32: return w_.number(r->GetInt32(m, f));
      case pb::FieldDescriptor::CPPTYPE_UINT32: return w_.number(r->GetUInt32(m, f));
      case pb::FieldDescriptor::CPPTYPE_INT64: return quoted(r->GetInt64(m, f));
      case pb::FieldDescriptor::CPPTYPE_UINT64: return quoted(r->GetUInt64(m, f));
      case pb::FieldDescriptor::CPPTYPE_DOUBLE: return w_.number(r->GetDouble(m, f));
      case pb::FieldDescriptor::CPPTYPE_FLOAT: return w_.number(r->GetFloat(m, f));
      case pb::FieldDescriptor::CPPTYPE_BOOL: return w_.boolean(r->GetBool(m, f));
      case pb::FieldDescriptor::CPPTYPE_ENUM: return enum_value(f, r->GetEnumValue(m, f));
      case pb::FieldDescriptor::CPPTYPE_STRING: {
        std::string scratch;
        const std::string& value = r->GetStringReference(m, f, &scratch);
        return f->type() == pb::FieldDescriptor::TYPE_BYTES ? w_.string(absl::Base64Escape(value)) : w_.string(value);
      }
      case pb::FieldDescriptor::CPPTYPE_MESSAGE: return;
    }
  }

  absl::Status element(const pb::Message& m, const pb::FieldDescriptor* f, int j) {
    const pb::Reflection* r = m.GetReflection();
    switch (f->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_INT32: w_.number(r->GetRepeatedInt32(m, f, j)); break;
      case pb::FieldDescriptor::CPPTYPE_UINT32: w_.number(r->GetRepeatedUInt32(m, f, j)); break;
      case pb::FieldDescriptor::CPPTYPE_INT64: quoted(r->GetRepeatedInt64(m, f, j)); break;
      case pb::FieldDescriptor::CPPTYPE_UINT64: quoted(r->GetRepeatedUInt64(m, f, j)); break;
      case pb::FieldDescriptor::CPPTYPE_DOUBLE: w_.number(r->GetRepeatedDouble(m, f, j)); break;
      case pb::FieldDescriptor::CPPTYPE_FLOAT: w_.number(r->GetRepeatedFloat(m, f, j)); break;
      case pb::FieldDescriptor::CPPTYPE_BOOL: w_.boolean(r->GetRepeatedBool(m, f, j)); break;
      case pb::FieldDescriptor::CPPTYPE_ENUM: enum_value(f, r->GetRepeatedEnumValue(m, f, j)); break;
      case pb::FieldDescriptor::CPPTYPE_STRING: {
        std::string scratch;
        const std::string& value = r->GetRepeatedStringReference(m, f, j, &scratch);
        if (f->type() == pb::FieldDescriptor::TYPE_BYTES) {
          w_.string(absl::Base64Escape(value));
        } else {
          w_.string(value);
        }
        break;
      }
      case pb::FieldDescriptor::CPPTYPE_MESSAGE: return message(r->GetRepeatedMessage(m, f, j));
    }
    return absl::OkStatus();
  }

  template <typename Int>
  void quoted(Int value) {
    char buffer[24];
    const auto printed = std::to_chars(buffer, buffer + sizeof buffer, value);
    w_.string(std::string_view(buffer, static_cast<size_t>(printed.ptr - buffer)));
  }

  // A known value by its name, an unknown one by its number.
  void enum_value(const pb::FieldDescriptor* f, int value) {
    if (const auto* known = f->enum_type()->FindValueByNumber(value)) return w_.string(known->name());
    w_.number(static_cast<int32_t>(value));
  }

  // Entries in key order (as deterministic serialization orders them), keys as strings.
  absl::Status map(const pb::Message& m, const pb::FieldDescriptor* f) {
    const pb::Reflection* r = m.GetReflection();
    const pb::FieldDescriptor* key_field = f->message_type()->map_key();
    const pb::FieldDescriptor* value_field = f->message_type()->map_value();
    const int n = r->FieldSize(m, f);
    std::vector<const pb::Message*> entries;
    entries.reserve(static_cast<size_t>(n));
    for (int j = 0; j < n; ++j) entries.push_back(&r->GetRepeatedMessage(m, f, j));
    std::vector<std::pair<std::string, const pb::Message*>> keyed;
    keyed.reserve(entries.size());
    const pb::Reflection* er = entries.empty() ? nullptr : entries.front()->GetReflection();
    switch (key_field->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_STRING: {
        for (const pb::Message* e : entries) keyed.emplace_back(er->GetString(*e, key_field), e);
        std::sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        break;
      }
      case pb::FieldDescriptor::CPPTYPE_BOOL: {
        std::sort(entries.begin(), entries.end(), [&](const pb::Message* a, const pb::Message* b) {
          return er->GetBool(*a, key_field) < er->GetBool(*b, key_field);
        });
        for (const pb::Message* e : entries) keyed.emplace_back(er->GetBool(*e, key_field) ? "true" : "false", e);
        break;
      }
      default: {
        // Integer keys: numerically, signed or not as declared.
        auto signed_key = [&](const pb::Message* e) -> int64_t {
          return key_field->cpp_type() == pb::FieldDescriptor::CPPTYPE_INT32 ? er->GetInt32(*e, key_field)
                                                                             : er->GetInt64(*e, key_field);
        };
        auto unsigned_key = [&](const pb::Message* e) -> uint64_t {
          return key_field->cpp_type() == pb::FieldDescriptor::CPPTYPE_UINT32 ? er->GetUInt32(*e, key_field)
                                                                              : er->GetUInt64(*e, key_field);
        };
        const bool is_signed = key_field->cpp_type() == pb::FieldDescriptor::CPPTYPE_INT32 ||
                               key_field->cpp_type() == pb::FieldDescriptor::CPPTYPE_INT64;
        if (is_signed) {
          std::sort(entries.begin(), entries.end(),
                    [&](const pb::Message* a, const pb::Message* b) { return signed_key(a) < signed_key(b); });
          for (const pb::Message* e : entries) keyed.emplace_back(std::to_string(signed_key(e)), e);
        } else {
          std::sort(entries.begin(), entries.end(),
                    [&](const pb::Message* a, const pb::Message* b) { return unsigned_key(a) < unsigned_key(b); });
          for (const pb::Message* e : entries) keyed.emplace_back(std::to_string(unsigned_key(e)), e);
        }
        break;
      }
    }
    w_.begin_object();
    for (const auto& [key, entry] : keyed) {
      w_.key(key);
      if (value_field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
        if (absl::Status s = message(er->GetMessage(*entry, value_field)); !s.ok()) return s;
      } else {
        scalar(*entry, value_field);
      }
    }
    w_.end_object();
    return absl::OkStatus();
  }

  // Any: its "@type", then the packed message's fields; an Any with no value is its "@type" alone (protobuf's
  // printer does not look the type up then), or {} with neither.
  absl::Status any(const pb::Message& m) {
    const pb::Descriptor* type = m.GetDescriptor();
    const pb::Reflection* r = m.GetReflection();
    const std::string type_url = r->GetString(m, type->FindFieldByNumber(1));
    const std::string value = r->GetString(m, type->FindFieldByNumber(2));
    w_.begin_object();
    if (value.empty()) {
      if (!type_url.empty()) {
        w_.key("@type");
        w_.string(type_url);
      }
      w_.end_object();
      return absl::OkStatus();
    }
    const size_t slash = type_url.rfind('/');
    const pb::Descriptor* packed_type =
        slash == std::string::npos
            ? nullptr
            : google::protobuf::DescriptorPool::generated_pool()->FindMessageTypeByName(type_url.substr(slash + 1));
    if (packed_type == nullptr) return absl::InvalidArgumentError("an Any of unknown type '" + type_url + "'");
    std::unique_ptr<pb::Message> packed(
        google::protobuf::MessageFactory::generated_factory()->GetPrototype(packed_type)->New());
    if (!packed->ParseFromString(value)) {
      // The generated parser refuses strings that are not UTF-8 (a host named by a file's stem can be such a
      // string); protobuf's printer reads the bytes unchecked.
      return absl::DataLossError("an Any whose " + type_url + " does not parse");
    }
    w_.key("@type");
    w_.string(type_url);
    if (absl::Status s = fields(*packed); !s.ok()) return s;
    w_.end_object();
    return absl::OkStatus();
  }

  JsonWriter& w_;
};

}  // namespace

absl::Status write_message_json(const pb::Message& message, JsonWriter& writer) {
  return MessagePrinter(writer).message(message);
}

absl::StatusOr<std::string> protobuf_printer_json(const pb::Message& message, bool indented) {
  static constexpr char kTypeUrlPrefix[] = "type.googleapis.com";
  // The resolver reads the generated descriptors; one for the process is enough.
  static google::protobuf::util::TypeResolver* const resolver =
      google::protobuf::util::NewTypeResolverForDescriptorPool(kTypeUrlPrefix,
                                                               google::protobuf::DescriptorPool::generated_pool());
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&out);
  }
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = indented;
  options.always_print_primitive_fields = true;
  std::string json;
  const auto status = google::protobuf::util::BinaryToJsonString(
      resolver, std::string(kTypeUrlPrefix) + "/" + message.GetDescriptor()->full_name(), bytes, &json, options);
  if (!status.ok()) return absl::InternalError(std::string(status.message()));
  return json;
}

absl::StatusOr<std::string> message_to_json(const pb::Message& message, bool indented) {
  JsonWriter writer(indented);
  absl::Status s = write_message_json(message, writer);
  if (absl::IsDataLoss(s)) return protobuf_printer_json(message, indented);
  if (!s.ok()) {
    return absl::InternalError("printing " + message.GetDescriptor()->full_name() +
                               " as JSON: " + std::string(s.message()));
  }
  return std::move(writer).take();
}

}  // namespace podscope::analysis
