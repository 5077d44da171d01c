#include "daemon/options.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "tests/scratch_directory.h"

namespace podscope {
namespace {

struct Settings {
  std::string listen = "0.0.0.0:8466";
  int64_t interval_ms = 1000;
  bool verbose = false;
  std::vector<std::string> upstream;
};

OptionSet declare(Settings& s) {
  OptionSet o;
  o.add_string("listen", &s.listen, "address");
  o.add_int("sample_interval_ms", &s.interval_ms, "period", 10, 60000);
  o.add_bool("verbose", &s.verbose, "chatty");
  o.add_list("upstream", &s.upstream, "servers");
  return o;
}

TEST(OptionSet, YamlSetsEveryKind) {
  Settings s;
  OptionSet o = declare(s);
  ASSERT_TRUE(
      o.apply_yaml("listen: 127.0.0.1:1\nsample_interval_ms: 250\nverbose: true\nupstream: [a:1, b:2]\n", "agent.yaml")
          .ok());
  EXPECT_EQ(s.listen, "127.0.0.1:1");
  EXPECT_EQ(s.interval_ms, 250);
  EXPECT_TRUE(s.verbose);
  EXPECT_EQ(s.upstream, (std::vector<std::string>{"a:1", "b:2"}));
}

TEST(OptionSet, AQuoteLeftOpenIsAnErrorNamingItsLineNotAValueRunningToTheEnd) {
  const std::pair<std::string, std::string> cases[] = {{"verbose: true\nlisten: \"127.0.0.1:1\n", "agent.yaml:2:"},
                                                       {"verbose: true\nlisten: '127.0.0.1:1\n", "agent.yaml:2:"},
                                                       {"verbose: true\nupstream:\n  - \"a:1\n", "agent.yaml:3:"}};
  for (const auto& [yaml, line] : cases) {
    Settings s;
    OptionSet o = declare(s);
    const absl::Status st = o.apply_yaml(yaml, "agent.yaml");
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << yaml;
    EXPECT_NE(std::string(st.message()).find(line + " invalid YAML: a quoted value is never closed"), std::string::npos)
        << st.message();
  }
  // Closed quotes, escaped quotes inside them included, are values like any other.
  Settings s;
  OptionSet o = declare(s);
  ASSERT_TRUE(o.apply_yaml("listen: 'it''s:1'\nupstream: [\"a\\\"b:1\", c:2]\n", "agent.yaml").ok());
  EXPECT_EQ(s.listen, "it's:1");
  EXPECT_EQ(s.upstream, (std::vector<std::string>{"a\"b:1", "c:2"}));
}

TEST(OptionSet, UnknownKeyIsNamedWithItsLine) {
  Settings s;
  OptionSet o = declare(s);
  absl::Status st = o.apply_yaml("listen: x\n\nsample_intervall_ms: 5\n", "agent.yaml");
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "agent.yaml:3: key 'sample_intervall_ms': unknown key");
}

TEST(OptionSet, WrongTypeIsNamedWithItsLine) {
  Settings s;
  OptionSet o = declare(s);
  absl::Status st = o.apply_yaml("verbose: true\nsample_interval_ms: fast\n", "agent.yaml");
  EXPECT_EQ(st.message(), "agent.yaml:2: key 'sample_interval_ms': expected an integer, got 'fast'");
}

TEST(OptionSet, CheckedValueErrorNamesTheLineOrTheFlag) {
  Settings s;
  OptionSet o = declare(s);
  o.add_check("upstream", [&s]() -> absl::Status {
    for (const std::string& u : s.upstream)
      if (u.find(':') == std::string::npos) return absl::InvalidArgumentError("'" + u + "' has no port");
    return absl::OkStatus();
  });
  EXPECT_TRUE(o.apply_yaml("upstream: [a:1]\n", "agent.yaml").ok());
  EXPECT_EQ(o.apply_yaml("verbose: true\nupstream: [a:1, b]\n", "agent.yaml").message(),
            "agent.yaml:2: key 'upstream': 'b' has no port");
  EXPECT_EQ(o.apply_flag("upstream", "c").message(), "flag --upstream: 'c' has no port");
}

TEST(OptionSet, OutOfRangeIsNamed) {
  Settings s;
  OptionSet o = declare(s);
  absl::Status st = o.apply_yaml("sample_interval_ms: 5\n", "agent.yaml");
  EXPECT_EQ(st.message(), "agent.yaml:1: key 'sample_interval_ms': must be between 10 and 60000, got 5");
  EXPECT_EQ(s.interval_ms, 1000);
}

TEST(OptionSet, FlagsOverrideTheFile) {
  Settings s;
  OptionSet o = declare(s);
  CommandLine cl;
  cl.flags = {{"sample_interval_ms", "500"}, {"upstream", "x:1, y:2"}};
  ASSERT_TRUE(apply_command_line(cl, o).ok());
  EXPECT_EQ(s.interval_ms, 500);
  EXPECT_EQ(s.upstream, (std::vector<std::string>{"x:1", "y:2"}));
  EXPECT_EQ(o.apply_flag("sample_interval_ms", "-3").message(),
            "flag --sample_interval_ms: must be between 10 and 60000, got -3");
}

TEST(OptionSet, InvalidYamlSaysWhere) {
  Settings s;
  OptionSet o = declare(s);
  absl::Status st = o.apply_yaml("listen: [unclosed\n", "agent.yaml");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("agent.yaml:"), std::string::npos);
}

