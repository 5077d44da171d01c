// OptionSet: every setting of a daemon declared once — YAML key, command-line flag of the same name, type,
// default, range, help and what a reload does with it. Values apply in order: default, then the YAML file
// (--config), then flags. Errors name the key (and the file and line for YAML); callers exit 2 with that one line.
#pragma once

#include <any>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace YAML {
class Node;
}

namespace podscope {

// A config file larger than this is refused before it is parsed: ours are a few KiB.
inline constexpr size_t kMaxConfigFileBytes = 1 << 20;

// What a reload (SIGHUP re-reading the config) does with a changed value. An option is refused unless its
// declaration says the daemon applies it, so that no value ever changes without taking effect.
enum class Reload {
  kRefused,  // needs a restart: the running value stays, and the reload names the option
  kApplied,  // the daemon's reload puts the new value in force
};

class OptionSet {
 public:
  void add_string(std::string key, std::string* target, std::string help, Reload reload = Reload::kRefused);
  void add_int(std::string key, int64_t* target, std::string help, int64_t min, int64_t max,
               Reload reload = Reload::kRefused);
  void add_double(std::string key, double* target, std::string help, double min, double max,
                  Reload reload = Reload::kRefused);
  void add_bool(std::string key, bool* target, std::string help, Reload reload = Reload::kRefused);
  // A list: a YAML sequence, or a comma-separated string (the flag form).
  void add_list(std::string key, std::vector<std::string>* target, std::string help, Reload reload = Reload::kRefused);
  // Keeps a test-only option out of --help (it still works as a flag and a YAML key).
  void hide(std::string_view key);
  // Checks a key's value each time one is applied (one the system must know, such as a group name): its error
  // names the key, and the file and line for YAML, like any other bad value.
  void add_check(std::string_view key, std::function<absl::Status()> check);

  // Applies a YAML document; `source` names it in errors (usually the file path). Unknown or duplicate keys, keys
  // that are lists or maps and values of the wrong shape are errors that name the line.
  absl::Status apply_yaml(std::string_view text, std::string_view source);
  absl::Status apply_yaml_file(const std::string& path);
  // Applies one flag value given as text.
  absl::Status apply_flag(std::string_view key, std::string_view value);

  struct Option {
    std::string key;
    std::string help;
    std::string default_text;
    bool is_bool = false;
    bool hidden = false;
    Reload reload = Reload::kRefused;
    std::function<absl::Status(const YAML::Node&)> from_yaml;
    std::function<absl::Status(std::string_view)> from_text;
    // The value in force: as a copy, as text (for messages), compared with a copy, and set from a copy (a copy is of
    // the target's type: only an OptionSet with the same declarations hands one over).
    std::function<std::any()> value;
    std::function<std::string()> value_text;
    std::function<bool(const std::any&)> holds;
    std::function<void(const std::any&)> assign;
  };
  const std::vector<Option>& options() const { return options_; }

 private:
  // Adds `o`, a single-valued option: its YAML value reads as the text its flag would hold.
  void add_scalar(Option o, std::function<absl::Status(std::string_view)> from_text);
  Option* find(std::string_view key);
  std::vector<Option> options_;
};

// A reload: `running` is declared over the config in force and `fresh` over the re-read one, by the same function.
// Every option whose value changed is listed; each one declared Reload::kApplied takes its new value in the running
// config (only those are written), every other keeps its running value and is listed as refused.
struct ReloadOutcome {
  struct Change {
    std::string key, before, after;
  };
  std::vector<Change> applied;
  std::vector<Change> refused;
};
ReloadOutcome reload_options(OptionSet& running, const OptionSet& fresh);

// What the command line said, kept so that a reload (SIGHUP) can re-apply it over a re-read config file.
struct CommandLine {
  std::string config_path;
  std::vector<std::pair<std::string, std::string>> flags;  // in the order given
};

struct ParseOutcome {
  enum Kind { kRun, kExit } kind = kRun;
  int exit_code = 0;  // for kExit: 0 after --help/--version, 2 on a usage error (message already printed)
  CommandLine command_line;
};

// Parses argv against `options` (plus --config, --help, --version) and applies config file then flags.
ParseOutcome parse_command_line(int argc, char** argv, OptionSet& options, std::string_view program,
                                std::string_view description, std::string_view version);

// Applies a parsed command line (config file then flags) to a freshly declared OptionSet, as a reload does.
absl::Status apply_command_line(const CommandLine& command_line, OptionSet& options);

}  // namespace podscope
