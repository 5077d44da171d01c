#include "storage/xml.h"

#include <expat.h>

#include <memory>

namespace podscope::storage {
namespace {

struct Walk {
  std::vector<XmlText> texts;
  std::string path;
  std::string text;

  static void on_start(void* self, const XML_Char* name, const XML_Char**) {
    auto& walk = *static_cast<Walk*>(self);
    if (!walk.path.empty()) walk.path += '/';
    walk.path += name;
    walk.text.clear();
  }
  static void on_end(void* self, const XML_Char*) {
    auto& walk = *static_cast<Walk*>(self);
    if (!walk.text.empty()) walk.texts.push_back({walk.path, std::move(walk.text)});
    walk.text.clear();
    const size_t slash = walk.path.rfind('/');
    walk.path.resize(slash == std::string::npos ? 0 : slash);
  }
  static void on_text(void* self, const XML_Char* data, int size) {
    static_cast<Walk*>(self)->text.append(data, static_cast<size_t>(size));
  }
};

struct ParserDeleter {
  void operator()(XML_Parser parser) const { XML_ParserFree(parser); }
};

}  // namespace

absl::StatusOr<std::vector<XmlText>> xml_texts(std::string_view xml) {
  std::unique_ptr<XML_ParserStruct, ParserDeleter> parser(XML_ParserCreate(nullptr));
  if (!parser) return absl::InternalError("expat: no parser");
  Walk walk;
  XML_SetUserData(parser.get(), &walk);
  XML_SetElementHandler(parser.get(), &Walk::on_start, &Walk::on_end);
  XML_SetCharacterDataHandler(parser.get(), &Walk::on_text);
  if (XML_Parse(parser.get(), xml.data(), static_cast<int>(xml.size()), XML_TRUE) == XML_STATUS_ERROR) {
    return absl::InvalidArgumentError(std::string("the answer is not XML: ") +
                                      XML_ErrorString(XML_GetErrorCode(parser.get())));
  }
  return std::move(walk.texts);
}

std::string first_xml_text(const std::vector<XmlText>& texts, std::string_view path) {
  for (const XmlText& t : texts) {
    if (t.path == path) return t.text;
  }
  return "";
}

}  // namespace podscope::storage
