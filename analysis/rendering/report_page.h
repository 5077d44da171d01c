// report.html's page files (report.html, the page with its placeholders; report.css; report.js, what every tab draws
// with), embedded at build time (cmake/embed_files.cmake).
#pragma once

#include <string_view>

namespace podscope::analysis {

// The content of the page file `file` (empty: no such file).
std::string_view report_page_file(std::string_view file);

}  // namespace podscope::analysis
