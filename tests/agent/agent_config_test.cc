// AgentConfig: configs/agent.yaml documents every key with its default, and bad input names key and line.
#include "agent/agent_config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace podscope::agent {
namespace {

std::string documented_config() {
  std::ifstream in(std::string(PODSCOPE_SOURCE_DIR) + "/configs/agent.yaml");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(AgentConfig, ShippedConfigAppliesAndLeavesEveryDefaultUnchanged) {
  AgentConfig defaults, config;
  OptionSet options;
  declare_agent_options(config, options);
  absl::Status s = options.apply_yaml(documented_config(), "configs/agent.yaml");
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(config.listen, defaults.listen);
  EXPECT_EQ(config.metrics_listen, defaults.metrics_listen);
  EXPECT_EQ(config.socket, defaults.socket);
  EXPECT_EQ(config.sample_interval_ms, defaults.sample_interval_ms);
  EXPECT_EQ(config.max_duration_ms, defaults.max_duration_ms);
  EXPECT_EQ(config.repository_root, defaults.repository_root);
  EXPECT_EQ(config.log_level, defaults.log_level);
}

TEST(AgentConfig, ShippedConfigDocumentsEveryVisibleKey) {
  AgentConfig config;
  OptionSet options;
  declare_agent_options(config, options);
  const std::string text = documented_config();
  for (const OptionSet::Option& o : options.options()) {
    if (o.hidden) continue;
    EXPECT_NE(text.find("\n" + o.key + ":"), std::string::npos) << "configs/agent.yaml lacks key " << o.key;
  }
}

TEST(AgentConfig, TestHookIsHiddenFromHelp) {
  AgentConfig config;
  OptionSet options;
  declare_agent_options(config, options);
  for (const OptionSet::Option& o : options.options()) {
    EXPECT_EQ(o.hidden, o.key == "clock_offset_ns") << o.key;
  }
}

TEST(AgentConfig, ErrorsNameKeyAndLine) {
  AgentConfig config;
  OptionSet options;
  declare_agent_options(config, options);
  absl::Status s = options.apply_yaml("listen: 127.0.0.1:1\nmax_duration_ms: 0\n", "agent.yaml");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("agent.yaml:2: key 'max_duration_ms'"), std::string::npos) << s.message();
  s = options.apply_yaml("sample_interval_ms: fast\n", "agent.yaml");
  EXPECT_NE(std::string(s.message()).find("agent.yaml:1: key 'sample_interval_ms'"), std::string::npos) << s.message();
  s = options.apply_yaml("\n\nlisten_addr: x\n", "agent.yaml");
  EXPECT_EQ(s.message(), "agent.yaml:3: key 'listen_addr': unknown key");
}

TEST(AgentConfig, FlagsOverrideTheFile) {
  AgentConfig config;
  OptionSet options;
  declare_agent_options(config, options);
  ASSERT_TRUE(options.apply_yaml("sample_interval_ms: 250\n", "agent.yaml").ok());
  ASSERT_TRUE(options.apply_flag("sample_interval_ms", "500").ok());
  EXPECT_EQ(config.sample_interval_ms, 500);
}

TEST(AgentConfig, EffectiveHostName) {
  AgentConfig config;
  EXPECT_FALSE(effective_host_name(config).empty());
  config.host_name = "node-7";
  EXPECT_EQ(effective_host_name(config), "node-7");
}

}  // namespace
}  // namespace podscope::agent
