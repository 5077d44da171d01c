// The cloud tools' INI files the credentials are found in (AWS's credentials and config files, gsutil's boto
// configuration), through Boost.PropertyTree: sections and keys as a tree, "Section.key".
#pragma once

#include <boost/property_tree/ptree.hpp>
#include <optional>
#include <string>

namespace podscope::storage {

// The file's sections, or nullopt when it cannot be read or is no INI file (the tools then look elsewhere).
std::optional<boost::property_tree::ptree> read_ini(const std::string& path);

}  // namespace podscope::storage
