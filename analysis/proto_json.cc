// to_deterministic_json (renderers.h): a message printed as protobuf's JSON mapping prints it, read through the
// message's reflection in one pass. Protobuf's own printer (util::BinaryToJsonString) serializes the message, then
// parses it again through a type resolver and builds a tree of every field before printing: that took a third of
// `podscope analyze` on a small run. The output is the same text, byte for byte (tests/analysis/proto_json_test.cc
// compares both on every tool's result): fields in declaration order when defaults are printed (the set members of
// oneofs last), else in field number order; map entries in key order; 64-bit integers quoted; doubles and floats in
// their shortest exact form;
// `<` and `>` escaped; a space of indent per level and a final newline with whitespace.
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "analysis/renderers.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/dynamic_message.h"
#include "google/protobuf/map_field.h"
#include "google/protobuf/message.h"

namespace podscope::analysis {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

constexpr std::string_view kTypeUrlPrefix = "type.googleapis.com/";

// As protobuf's SimpleDtoa / SimpleFtoa: the shortest of 15 (6) and 17 (9) significant digits that reads back.
std::string shortest_double(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.*g", DBL_DIG, value);
  if (std::strtod(buffer, nullptr) != value) std::snprintf(buffer, sizeof buffer, "%.*g", DBL_DIG + 2, value);
  return buffer;
}
std::string shortest_float(float value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.*g", FLT_DIG, static_cast<double>(value));
  if (std::strtof(buffer, nullptr) != value) {
    std::snprintf(buffer, sizeof buffer, "%.*g", FLT_DIG + 3, static_cast<double>(value));
  }
  return buffer;
}

class JsonPrinter {
 public:
  JsonPrinter(bool add_whitespace, bool always_print_primitive_fields)
      : pretty_(add_whitespace), defaults_(always_print_primitive_fields) {}

  absl::Status print(const Message& message) {
    write_message(message);
    if (pretty_) out_ += '\n';
    return status_;
  }
  std::string take() && { return std::move(out_); }

 private:
  // Containers: the separator and line break before each element, and the closing of a non-empty one.
  void open(char bracket) {
    out_ += bracket;
    ++depth_;
    first_ = true;
  }
  void close(char bracket) {
    --depth_;
    if (!first_) new_line();
    out_ += bracket;
    first_ = false;
  }
  void element() {
    if (!first_) out_ += ',';
    first_ = false;
    new_line();
  }
  void new_line() {
    if (!pretty_) return;
    out_ += '\n';
    out_.append(depth_, ' ');
  }
  void key(std::string_view name) {
    element();
    write_string(name);
    out_ += pretty_ ? ": " : ":";
  }

  void write_string(std::string_view text) {
    out_ += '"';
    for (const char c : text) {
      const auto u = static_cast<unsigned char>(c);
      switch (c) {
        case '"': out_ += "\\\""; break;
        case '\\': out_ += "\\\\"; break;
        case '\b': out_ += "\\b"; break;
        case '\f': out_ += "\\f"; break;
        case '\n': out_ += "\\n"; break;
        case '\r': out_ += "\\r"; break;
        case '\t': out_ += "\\t"; break;
        default:
          // Control characters, DEL and the HTML-sensitive < and > as \u escapes, as protobuf escapes them.
          if (u < 0x20 || u == 0x7f || c == '<' || c == '>') {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\u%04x", u);
            out_ += escaped;
          } else {
            out_ += c;
          }
      }
    }
    out_ += '"';
  }

  void write_double(double value) {
    if (std::isnan(value)) return write_string("NaN");
    if (std::isinf(value)) return write_string(value > 0 ? "Infinity" : "-Infinity");
    out_ += shortest_double(value);
  }
  void write_float(float value) {
    if (std::isnan(value)) return write_string("NaN");
    if (std::isinf(value)) return write_string(value > 0 ? "Infinity" : "-Infinity");
    out_ += shortest_float(value);
  }

  void write_message(const Message& message) {
    const std::string& type = message.GetDescriptor()->full_name();
    if (type == "google.protobuf.Any") return write_any(message);
    if (type == "google.protobuf.Struct") return write_struct(message);
    if (type == "google.protobuf.Value") return write_value(message);
    if (type == "google.protobuf.ListValue") return write_list_value(message);
    if (type.starts_with("google.protobuf.")) {
      status_ = absl::UnimplementedError("printing " + type + " as JSON");
      out_ += "null";
      return;
    }
    open('{');
    write_fields(message);
    close('}');
  }

