#include "daemon/options.h"

#include <yaml-cpp/yaml.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "absl/strings/str_join.h"

namespace podscope {
namespace {

// Whether the quoted scalar that starts at `pos` of `text` (at its opening quote) has its closing quote. yaml-cpp
// takes a quote left open at the end of a document for a value running to the end, so the document is read again.
bool quote_closes(std::string_view text, size_t pos) {
  const char quote = text[pos];
  for (size_t i = pos + 1; i < text.size(); ++i) {
    if (quote == '"' && text[i] == '\\') {
      ++i;
    } else if (text[i] == quote) {
      if (quote == '\'' && i + 1 < text.size() && text[i + 1] == '\'') {
        ++i;  // '' is a quote inside a single-quoted value
      } else {
        return true;
      }
    }
  }
  return false;
}

// The line (0-based) of the first quoted scalar of `node` that is never closed in `text`.
std::optional<int> first_unterminated_quote(const YAML::Node& node, std::string_view text) {
  if (node.IsScalar()) {
    const YAML::Mark mark = node.Mark();
    const bool quoted = mark.pos >= 0 && static_cast<size_t>(mark.pos) < text.size() &&
                        (text[static_cast<size_t>(mark.pos)] == '"' || text[static_cast<size_t>(mark.pos)] == '\'');
    if (quoted && node.Tag() == "!" && !quote_closes(text, static_cast<size_t>(mark.pos))) return mark.line;
    return std::nullopt;
  }
  if (node.IsMap()) {
    for (const auto& entry : node) {
      for (const YAML::Node& part : {entry.first, entry.second}) {
        if (std::optional<int> line = first_unterminated_quote(part, text)) return line;
      }
    }
  }
  if (node.IsSequence()) {
    for (const YAML::Node& item : node) {
      if (std::optional<int> line = first_unterminated_quote(item, text)) return line;
    }
  }
  return std::nullopt;
}

std::string where(std::string_view source, const YAML::Node& node, std::string_view key) {
  std::ostringstream out;
  out << source << ":" << node.Mark().line + 1 << ": key '" << key << "'";
  return out.str();
}

// The whole of `text` as a T, or an error saying what was `expected`.
template <typename T>
absl::StatusOr<T> parse_number(std::string_view text, std::string_view expected) {
  T value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty()) {
    return absl::InvalidArgumentError("expected " + std::string(expected) + ", got '" + std::string(text) + "'");
  }
  return value;
}

absl::StatusOr<int64_t> parse_int(std::string_view text) { return parse_number<int64_t>(text, "an integer"); }
absl::StatusOr<double> parse_double(std::string_view text) { return parse_number<double>(text, "a number"); }

absl::StatusOr<bool> parse_bool(std::string_view text) {
  if (text == "true" || text == "1" || text == "yes" || text == "on") return true;
  if (text == "false" || text == "0" || text == "no" || text == "off") return false;
  return absl::InvalidArgumentError("expected true or false, got '" + std::string(text) + "'");
}

std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = text.substr(start, comma - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
    start = comma + 1;
  }
  return out;
}

// A YAML scalar as text, or an error naming the key when the node is a list or map.
absl::StatusOr<std::string> scalar(const YAML::Node& node) {
  if (!node.IsScalar()) return absl::InvalidArgumentError("expected a single value, got a list or map");
  return node.Scalar();
}

// A single-valued option reads its YAML value as the text its flag would hold.
std::function<absl::Status(const YAML::Node&)> from_scalar(std::function<absl::Status(std::string_view)> from_text) {
  return [from_text = std::move(from_text)](const YAML::Node& n) -> absl::Status {
    absl::StatusOr<std::string> s = scalar(n);
    if (!s.ok()) return s.status();
    return from_text(*s);
  };
}

// An option of `key` bound to `target`, whose value reads as `text` writes it; its default is the target's value now.
template <typename T>
OptionSet::Option bound_option(std::string key, std::string help, Reload reload, T* target,
                               std::function<std::string(const T&)> text) {
  OptionSet::Option o;
  o.key = std::move(key);
  o.help = std::move(help);
  o.reload = reload;
  o.default_text = text(*target);
  o.value = [target] { return std::any(*target); };
  o.value_text = [target, text = std::move(text)] { return text(*target); };
  o.holds = [target](const std::any& v) { return *target == std::any_cast<const T&>(v); };
  o.assign = [target](const std::any& v) { *target = std::any_cast<const T&>(v); };
  return o;
}

// Sets `target` from text that `parse` reads as a value within [min, max] (written back as `text` writes it).
template <typename T>
std::function<absl::Status(std::string_view)> set_in_range(T* target, T min, T max,
                                                           absl::StatusOr<T> (*parse)(std::string_view),
                                                           std::string (*text)(T)) {
  return [=](std::string_view v) -> absl::Status {
    absl::StatusOr<T> parsed = parse(v);
    if (!parsed.ok()) return parsed.status();
    if (!(*parsed >= min && *parsed <= max)) {  // a NaN is within no range
      return absl::OutOfRangeError("must be between " + text(min) + " and " + text(max) + ", got " + text(*parsed));
    }
    *target = *parsed;
    return absl::OkStatus();
  };
}

