// The stores against real servers started here (storage_servers.h), and a local directory: objects written whole or
// not at all, read back byte for byte, listed (with versions that tell every write), removed; a wrong key, a missing
// bucket, a server killed mid-upload and started again, a server that stalls; and the service checking the checksums
// sent with what it receives.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <random>
#include <stdexcept>
#include <thread>

#include "storage/http.h"
#include "storage/location.h"
#include "storage/store.h"
#include "tests/never_accepting_listener.h"
#include "tests/scratch_directory.h"
#include "tests/storage/storage_servers.h"

namespace podscope::storage {
namespace {

using testing::FakeGcs;
using testing::ScopedEnvironment;
using testing::SeaweedS3;

std::string random_bytes(size_t size, uint32_t seed) {
  std::mt19937 random(seed);
  std::string out(size, '\0');
  for (char& c : out) c = static_cast<char>(random());
  return out;
}

std::shared_ptr<Store> store_at(const std::string& url) {
  absl::StatusOr<Location> location = parse_location(url);
  EXPECT_TRUE(location.ok()) << location.status();
  absl::StatusOr<std::shared_ptr<Store>> store = open_store(*location);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *store : nullptr;
}

// Writes `bytes` in pieces of `piece` through a writer and commits.
absl::Status write_in_pieces(Store& store, const std::string& name, const std::string& bytes, size_t piece) {
  absl::StatusOr<std::unique_ptr<ObjectWriter>> writer = store.create(name, LocalDurability::kRebuildable);
  if (!writer.ok()) return writer.status();
  for (size_t at = 0; at < bytes.size(); at += piece) {
    if (absl::Status s = (*writer)->write(std::string_view(bytes).substr(at, piece)); !s.ok()) return s;
  }
  return (*writer)->commit();
}

class Servers : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::storage_servers_installed()) return;
  }
};

// An object's version is told alike by its listing and by its lookup, and changes when the object is written again,
// even with bytes of the same size (what ties a host's database to its file without reading it).
void expect_versions_tell_writes(Store& store, const ObjectInfo& listed, const ObjectInfo& looked_up,
                                 const std::string& bytes) {
  EXPECT_FALSE(listed.version.empty());
  EXPECT_EQ(listed.version, looked_up.version);
  std::string other = bytes;
  other.front() ^= 1;
  ASSERT_TRUE(write_object(store, listed.name, other, LocalDurability::kRebuildable).ok());
  absl::StatusOr<ObjectInfo> rewritten = store.stat(listed.name);
  ASSERT_TRUE(rewritten.ok()) << rewritten.status();
  EXPECT_EQ(rewritten->size, bytes.size());
  EXPECT_NE(rewritten->version, listed.version);
}

// The same contract, whichever service: small and multi-part objects round trip, list and go.
void round_trip(Store& store) {
  const std::string small = "capture.json of a run";
  const std::string large = random_bytes(20 << 20 | 12345, 1);  // three parts, the last short
  ASSERT_TRUE(write_object(store, "run/capture.json", small, LocalDurability::kRebuildable).ok());
  absl::Status written = write_in_pieces(store, "run/host0.xplane.pb", large, 1 << 20 | 7);
  ASSERT_TRUE(written.ok()) << written;
  absl::StatusOr<std::vector<ObjectInfo>> listed = store.list("run/");
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].name, "run/capture.json");
  EXPECT_EQ((*listed)[0].size, small.size());
  EXPECT_EQ((*listed)[1].name, "run/host0.xplane.pb");
  EXPECT_EQ((*listed)[1].size, large.size());
  absl::StatusOr<std::string> read = read_object(store, "run/host0.xplane.pb", 64 << 20);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(*read == large) << "the object read back is not the object written";
  absl::StatusOr<ObjectInfo> info = store.stat("run/capture.json");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->size, small.size());
  EXPECT_TRUE(absl::IsNotFound(store.stat("run/none").status()));
  expect_versions_tell_writes(store, (*listed)[0], *info, small);
  ASSERT_TRUE(store.remove("run/capture.json").ok());
  ASSERT_TRUE(store.remove("run/host0.xplane.pb").ok());
  EXPECT_TRUE(store.list("run/")->empty());
  EXPECT_TRUE(store.check_writable().ok());
}

