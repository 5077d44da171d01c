#include "agent/capture/parsed_size.h"

#include <algorithm>
#include <climits>
#include <string>
#include <unordered_map>

#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/message.h"
#include "google/protobuf/wire_format_lite.h"
#include "proto/xspace/utf8.h"

namespace podscope::agent {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::internal::WireFormatLite;

// protobuf's own default: deeper nesting is refused by its parser as well.
constexpr int kMaxNesting = 100;
constexpr size_t kAllocation = 16;                             // malloc's header and rounding
constexpr size_t kSlot = 2 * sizeof(void*);                    // a repeated element's pointer, capacity doubled
constexpr size_t kString = sizeof(std::string) + kAllocation;  // a string field's own object
constexpr size_t kMapNode = 64;                                // a map entry's node and its bucket
constexpr size_t kScalar = 2 * sizeof(int64_t);                // a repeated scalar, capacity doubled

class Walker {
 public:
  // `enclosing` is the bytes of the messages around this one.
  absl::Status walk(std::string_view bytes, const Descriptor& type, int nesting, size_t enclosing, ParsedSize& out) {
    if (nesting > kMaxNesting) return absl::InvalidArgumentError(type.full_name() + " nested deeper than 100 messages");
    const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
    const int size = static_cast<int>(bytes.size());
    google::protobuf::io::CodedInputStream in(data, size);
    const auto broken = [&] {
      return absl::InvalidArgumentError(type.full_name() + " of " + std::to_string(bytes.size()) +
                                        " bytes breaks off at byte " + std::to_string(in.CurrentPosition()));
    };
    while (in.CurrentPosition() < size) {
      const int field_start = in.CurrentPosition();
      const uint32_t tag = in.ReadTag();
      if (tag == 0) return broken();
      const FieldDescriptor* field = type.FindFieldByNumber(WireFormatLite::GetTagFieldNumber(tag));
      const bool delimited = WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
      const bool known = field != nullptr && (delimited || (field->type() != FieldDescriptor::TYPE_MESSAGE &&
                                                            field->type() != FieldDescriptor::TYPE_STRING &&
                                                            field->type() != FieldDescriptor::TYPE_BYTES));
      if (!known || !delimited) {
        // A scalar, or what the parser keeps as an unknown field (its bytes, in a string of its own).
        if (WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_START_GROUP ||
            !WireFormatLite::SkipField(&in, tag)) {
          return broken();
        }
        if (!known) out.bytes += static_cast<size_t>(in.CurrentPosition() - field_start) + kString;
        else if (field->is_repeated()) out.bytes += kScalar;
        continue;
      }
      uint32_t length = 0;
      if (!in.ReadVarint32(&length) || length > static_cast<uint32_t>(size - in.CurrentPosition())) return broken();
      const std::string_view value(bytes.data() + in.CurrentPosition(), length);
      in.Skip(static_cast<int>(length));
      const size_t slot = field->is_repeated() ? kSlot : 0;
      switch (field->type()) {
        case FieldDescriptor::TYPE_MESSAGE:
          out.bytes += slot + (field->is_map() ? kMapNode : 0) + object_size(*field->message_type()) + kAllocation;
          // The repair copies each message on its way down, and builds its repaired copy beside it.
          out.repair_bytes = std::max(out.repair_bytes, 2 * (enclosing + length));
          if (absl::Status s = walk(value, *field->message_type(), nesting + 1, enclosing + length, out); !s.ok()) {
            return s;
          }
          break;
        case FieldDescriptor::TYPE_STRING:
          out.invalid_utf8 = out.invalid_utf8 || !xspace::is_valid_utf8(value);
          [[fallthrough]];
        case FieldDescriptor::TYPE_BYTES: out.bytes += slot + kString + length + 1 + kAllocation; break;
        default: out.bytes += kScalar * length; break;  // packed: each element at least a byte on the wire
      }
    }
    return absl::OkStatus();
  }

 private:
  // The message's object (the size of its type), from its prototype. A map's entries are no objects of their own:
  // their key and value live in the map's node (kMapNode), the value's object counted as its message.
  size_t object_size(const Descriptor& type) {
    auto [it, added] = sizes_.try_emplace(&type, 0);
    if (added && !type.options().map_entry()) {
      const google::protobuf::Message* prototype =
          google::protobuf::MessageFactory::generated_factory()->GetPrototype(&type);
      it->second = prototype != nullptr ? prototype->SpaceUsedLong() : 0;
    }
    return it->second;
  }

  std::unordered_map<const Descriptor*, size_t> sizes_;
};

}  // namespace

absl::StatusOr<ParsedSize> parsed_size_bound(std::string_view bytes, const Descriptor& type) {
  if (bytes.size() > INT_MAX) {
    return absl::InvalidArgumentError(type.full_name() + " of " + std::to_string(bytes.size()) +
                                      " bytes is past protobuf's 2 GiB");
  }
  ParsedSize out;
  Walker walker;
  if (absl::Status s = walker.walk(bytes, type, 0, 0, out); !s.ok()) return s;
  out.repair_bytes += bytes.size();  // the whole repaired copy
  return out;
}

}  // namespace podscope::agent
