#include "daemon/metrics_basic_auth.h"

#include <crypt.h>
#include <pthread.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <optional>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "absl/strings/escaping.h"

namespace podscope {
namespace {

// "Basic dXNlcjpwYXNz" → "user:pass"; nullopt when it is not a Basic credential.
std::optional<std::string> basic_credentials(std::string_view authorization) {
  constexpr std::string_view kScheme = "basic ";
  if (authorization.size() <= kScheme.size() ||
      !std::equal(kScheme.begin(), kScheme.end(), authorization.begin(),
                  [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); })) {
    return std::nullopt;
  }
  std::string_view token = authorization.substr(kScheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  std::string decoded;
  if (token.empty() || !absl::Base64Unescape(absl::string_view(token.data(), token.size()), &decoded)) {
    return std::nullopt;
  }
  return decoded;
}

}  // namespace

MetricsBasicAuth::MetricsBasicAuth() {
  RAND_bytes(salt_.data(), static_cast<int>(salt_.size()));
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "podscope-auth");
    run();
  });
}

MetricsBasicAuth::~MetricsBasicAuth() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

MetricsBasicAuth::Digest MetricsBasicAuth::digest(const std::string& user, const std::string& hash,
                                                  const std::string& password) const {
  Digest out{};
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  EVP_DigestUpdate(ctx, salt_.data(), salt_.size());
  // Each part is preceded by its length, so that no two (user, hash, password) give the same input.
  for (const std::string* part : {&user, &hash, &password}) {
    const uint64_t size = part->size();
    EVP_DigestUpdate(ctx, &size, sizeof size);
    EVP_DigestUpdate(ctx, part->data(), part->size());
  }
  EVP_DigestFinal_ex(ctx, out.data(), nullptr);
  EVP_MD_CTX_free(ctx);
  return out;
}

void MetricsBasicAuth::check(std::shared_ptr<const Users> users, std::string_view authorization,
                             std::function<void(Outcome)> done) {
  std::optional<std::string> credentials = basic_credentials(authorization);
  const size_t colon = credentials.has_value() ? credentials->find(':') : std::string::npos;
  if (colon == std::string::npos) {
    done(Outcome::kNoCredentials);
    return;
  }
  Check check{std::move(users), credentials->substr(0, colon), credentials->substr(colon + 1), std::move(done)};
  OPENSSL_cleanse(credentials->data(), credentials->size());
  // crypt_rn reads a C string: a password with a NUL would be checked as its prefix.
  if (check.password.find('\0') != std::string::npos) {
    check.done(Outcome::kWrongCredentials);
    return;
  }
  const auto user = check.users->find(check.user);
  const Digest presented = user == check.users->end() ? Digest{} : digest(check.user, user->second, check.password);
  std::unique_lock lock(mu_);
  if (user != check.users->end()) {
    const auto passed = passed_.find(check.user);
    if (passed != passed_.end() && CRYPTO_memcmp(passed->second.data(), presented.data(), presented.size()) == 0) {
      lock.unlock();
      OPENSSL_cleanse(check.password.data(), check.password.size());
      check.done(Outcome::kAllowed);
      return;
    }
  }
  if (waiting_.size() >= kMaxWaitingChecks) {
    lock.unlock();
    OPENSSL_cleanse(check.password.data(), check.password.size());
    check.done(Outcome::kBusy);
    return;
  }
  waiting_.push_back(std::move(check));
  lock.unlock();
  wake_.notify_one();
}

void MetricsBasicAuth::run() {
  while (true) {
    std::unique_lock lock(mu_);
    wake_.wait(lock, [this] { return stopping_ || !waiting_.empty(); });
    if (stopping_) return;
    Check check = std::move(waiting_.front());
    waiting_.pop_front();
    lock.unlock();
    const Outcome outcome = verify(check);
    OPENSSL_cleanse(check.password.data(), check.password.size());
    check.done(outcome);
  }
}

MetricsBasicAuth::Outcome MetricsBasicAuth::verify(const Check& check) {
  const auto user = check.users->find(check.user);
  const bool known = user != check.users->end();
  // An unknown user costs a check against another user's hash: the same time, and never a pass.
  const std::string& hash = known ? user->second : check.users->begin()->second;
  auto data = std::make_unique<crypt_data>();
  const char* result = crypt_rn(check.password.c_str(), hash.c_str(), data.get(), sizeof(crypt_data));
  const bool matches =
      result != nullptr && std::strlen(result) == hash.size() && CRYPTO_memcmp(result, hash.data(), hash.size()) == 0;
  OPENSSL_cleanse(data.get(), sizeof(crypt_data));
  if (!known || !matches) return Outcome::kWrongCredentials;
  const Digest passed = digest(check.user, hash, check.password);
  std::lock_guard lock(mu_);
  passed_[check.user] = passed;
  return Outcome::kAllowed;
}

}  // namespace podscope