// A writer given up leaves nothing, not even after bytes of several parts went out.
void abort_leaves_nothing(Store& store) {
  absl::StatusOr<std::unique_ptr<ObjectWriter>> writer =
      store.create("gone/host.xplane.pb", LocalDurability::kRebuildable);
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->write(random_bytes(17 << 20, 2)).ok());
  (*writer)->abort();
  EXPECT_TRUE(store.list("gone/")->empty());
  EXPECT_TRUE(absl::IsNotFound(store.stat("gone/host.xplane.pb").status()));
}

TEST_F(Servers, S3ObjectsRoundTripWithEverySignatureChecked) {
  SeaweedS3 s3;
  ScopedEnvironment env(s3.environment());
  std::shared_ptr<Store> store = store_at("s3://runs/logs");
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->credential_source(), "AWS_ACCESS_KEY_ID from the environment");
  round_trip(*store);
  abort_leaves_nothing(*store);
}

TEST(LocalStore, FilesRoundTripAsObjectsDo) {
  const podscope::testing::ScratchDirectory scratch("local_store");
  std::shared_ptr<Store> store = store_at(scratch.path().string());
  ASSERT_NE(store, nullptr);
  round_trip(*store);
}

TEST_F(Servers, GcsObjectsRoundTripThroughResumableUploads) {
  FakeGcs gcs;
  ScopedEnvironment env({{"STORAGE_EMULATOR_HOST", gcs.endpoint()}});
  std::shared_ptr<Store> store = store_at("gs://runs/logs");
  ASSERT_NE(store, nullptr);
  round_trip(*store);
  abort_leaves_nothing(*store);
}

TEST_F(Servers, AWrongKeyIsRefusedNamingTheObjectAndTheCredentialsSourceButNotTheSecret) {
  SeaweedS3 s3;
  auto variables = s3.environment();
  variables.emplace_back("AWS_SECRET_ACCESS_KEY", "not-the-secret");
  ScopedEnvironment env(variables);
  std::shared_ptr<Store> store = store_at("s3://runs/logs");
  ASSERT_NE(store, nullptr);
  const absl::Status refused = store->check_writable();
  EXPECT_TRUE(absl::IsPermissionDenied(refused)) << refused;
  EXPECT_NE(refused.message().find("s3://runs/logs/"), std::string::npos) << refused;
  EXPECT_NE(refused.message().find("AWS_ACCESS_KEY_ID from the environment"), std::string::npos) << refused;
  EXPECT_EQ(refused.message().find("not-the-secret"), std::string::npos) << refused;
  EXPECT_FALSE(write_object(*store, "x", "y", LocalDurability::kRebuildable).ok());
}

TEST_F(Servers, AMissingBucketIsNotFoundNamingIt) {
  SeaweedS3 s3;
  FakeGcs gcs;
  ScopedEnvironment env([&] {
    auto v = s3.environment();
    v.emplace_back("STORAGE_EMULATOR_HOST", gcs.endpoint());
    return v;
  }());
  for (const char* url : {"s3://no-such-bucket/logs", "gs://no-such-bucket/logs"}) {
    std::shared_ptr<Store> store = store_at(url);
    ASSERT_NE(store, nullptr);
    const absl::Status missing = store->check_writable();
    EXPECT_TRUE(absl::IsNotFound(missing)) << url << ": " << missing;
    EXPECT_NE(missing.message().find("no-such-bucket"), std::string::npos) << missing;
  }
}

