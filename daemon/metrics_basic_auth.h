// HTTP basic authentication of the metrics server against metrics_web_config's basic_auth_users (bcrypt hashes,
// verified by libxcrypt's crypt_rn).
//
// A bcrypt check costs tens of milliseconds by design, so checks run one at a time on a thread of their own, never on
// the thread that serves connections, with at most kMaxWaitingChecks waiting: a flood of guesses is answered "busy"
// and cannot delay a scrape. A password that passed is remembered per user (a salted SHA-256 of user, hash and
// password), so a scraper pays one check per password, not one per scrape. An unknown user is checked against another
// user's hash, so the answer takes as long whether the user exists or not.
#pragma once

#include <array>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace podscope {

class MetricsBasicAuth {
 public:
  enum class Outcome {
    kAllowed,
    kNoCredentials,     // no Authorization header, or not a Basic one
    kWrongCredentials,  // unknown user or wrong password
    kBusy,              // kMaxWaitingChecks checks were waiting already
  };
  using Users = std::map<std::string, std::string>;  // user → bcrypt hash
  static constexpr size_t kMaxWaitingChecks = 8;

  MetricsBasicAuth();
  // Waits for the check in progress (at most one bcrypt of the largest allowed cost); waiting ones are dropped.
  ~MetricsBasicAuth();
  MetricsBasicAuth(const MetricsBasicAuth&) = delete;
  MetricsBasicAuth& operator=(const MetricsBasicAuth&) = delete;

  // Decides on a request's Authorization header value against `users` (not empty). `done` is called once: before
  // this returns when the answer is known at once (no credentials, a remembered password, busy), else later on the
  // checking thread.
  void check(std::shared_ptr<const Users> users, std::string_view authorization, std::function<void(Outcome)> done);

 private:
  using Digest = std::array<unsigned char, 32>;
  struct Check {
    std::shared_ptr<const Users> users;
    std::string user, password;
    std::function<void(Outcome)> done;
  };

  Digest digest(const std::string& user, const std::string& hash, const std::string& password) const;
  void run();
  Outcome verify(const Check& check);

  std::array<unsigned char, 16> salt_{};
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Check> waiting_;
  std::map<std::string, Digest> passed_;  // per user, the digest of the password that last passed
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace podscope