std::string int_text(int64_t value) { return std::to_string(value); }

std::string double_text(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

std::string bool_text(bool value) { return value ? "true" : "false"; }

}  // namespace

void OptionSet::add_scalar(Option o, std::function<absl::Status(std::string_view)> from_text) {
  o.from_yaml = from_scalar(from_text);
  o.from_text = std::move(from_text);
  options_.push_back(std::move(o));
}

void OptionSet::add_string(std::string key, std::string* target, std::string help, Reload reload) {
  add_scalar(bound_option<std::string>(std::move(key), std::move(help), reload, target,
                                       [](const std::string& v) { return v; }),
             [target](std::string_view v) {
               *target = std::string(v);
               return absl::OkStatus();
             });
}

void OptionSet::add_int(std::string key, int64_t* target, std::string help, int64_t min, int64_t max, Reload reload) {
  add_scalar(bound_option<int64_t>(std::move(key), std::move(help), reload, target,
                                   [](const int64_t& v) { return int_text(v); }),
             set_in_range<int64_t>(target, min, max, parse_int, int_text));
}

void OptionSet::add_double(std::string key, double* target, std::string help, double min, double max, Reload reload) {
  add_scalar(bound_option<double>(std::move(key), std::move(help), reload, target,
                                  [](const double& v) { return double_text(v); }),
             set_in_range<double>(target, min, max, parse_double, double_text));
}

void OptionSet::add_bool(std::string key, bool* target, std::string help, Reload reload) {
  Option o =
      bound_option<bool>(std::move(key), std::move(help), reload, target, [](const bool& v) { return bool_text(v); });
  o.is_bool = true;
  add_scalar(std::move(o), [target](std::string_view v) -> absl::Status {
    absl::StatusOr<bool> parsed = parse_bool(v);
    if (!parsed.ok()) return parsed.status();
    *target = *parsed;
    return absl::OkStatus();
  });
}

void OptionSet::add_list(std::string key, std::vector<std::string>* target, std::string help, Reload reload) {
  Option o =
      bound_option<std::vector<std::string>>(std::move(key), std::move(help), reload, target,
                                             [](const std::vector<std::string>& v) { return absl::StrJoin(v, ","); });
  o.from_text = [target](std::string_view v) {
    *target = split_list(v);
    return absl::OkStatus();
  };
  o.from_yaml = [target](const YAML::Node& n) -> absl::Status {
    if (n.IsScalar()) {
      *target = split_list(n.Scalar());
      return absl::OkStatus();
    }
    if (!n.IsSequence()) return absl::InvalidArgumentError("expected a list");
    std::vector<std::string> items;
    for (const YAML::Node& item : n) {
      if (!item.IsScalar()) return absl::InvalidArgumentError("list items must be plain values");
      items.push_back(item.Scalar());
    }
    *target = std::move(items);
    return absl::OkStatus();
  };
  options_.push_back(std::move(o));
}

void OptionSet::hide(std::string_view key) {
  if (Option* o = find(key)) o->hidden = true;
}

void OptionSet::add_check(std::string_view key, std::function<absl::Status()> check) {
  Option* o = find(key);
  if (o == nullptr) return;
  o->from_yaml = [from_yaml = std::move(o->from_yaml), check](const YAML::Node& n) -> absl::Status {
    if (absl::Status s = from_yaml(n); !s.ok()) return s;
    return check();
  };
  o->from_text = [from_text = std::move(o->from_text), check](std::string_view v) -> absl::Status {
    if (absl::Status s = from_text(v); !s.ok()) return s;
    return check();
  };
}

OptionSet::Option* OptionSet::find(std::string_view key) {
  for (Option& o : options_) {
    if (o.key == key) return &o;
  }
  return nullptr;
}

