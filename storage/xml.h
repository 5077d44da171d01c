// The few facts the bucket stores read from XML answers (S3's listings, upload ids, errors; STS's credentials),
// through expat: each element's text by its path of names from the root, namespaces left aside.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace podscope::storage {

struct XmlText {
  std::string path;  // "ListBucketResult/Contents/Key"
  std::string text;
};

// Every element with text, in document order. InvalidArgument when the answer is not XML.
absl::StatusOr<std::vector<XmlText>> xml_texts(std::string_view xml);
// The first text at `path`, or "".
std::string first_xml_text(const std::vector<XmlText>& texts, std::string_view path);

}  // namespace podscope::storage
