#include "proto/xspace/serialize.h"

#include <limits>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace podscope::xspace {

absl::StatusOr<std::string> serialize_deterministically(const google::protobuf::Message& message) {
  const size_t size = message.ByteSizeLong();
  if (size > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return absl::ResourceExhaustedError("a " + message.GetTypeName() + " of " + std::to_string(size) +
                                        " bytes is over protobuf's 2 GiB");
  }
  std::string bytes(size, '\0');
  google::protobuf::io::ArrayOutputStream array(bytes.data(), static_cast<int>(size));
  google::protobuf::io::CodedOutputStream coded(&array);
  coded.SetSerializationDeterministic(true);
  message.SerializeWithCachedSizes(&coded);
  if (coded.HadError()) return absl::InternalError("a " + message.GetTypeName() + " does not serialize");
  return bytes;
}

}  // namespace podscope::xspace