absl::Status OptionSet::apply_yaml(std::string_view text, std::string_view source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(std::string(source) + ":" + std::to_string(e.mark.line + 1) +
                                      ": invalid YAML: " + e.msg);
  }
  if (const std::optional<int> line = first_unterminated_quote(root, text)) {
    return absl::InvalidArgumentError(std::string(source) + ":" + std::to_string(*line + 1) +
                                      ": invalid YAML: a quoted value is never closed");
  }
  if (root.IsNull()) return absl::OkStatus();
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(std::string(source) + ":" + std::to_string(root.Mark().line + 1) +
                                      ": the config must be a map of key: value");
  }
  // yaml-cpp throws on conversions the document did not expect (a key that is itself a list or map); no such
  // document may end the daemon, so every error becomes a status that names the line.
  try {
    std::vector<std::string> seen;
    for (const auto& entry : root) {
      const std::string line = std::string(source) + ":" + std::to_string(entry.first.Mark().line + 1);
      if (!entry.first.IsScalar())
        return absl::InvalidArgumentError(line + ": a key must be a plain name, not a list or map");
      const std::string key = entry.first.Scalar();
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
        return absl::InvalidArgumentError(where(source, entry.first, key) + ": duplicate key");
      }
      seen.push_back(key);
      Option* o = find(key);
      if (o == nullptr) return absl::InvalidArgumentError(where(source, entry.first, key) + ": unknown key");
      if (absl::Status s = o->from_yaml(entry.second); !s.ok()) {
        return absl::InvalidArgumentError(where(source, entry.second, key) + ": " + std::string(s.message()));
      }
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(std::string(source) + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  return absl::OkStatus();
}

absl::Status OptionSet::apply_yaml_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot read config file '" + path + "'");
  // Read at most one byte past the limit, so that neither a huge file nor an endless one (a FIFO, /dev/zero) is
  // buffered before it is refused.
  std::string text(kMaxConfigFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxConfigFileBytes) {
    return absl::InvalidArgumentError("config file '" + path + "' is larger than " +
                                      std::to_string(kMaxConfigFileBytes) + " bytes; refused before parsing");
  }
  return apply_yaml(text, path);
}

absl::Status OptionSet::apply_flag(std::string_view key, std::string_view value) {
  Option* o = find(key);
  if (o == nullptr) return absl::InvalidArgumentError("unknown flag --" + std::string(key));
  if (absl::Status s = o->from_text(value); !s.ok()) {
    return absl::InvalidArgumentError("flag --" + std::string(key) + ": " + std::string(s.message()));
  }
  return absl::OkStatus();
}

ReloadOutcome reload_options(OptionSet& running, const OptionSet& fresh) {
  ReloadOutcome outcome;
  const std::vector<OptionSet::Option>& before = running.options();
  const std::vector<OptionSet::Option>& after = fresh.options();
  for (size_t i = 0; i < before.size() && i < after.size(); ++i) {
    const std::any fresh_value = after[i].value();
    if (before[i].holds(fresh_value)) continue;
    ReloadOutcome::Change change{before[i].key, before[i].value_text(), after[i].value_text()};
    if (before[i].reload == Reload::kApplied) {
      before[i].assign(fresh_value);
      outcome.applied.push_back(std::move(change));
    } else {
      outcome.refused.push_back(std::move(change));
    }
  }
  return outcome;
}

absl::Status apply_command_line(const CommandLine& command_line, OptionSet& options) {
  if (!command_line.config_path.empty()) {
    if (absl::Status s = options.apply_yaml_file(command_line.config_path); !s.ok()) return s;
  }
  for (const auto& [key, value] : command_line.flags) {
    if (absl::Status s = options.apply_flag(key, value); !s.ok()) return s;
  }
  return absl::OkStatus();
}

ParseOutcome parse_command_line(int argc, char** argv, OptionSet& options, std::string_view program,
                                std::string_view description, std::string_view version) {
  CLI::App app{std::string(description), std::string(program)};
  app.get_formatter()->column_width(36);
  ParseOutcome outcome;
  app.add_option("--config", outcome.command_line.config_path, "YAML config file (flags override its keys)");
  bool show_version = false;
  app.add_flag("--version", show_version, "Print the version and exit");

  std::vector<std::string> values(options.options().size());
  std::vector<CLI::Option*> cli_options;
  for (size_t i = 0; i < options.options().size(); ++i) {
    const OptionSet::Option& o = options.options()[i];
    const std::string help = o.help + " (default: " + (o.default_text.empty() ? "\"\"" : o.default_text) + ")";
    CLI::Option* cli = o.is_bool ? app.add_flag("--" + o.key + "{true}", values[i], help)
                                 : app.add_option("--" + o.key, values[i], help);
    if (o.hidden) cli->group("");
    cli_options.push_back(cli);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    std::cout << app.help();
    outcome.kind = ParseOutcome::kExit;
    outcome.exit_code = 0;
    return outcome;
  } catch (const CLI::ParseError& e) {
    std::cerr << program << ": " << e.what() << " (see --help)\n";
    outcome.kind = ParseOutcome::kExit;
    outcome.exit_code = 2;
    return outcome;
  }
  if (show_version) {
    std::cout << program << " " << version << "\n";
    outcome.kind = ParseOutcome::kExit;
    outcome.exit_code = 0;
    return outcome;
  }
  for (size_t i = 0; i < cli_options.size(); ++i) {
    if (cli_options[i]->count() > 0) outcome.command_line.flags.emplace_back(options.options()[i].key, values[i]);
  }
  if (absl::Status s = apply_command_line(outcome.command_line, options); !s.ok()) {
    std::cerr << program << ": " << s.message() << "\n";
    outcome.kind = ParseOutcome::kExit;
    outcome.exit_code = 2;
  }
  return outcome;
}

}  // namespace podscope
