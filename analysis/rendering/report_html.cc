// report.html: the page's files (report.html, report.css, report.js, embedded at build time) with each tab's body,
// drawing and data inline. No external scripts, styles, fonts or images, so it opens offline.
#include <string>

#include "absl/strings/str_replace.h"
#include "analysis/rendering/report_page.h"
#include "analysis/rendering/renderers.h"

namespace podscope::analysis {
namespace {

// The page's files are std::string_views; absl's functions take its own.
absl::string_view view(std::string_view text) { return {text.data(), text.size()}; }

std::string escape_html(std::string_view text) {
  return absl::StrReplaceAll(view(text), {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

}  // namespace

std::string render_report_html(std::span<const ReportTab> tabs, const std::string& title) {
  std::string sections, script(report_page_file("report.js")), json = "{";
  for (const ReportTab& tab : tabs) {
    sections.append("<section id=\"tab-")
        .append(tab.id)
        .append("\" data-title=\"")
        .append(escape_html(tab.title))
        .append("\">\n")
        .append(tab.body)
        .append("</section>\n");
    script.append(tab.script);
    if (json.size() > 1) json += ",";
    json.append("\"").append(tab.data_key).append("\":").append(tab.data_json);
  }
  json += "}";
  // Inside <script>, "</" could close the element early; JSON allows "<" escaped as \u003c.
  const std::string safe_json = absl::StrReplaceAll(json, {{"<", "\\u003c"}});
  return absl::StrReplaceAll(view(report_page_file("report.html")), {{"@TITLE@", escape_html(title)},
                                                                     {"@STYLE@", view(report_page_file("report.css"))},
                                                                     {"@SECTIONS@", sections},
                                                                     {"@SCRIPT@", script},
                                                                     {"@DATA@", safe_json}});
}

}  // namespace podscope::analysis
