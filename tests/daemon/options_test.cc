#include "daemon/options.h"

#include <gtest/gtest.h>

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
  ASSERT_TRUE(o.apply_yaml("listen: 127.0.0.1:1\nsample_interval_ms: 250\nverbose: true\nupstream: [a:1, b:2]\n",
                           "agent.yaml").ok());
  EXPECT_EQ(s.listen, "127.0.0.1:1");
  EXPECT_EQ(s.interval_ms, 250);
  EXPECT_TRUE(s.verbose);
  EXPECT_EQ(s.upstream, (std::vector<std::string>{"a:1", "b:2"}));
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

}  // namespace
}  // namespace podscope