TEST(OptionSet, KeyThatIsAListOrMapIsAnErrorNotACrash) {
  for (const char* doc : {"listen: x\n[a, b]: 1\n", "listen: x\n? {a: 1}\n: 2\n", "? [1]\n: [2]\n"}) {
    Settings s;
    OptionSet o = declare(s);
    absl::Status st = o.apply_yaml(doc, "agent.yaml");
    ASSERT_FALSE(st.ok()) << doc;
    EXPECT_NE(st.message().find("agent.yaml:"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("a key must be a plain name"), std::string::npos) << st.message();
  }
}

TEST(OptionSet, ValueOfTheWrongShapeIsNamedWithItsLine) {
  Settings s;
  OptionSet o = declare(s);
  absl::Status st = o.apply_yaml("listen: x\nsample_interval_ms: {a: 1}\n", "agent.yaml");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("agent.yaml:2: key 'sample_interval_ms'"), std::string::npos) << st.message();
  st = o.apply_yaml("upstream: [[a], b]\n", "agent.yaml");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("key 'upstream'"), std::string::npos) << st.message();
}

TEST(OptionSet, DuplicateKeyIsAnErrorNamingTheSecondLine) {
  Settings s;
  OptionSet o = declare(s);
  absl::Status st = o.apply_yaml("listen: a:1\nverbose: true\nlisten: b:2\n", "agent.yaml");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("agent.yaml:3: key 'listen': duplicate key"), std::string::npos) << st.message();
}

TEST(OptionSet, ConfigFileOverTheSizeLimitIsRefusedBeforeParsing) {
  const testing::ScratchDirectory scratch("options");
  const std::string path = scratch.file("huge_config.yaml");
  {
    std::ofstream out(path);
    out << "listen: x\n";
    out << "# " << std::string(kMaxConfigFileBytes, 'x') << "\n";
  }
  Settings s;
  OptionSet o = declare(s);
  absl::Status st = o.apply_yaml_file(path);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("larger than 1048576 bytes"), std::string::npos) << st.message();
  EXPECT_EQ(s.listen, "0.0.0.0:8466") << "nothing of a refused file is applied";
}

TEST(OptionSet, EndlessConfigSourceIsRefusedWithoutReadingItAll) {
  Settings s;
  OptionSet o = declare(s);
  absl::Status st = o.apply_yaml_file("/dev/zero");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("larger than"), std::string::npos) << st.message();
}

TEST(OptionSet, AReloadAppliesOnlyTheOptionsDeclaredSoAndListsEveryChange) {
  struct Config {
    std::string listen = "0.0.0.0:1";
    int64_t interval_ms = 1000;
    double factor = 2.0;
    std::vector<std::string> upstream;
  };
  auto declare_config = [](Config& c, OptionSet& o) {
    o.add_string("listen", &c.listen, "address");
    o.add_int("sample_interval_ms", &c.interval_ms, "period", 10, 60000, Reload::kApplied);
    o.add_double("factor", &c.factor, "factor", 1, 10);
    o.add_list("upstream", &c.upstream, "servers", Reload::kApplied);
  };
  Config running, fresh;
  OptionSet running_options, fresh_options;
  declare_config(running, running_options);
  declare_config(fresh, fresh_options);
  ASSERT_TRUE(fresh_options.apply_yaml("listen: 127.0.0.1:2\nsample_interval_ms: 250\nupstream: [a:1]\n", "x").ok());
  const ReloadOutcome outcome = reload_options(running_options, fresh_options);
  ASSERT_EQ(outcome.refused.size(), 1u);
  EXPECT_EQ(outcome.refused[0].key, "listen");
  EXPECT_EQ(outcome.refused[0].before, "0.0.0.0:1");
  EXPECT_EQ(outcome.refused[0].after, "127.0.0.1:2");
  EXPECT_EQ(running.listen, "0.0.0.0:1") << "a refused option keeps its running value";
  ASSERT_EQ(outcome.applied.size(), 2u);
  EXPECT_EQ(outcome.applied[0].key, "sample_interval_ms");
  EXPECT_EQ(outcome.applied[0].after, "250");
  EXPECT_EQ(outcome.applied[1].key, "upstream");
  EXPECT_EQ(running.interval_ms, 250);
  EXPECT_EQ(running.upstream, std::vector<std::string>{"a:1"});
  EXPECT_EQ(running.factor, 2.0) << "an unchanged option is neither applied nor refused";
}

}  // namespace
}  // namespace podscope