  // The fields a message prints: with defaults, every field in declaration order but unset messages and oneof
  // members; without, the set ones in field number order.
  void write_fields(const Message& message) {
    const Descriptor* descriptor = message.GetDescriptor();
    const Reflection* reflection = message.GetReflection();
    std::vector<const FieldDescriptor*> fields;
    if (defaults_) {
      for (int i = 0; i < descriptor->field_count(); ++i) {
        const FieldDescriptor* field = descriptor->field(i);
        if (field->real_containing_oneof() != nullptr) continue;
        if (!field->is_repeated() && field->has_presence() && !reflection->HasField(message, field)) continue;
        fields.push_back(field);
      }
      // The set members of oneofs come last, in field number order, as protobuf's printer adds them.
      std::vector<const FieldDescriptor*> set;
      reflection->ListFields(message, &set);
      for (const FieldDescriptor* field : set) {
        if (field->real_containing_oneof() != nullptr) fields.push_back(field);
      }
    } else {
      reflection->ListFields(message, &fields);
    }
    for (const FieldDescriptor* field : fields) {
      key(field->json_name());
      if (field->is_map()) {
        write_map(message, field);
      } else if (field->is_repeated()) {
        open('[');
        for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
          element();
          write_repeated_value(message, field, i);
        }
        close(']');
      } else {
        write_singular_value(message, field);
      }
    }
  }

