#include "storage/ini.h"

#include <boost/property_tree/ini_parser.hpp>
#include <fstream>

namespace podscope::storage {

std::optional<boost::property_tree::ptree> read_ini(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  boost::property_tree::ptree tree;
  try {
    boost::property_tree::read_ini(in, tree);
  } catch (const boost::property_tree::ini_parser_error&) {
    return std::nullopt;
  }
  return tree;
}

}  // namespace podscope::storage