TEST_F(Servers, AnUploadGoesOnWhenItsServerIsKilledAndStartedAgain) {
  SeaweedS3 s3;
  ScopedEnvironment env(s3.environment());
  std::shared_ptr<Store> store = store_at("s3://runs/logs");
  ASSERT_NE(store, nullptr);
  const std::string bytes = random_bytes(24 << 20, 3);
  absl::StatusOr<std::unique_ptr<ObjectWriter>> writer =
      store->create("run/host.xplane.pb", LocalDurability::kRebuildable);
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->write(std::string_view(bytes).substr(0, 9 << 20)).ok());  // one part is in
  s3.kill();
  std::thread restart([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    s3.start();
  });
  // The next part meets a dead server, and is retried until the server is back.
  const absl::Status rest = (*writer)->write(std::string_view(bytes).substr(9 << 20));
  const absl::Status committed = rest.ok() ? (*writer)->commit() : rest;
  restart.join();
  ASSERT_TRUE(committed.ok()) << committed;
  absl::StatusOr<std::string> read = read_object(*store, "run/host.xplane.pb", 64 << 20);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(*read == bytes);
}

TEST_F(Servers, AServerThatStallsIsGivenUpAfterTheIdleTimeoutNamingTheObject) {
  // A server that takes connections and never answers.
  testing::NeverAcceptingListener listener;
  ScopedEnvironment env({{"AWS_ENDPOINT_URL", "http://" + listener.address()},
                         {"AWS_ACCESS_KEY_ID", "a"},
                         {"AWS_SECRET_ACCESS_KEY", "b"},
                         {"PODSCOPE_STORAGE_IDLE_TIMEOUT_S", "1"}});
  std::shared_ptr<Store> store = store_at("s3://runs/logs");
  ASSERT_NE(store, nullptr);
  const auto start = std::chrono::steady_clock::now();
  const absl::Status stalled = write_object(*store, "run/capture.json", "{}", LocalDurability::kRebuildable);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(absl::IsUnavailable(stalled)) << stalled;
  EXPECT_NE(stalled.message().find("s3://runs/logs/run/capture.json"), std::string::npos) << stalled;
  EXPECT_NE(stalled.message().find("idle timeout"), std::string::npos) << stalled;
  // 5 tries of 1 s, with their backoff: bounded, with room for a loaded machine.
  EXPECT_LT(seconds, 60);
}

TEST_F(Servers, TheServiceRefusesAPartWhoseChecksumIsNotItsBytes) {
  SeaweedS3 s3;
  ScopedEnvironment env(s3.environment());
  const SigV4 keys{"us-east-1", SeaweedS3::kAccessKey, SeaweedS3::kSecretKey, ""};
  HttpRequest request;
  request.method = "PUT";
  request.url = s3.endpoint() + "/runs/checked";
  const std::string body = "the bytes sent";
  request.body = body;
  request.headers = {"Content-MD5: " + md5_base64("other bytes")};
  request.sigv4 = &keys;
  absl::StatusOr<HttpResponse> refused = perform(request);
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->status, 400) << refused->body;
  request.headers = {"Content-MD5: " + md5_base64(body)};
  absl::StatusOr<HttpResponse> taken = perform(request);
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(taken->status, 200) << taken->body;
}

// A loopback server that answers every request with one fixed answer: a service's answer, malformed as a test needs.
class CannedAnswerServer {
 public:
  CannedAnswerServer(std::string content_type, std::string body) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof address;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || ::listen(fd_, 16) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
      throw std::runtime_error("cannot listen on loopback");
    }
    port_ = ntohs(address.sin_port);
    answer_ = "HTTP/1.1 200 OK\r\nContent-Type: " + content_type +
              "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    thread_ = std::thread([this] { serve(); });
  }
  ~CannedAnswerServer() {
    ::shutdown(fd_, SHUT_RDWR);  // wakes the accept
    thread_.join();
    ::close(fd_);
  }

  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  // Reads each request's head (the stores' reads have no body) and answers it.
  void serve() {
    while (true) {
      const int connection = ::accept(fd_, nullptr, nullptr);
      if (connection < 0) return;
      std::string head;
      char buffer[4096];
      ssize_t got = 0;
      while (head.find("\r\n\r\n") == std::string::npos && (got = ::read(connection, buffer, sizeof buffer)) > 0) {
        head.append(buffer, static_cast<size_t>(got));
      }
      for (size_t sent = 0; sent < answer_.size();) {
        const ssize_t wrote = ::write(connection, answer_.data() + sent, answer_.size() - sent);
        if (wrote <= 0) break;
        sent += static_cast<size_t>(wrote);
      }
      ::close(connection);
    }
  }

  int fd_ = -1;
  int port_ = 0;
  std::string answer_;
  std::thread thread_;
};