  void write_singular_value(const Message& message, const FieldDescriptor* field) {
    const Reflection* r = message.GetReflection();
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32: out_ += std::to_string(r->GetInt32(message, field)); break;
      case FieldDescriptor::CPPTYPE_UINT32: out_ += std::to_string(r->GetUInt32(message, field)); break;
      case FieldDescriptor::CPPTYPE_INT64: write_string(std::to_string(r->GetInt64(message, field))); break;
      case FieldDescriptor::CPPTYPE_UINT64: write_string(std::to_string(r->GetUInt64(message, field))); break;
      case FieldDescriptor::CPPTYPE_DOUBLE: write_double(r->GetDouble(message, field)); break;
      case FieldDescriptor::CPPTYPE_FLOAT: write_float(r->GetFloat(message, field)); break;
      case FieldDescriptor::CPPTYPE_BOOL: out_ += r->GetBool(message, field) ? "true" : "false"; break;
      case FieldDescriptor::CPPTYPE_ENUM: write_enum(field, r->GetEnumValue(message, field)); break;
      case FieldDescriptor::CPPTYPE_STRING: write_text(field, r->GetString(message, field)); break;
      case FieldDescriptor::CPPTYPE_MESSAGE: write_message(r->GetMessage(message, field)); break;
    }
  }

  void write_repeated_value(const Message& message, const FieldDescriptor* field, int i) {
    const Reflection* r = message.GetReflection();
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32: out_ += std::to_string(r->GetRepeatedInt32(message, field, i)); break;
      case FieldDescriptor::CPPTYPE_UINT32: out_ += std::to_string(r->GetRepeatedUInt32(message, field, i)); break;
      case FieldDescriptor::CPPTYPE_INT64: write_string(std::to_string(r->GetRepeatedInt64(message, field, i))); break;
      case FieldDescriptor::CPPTYPE_UINT64:
        write_string(std::to_string(r->GetRepeatedUInt64(message, field, i)));
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE: write_double(r->GetRepeatedDouble(message, field, i)); break;
      case FieldDescriptor::CPPTYPE_FLOAT: write_float(r->GetRepeatedFloat(message, field, i)); break;
      case FieldDescriptor::CPPTYPE_BOOL: out_ += r->GetRepeatedBool(message, field, i) ? "true" : "false"; break;
      case FieldDescriptor::CPPTYPE_ENUM: write_enum(field, r->GetRepeatedEnumValue(message, field, i)); break;
      case FieldDescriptor::CPPTYPE_STRING: write_text(field, r->GetRepeatedString(message, field, i)); break;
      case FieldDescriptor::CPPTYPE_MESSAGE: write_message(r->GetRepeatedMessage(message, field, i)); break;
    }
  }

  void write_enum(const FieldDescriptor* field, int number) {
    if (const auto* value = field->enum_type()->FindValueByNumber(number)) return write_string(value->name());
    out_ += std::to_string(number);
  }
  void write_text(const FieldDescriptor* field, const std::string& text) {
    write_string(field->type() == FieldDescriptor::TYPE_BYTES ? absl::Base64Escape(text) : text);
  }

  // A map as an object of its entries in key order, as deterministic serialization orders them.
  void write_map(const Message& message, const FieldDescriptor* field) {
    const Reflection* r = message.GetReflection();
    const FieldDescriptor* key_field = field->message_type()->map_key();
    const FieldDescriptor* value_field = field->message_type()->map_value();
    std::vector<const Message*> entries;
    for (int i = 0; i < r->FieldSize(message, field); ++i) entries.push_back(&r->GetRepeatedMessage(message, field, i));
    const auto key_of = [&](const Message& entry) { return map_key_text(entry, key_field); };
    std::stable_sort(entries.begin(), entries.end(),
                     [&](const Message* a, const Message* b) { return map_key_less(*a, *b, key_field); });
    open('{');
    for (const Message* entry : entries) {
      key(key_of(*entry));
      write_singular_value(*entry, value_field);
    }
    close('}');
  }
  static std::string map_key_text(const Message& entry, const FieldDescriptor* key) {
    const Reflection* r = entry.GetReflection();
    switch (key->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32: return std::to_string(r->GetInt32(entry, key));
      case FieldDescriptor::CPPTYPE_UINT32: return std::to_string(r->GetUInt32(entry, key));
      case FieldDescriptor::CPPTYPE_INT64: return std::to_string(r->GetInt64(entry, key));
      case FieldDescriptor::CPPTYPE_UINT64: return std::to_string(r->GetUInt64(entry, key));
      case FieldDescriptor::CPPTYPE_BOOL: return r->GetBool(entry, key) ? "true" : "false";
      default: return r->GetString(entry, key);
    }
  }
  static bool map_key_less(const Message& a, const Message& b, const FieldDescriptor* key) {
    const Reflection* r = a.GetReflection();
    switch (key->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32: return r->GetInt32(a, key) < r->GetInt32(b, key);
      case FieldDescriptor::CPPTYPE_UINT32: return r->GetUInt32(a, key) < r->GetUInt32(b, key);
      case FieldDescriptor::CPPTYPE_INT64: return r->GetInt64(a, key) < r->GetInt64(b, key);
      case FieldDescriptor::CPPTYPE_UINT64: return r->GetUInt64(a, key) < r->GetUInt64(b, key);
      case FieldDescriptor::CPPTYPE_BOOL: return !r->GetBool(a, key) && r->GetBool(b, key);
      default: return r->GetString(a, key) < r->GetString(b, key);
    }
  }

  // An Any: its "@type", then its message's fields.
  void write_any(const Message& any) {
    const Descriptor* d = any.GetDescriptor();
    const Reflection* r = any.GetReflection();
    const std::string type_url = r->GetString(any, d->FindFieldByName("type_url"));
    open('{');
    if (!type_url.empty()) {
      const std::string_view name = std::string_view(type_url).substr(type_url.rfind('/') + 1);
      const Descriptor* type =
          google::protobuf::DescriptorPool::generated_pool()->FindMessageTypeByName(std::string(name));
      if (type == nullptr) {
        status_ = absl::NotFoundError("printing an Any as JSON: unknown type " + type_url);
      } else {
        std::unique_ptr<Message> held(google::protobuf::MessageFactory::generated_factory()->GetPrototype(type)->New());
        if (!held->ParseFromString(r->GetString(any, d->FindFieldByName("value")))) {
          status_ = absl::DataLossError("printing an Any as JSON: its " + type_url + " does not parse");
        }
        key("@type");
        write_string(type_url);
        write_fields(*held);
      }
    }
    close('}');
  }

  void write_struct(const Message& message) {
    const FieldDescriptor* fields = message.GetDescriptor()->FindFieldByName("fields");
    write_map(message, fields);
  }
  void write_list_value(const Message& message) {
    const FieldDescriptor* values = message.GetDescriptor()->FindFieldByName("values");
    const Reflection* r = message.GetReflection();
    open('[');
    for (int i = 0; i < r->FieldSize(message, values); ++i) {
      element();
      write_value(r->GetRepeatedMessage(message, values, i));
    }
    close(']');
  }
  void write_value(const Message& value) {
    const Reflection* r = value.GetReflection();
    const FieldDescriptor* kind = r->GetOneofFieldDescriptor(value, value.GetDescriptor()->FindOneofByName("kind"));
    if (kind == nullptr || kind->name() == "null_value") {
      out_ += "null";
    } else {
      write_singular_value(value, kind);
    }
  }

  const bool pretty_;
  const bool defaults_;
  std::string out_;
  size_t depth_ = 0;
  bool first_ = true;
  absl::Status status_;
};

}  // namespace

absl::StatusOr<std::string> to_deterministic_json(const Message& message, bool add_whitespace,
                                                  bool always_print_primitive_fields) {
  JsonPrinter printer(add_whitespace, always_print_primitive_fields);
  if (absl::Status s = printer.print(message); !s.ok()) {
    return absl::InternalError("printing " + message.GetDescriptor()->full_name() +
                               " as JSON: " + std::string(s.message()));
  }
  return std::move(printer).take();
}

}  // namespace podscope::analysis
