// The cloud credential endpoints a test cannot reach (AWS's instance metadata, container credentials and STS;
// Google's metadata server and OAuth token endpoint), stood in for by cloud_credentials_standin.py on a loopback port
// of its own, in the storage environment's Python. The test gives it the keys to hand out and reads back every
// request it was sent.
#pragma once

#include <simdjson.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "tests/scratch_directory.h"
#include "tests/storage/storage_servers.h"

namespace podscope::testing {

class CredentialsStandIn {
 public:
  struct Request {
    std::string method;
    std::string path;
    std::map<std::string, std::string> headers;  // names in lower case
    int64_t status = 0;
    std::string outcome;  // what the stand-in made of it: "keys <id>", "no session token", "Invalid JWT Signature."
  };

  // `config`: the JSON the stand-in's docstring describes.
  explicit CredentialsStandIn(const std::string& config) : dir_("credentials-standin") {
    std::ofstream(dir_.path() / "config.json") << config;
    process_.start({(storage_venv() / "bin" / "python").string(), "-B",
                    std::string(PODSCOPE_SOURCE_DIR) + "/tests/storage/cloud_credentials_standin.py",
                    dir_.path().string(), (dir_.path() / "config.json").string()},
                   dir_.path() / "standin.log");
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!std::filesystem::exists(dir_.path() / "port")) {
      if (std::chrono::steady_clock::now() > until) {
        throw std::runtime_error("the credentials stand-in did not start; see " + dir_.file("standin.log"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::ifstream(dir_.path() / "port") >> port_;
  }

  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string endpoint() const { return "http://" + host(); }
  // A file of the test's own beside the stand-in's state (key files, tokens).
  std::string file(std::string_view name) const { return dir_.file(name); }

  // Every request answered so far, in order.
  std::vector<Request> requests() const {
    std::vector<Request> out;
    std::ifstream in(dir_.path() / "requests.jsonl");
    std::string line;
    simdjson::dom::parser parser;
    while (std::getline(in, line)) {
      simdjson::dom::element entry;
      if (parser.parse(line).get(entry) != simdjson::SUCCESS) continue;
      Request request;
      std::string_view method, path, outcome;
      simdjson::dom::object headers;
      if (entry["method"].get(method) != simdjson::SUCCESS || entry["path"].get(path) != simdjson::SUCCESS ||
          entry["status"].get(request.status) != simdjson::SUCCESS ||
          entry["outcome"].get(outcome) != simdjson::SUCCESS || entry["headers"].get(headers) != simdjson::SUCCESS) {
        continue;
      }
      request.method = std::string(method);
      request.path = std::string(path);
      request.outcome = std::string(outcome);
      for (const simdjson::dom::key_value_pair field : headers) {
        std::string_view value;
        if (field.value.get(value) == simdjson::SUCCESS)
          request.headers[absl::AsciiStrToLower(std::string(field.key))] = std::string(value);
      }
      out.push_back(std::move(request));
    }
    return out;
  }
  // How many requests were answered with credentials (keys or a token).
  int credentials_handed_out() const {
    int n = 0;
    for (const Request& r : requests()) n += r.outcome.starts_with("keys ") || r.outcome.starts_with("token ");
    return n;
  }

 private:
  ScratchDirectory dir_;
  ServerProcess process_;
  int port_ = 0;
};

}  // namespace podscope::testing