TEST(ServiceAnswers, AnObjectSizeThatIsNoNumberIsAnErrorNamingTheObjectNotAnEmptyObject) {
  {
    CannedAnswerServer s3("application/xml",
                          "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult><Name>runs</Name><Contents>"
                          "<Key>logs/run/host0.xplane.pb</Key><Size>12abc</Size><ETag>\"e1\"</ETag></Contents>"
                          "<IsTruncated>false</IsTruncated></ListBucketResult>");
    ScopedEnvironment env(
        {{"AWS_ENDPOINT_URL", s3.endpoint()}, {"AWS_ACCESS_KEY_ID", "a"}, {"AWS_SECRET_ACCESS_KEY", "b"}});
    std::shared_ptr<Store> store = store_at("s3://runs/logs");
    ASSERT_NE(store, nullptr);
    const absl::Status listed = store->list("run/").status();
    EXPECT_FALSE(listed.ok());
    EXPECT_NE(listed.message().find("s3://runs/logs/run/host0.xplane.pb"), std::string::npos) << listed;
    EXPECT_NE(listed.message().find("\"12abc\", not a number"), std::string::npos) << listed;
  }
  CannedAnswerServer gcs("application/json",
                         R"({"items": [{"name": "logs/run/host0.xplane.pb", "size": "twelve", "generation": "7"}],)"
                         R"( "name": "logs/run/host0.xplane.pb", "size": "twelve", "generation": "7"})");
  ScopedEnvironment env({{"STORAGE_EMULATOR_HOST", gcs.endpoint()}});
  std::shared_ptr<Store> store = store_at("gs://runs/logs");
  ASSERT_NE(store, nullptr);
  for (const absl::Status& answer : {store->list("run/").status(), store->stat("run/host0.xplane.pb").status()}) {
    EXPECT_FALSE(answer.ok());
    EXPECT_NE(answer.message().find("gs://runs/logs/run/host0.xplane.pb"), std::string::npos) << answer;
    EXPECT_NE(answer.message().find("\"twelve\", not a number"), std::string::npos) << answer;
  }
}

TEST(Locations, BucketUrlsAreParsedAndHostilePrefixesRefused) {
  absl::StatusOr<Location> s3 = parse_location("s3://runs/team/a/");
  ASSERT_TRUE(s3.ok());
  EXPECT_EQ(s3->bucket, "runs");
  EXPECT_EQ(s3->key, "team/a");
  EXPECT_EQ(s3->url(), "s3://runs/team/a");
  EXPECT_EQ(s3->child("plugins/profile").url(), "s3://runs/team/a/plugins/profile");
  EXPECT_EQ(s3->parent().url(), "s3://runs/team");
  for (const char* bad : {"s3://runs/a/../b", "gs://runs/a//b", "gs://Runs/a", "s3://ru", "gs://runs/a\nb",
                          "gcs://runs/a", "http://runs/a", "s3://runs/./a"}) {
    EXPECT_FALSE(parse_location(bad).ok()) << bad;
  }
  EXPECT_TRUE(lies_under(*parse_location("s3://runs/team/a"), *parse_location("s3://runs/")));
  EXPECT_TRUE(lies_under(*parse_location("s3://runs/team/a"), *parse_location("s3://runs/team")));
  EXPECT_FALSE(lies_under(*parse_location("s3://runs/teams/a"), *parse_location("s3://runs/team")));
  EXPECT_FALSE(lies_under(*parse_location("gs://runs/team"), *parse_location("s3://runs/")));
  EXPECT_FALSE(lies_under(*parse_location("s3://runs2/team"), *parse_location("s3://runs")));
}

}  // namespace
}  // namespace podscope::storage
