#include "storage/google_credentials.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <simdjson.h>

#include <boost/property_tree/ptree.hpp>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "storage/http.h"
#include "storage/ini.h"

namespace podscope::storage {
namespace {

constexpr char kCloudStorage[] = "https://storage.googleapis.com";
constexpr char kReadWriteScope[] = "https://www.googleapis.com/auth/devstorage.read_write";
constexpr int64_t kRefreshAheadS = 300;

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

// A string member of a JSON object, or `fallback`.
std::string_view json_field(simdjson::dom::element object, const char* key, std::string_view fallback = {}) {
  std::string_view value;
  if (object[key].get(value) != simdjson::SUCCESS) return fallback;
  return value;
}

int64_t now_s() { return static_cast<int64_t>(std::time(nullptr)); }

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// base64url without padding, as JWTs are written.
std::string base64url(std::string_view bytes) {
  std::string out = base64(bytes);
  while (!out.empty() && out.back() == '=') out.pop_back();
  for (char& c : out) c = c == '+' ? '-' : c == '/' ? '_' : c;
  return out;
}

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// An RS256 signature of `data` with a PEM private key (a service account key's `private_key`).
absl::StatusOr<std::string> sign_rs256(std::string_view pem, std::string_view data) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr),
                                                          EVP_PKEY_free);
  if (!key) return absl::InvalidArgumentError("the service account key's private_key is no PEM private key");
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  size_t size = 0;
  if (EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &size, reinterpret_cast<const unsigned char*>(data.data()), data.size()) !=
          1) {
    return absl::InternalError("OpenSSL could not sign the JWT");
  }
  std::string signature(size, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(signature.data()), &size,
                     reinterpret_cast<const unsigned char*>(data.data()), data.size()) != 1) {
    return absl::InternalError("OpenSSL could not sign the JWT");
  }
  signature.resize(size);
  return signature;
}

// An OAuth token endpoint's (or the metadata server's) answer: {access_token, expires_in}.
absl::Status take_token(const absl::StatusOr<HttpResponse>& answer, const std::string& from, std::string& token,
                        int64_t& expires_at_s) {
  if (!answer.ok()) return answer.status();
  if (answer->status != 200) {
    return absl::PermissionDeniedError(from + " answered HTTP " + std::to_string(answer->status) + ": " +
                                       answer->body.substr(0, 300));
  }
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view access_token;
  int64_t expires_in = 3600;
  if (parser.parse(answer->body).get(doc) != simdjson::SUCCESS ||
      doc["access_token"].get(access_token) != simdjson::SUCCESS) {
    return absl::UnavailableError(from + " answered no access_token");
  }
  if (doc["expires_in"].get(expires_in) != simdjson::SUCCESS) expires_in = 3600;
  token = std::string(access_token);
  expires_at_s = now_s() + expires_in;
  return absl::OkStatus();
}

std::string emulator_endpoint() {
  std::string endpoint = env("STORAGE_EMULATOR_HOST");
  if (endpoint.empty()) endpoint = env("CLOUD_STORAGE_EMULATOR_ENDPOINT");
  if (endpoint.empty()) return "";
  if (endpoint.find("://") == std::string::npos) endpoint = "http://" + endpoint;
  while (endpoint.ends_with('/')) endpoint.pop_back();
  return endpoint;
}

// gsutil's HMAC keys and XML API host from its boto configuration.
std::optional<GoogleHmac> boto_hmac() {
  const std::string path = !env("BOTO_CONFIG").empty() ? env("BOTO_CONFIG") : env("HOME") + "/.boto";
  const std::optional<boost::property_tree::ptree> tree = read_ini(path);
  if (!tree) return std::nullopt;
  auto get = [&](const char* key) { return std::string(absl::StripAsciiWhitespace(tree->get<std::string>(key, ""))); };
  GoogleHmac hmac;
  hmac.access_key_id = get("Credentials.gs_access_key_id");
  hmac.secret = get("Credentials.gs_secret_access_key");
  if (hmac.access_key_id.empty() || hmac.secret.empty()) return std::nullopt;
  const std::string host = get("Credentials.gs_host");
  const std::string port = get("Credentials.gs_port");
  const bool secure = absl::AsciiStrToLower(get("Boto.is_secure")) != "false";
  hmac.endpoint = host.empty() ? kCloudStorage
                               : std::string(secure ? "https://" : "http://") + host + (port.empty() ? "" : ":" + port);
  hmac.source = "HMAC key gs_access_key_id of " + path;
  return hmac;
}

}  // namespace

absl::StatusOr<std::shared_ptr<GoogleCredentials>> GoogleCredentials::find(std::optional<GoogleHmac>& hmac) {
  if (std::string emulator = emulator_endpoint(); !emulator.empty()) {
    return std::shared_ptr<GoogleCredentials>(
        new GoogleCredentials(Kind::kEmulator, emulator, "the emulator at " + emulator + " (no credentials)"));
  }
  std::vector<std::pair<std::string, std::string>> key_files;
  if (std::string file = env("GOOGLE_APPLICATION_CREDENTIALS"); !file.empty()) {
    key_files.emplace_back(file, "GOOGLE_APPLICATION_CREDENTIALS");
  }
  std::shared_ptr<GoogleCredentials> found;
  auto from_key_file = [&](const std::string& file, const std::string& how) -> absl::Status {
    std::optional<std::string> json = read_file(file);
    if (!json) return absl::FailedPreconditionError(how + " names " + file + ", which cannot be read");
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    std::string_view type;
    if (parser.parse(*json).get(doc) != simdjson::SUCCESS || doc["type"].get(type) != simdjson::SUCCESS) {
      return absl::FailedPreconditionError(how + " names " + file + ", which is no credentials JSON");
    }
    Kind kind;
    if (type == "service_account") {
      kind = Kind::kServiceAccount;
    } else if (type == "authorized_user") {
      kind = Kind::kAuthorizedUser;
    } else {
      return absl::FailedPreconditionError(how + " names " + file + " of type \"" + std::string(type) +
                                           "\"; service_account and authorized_user are supported");
    }
    const std::string_view email = json_field(doc, "client_email");
    found.reset(new GoogleCredentials(kind, kCloudStorage,
                                      (kind == Kind::kServiceAccount ? "service account " + std::string(email) + " ("
                                                                     : std::string("user credentials (")) +
                                          how + " " + file + ")"));
    found->key_json_ = std::move(*json);
    return absl::OkStatus();
  };
  if (!key_files.empty()) {
    if (absl::Status s = from_key_file(key_files[0].first, key_files[0].second); !s.ok()) return s;
  } else if (hmac = boto_hmac(); hmac) {
    return nullptr;
  } else if (const std::string adc = env("HOME") + "/.config/gcloud/application_default_credentials.json";
             read_file(adc)) {
    if (absl::Status s = from_key_file(adc, "gcloud's application default credentials"); !s.ok()) return s;
  } else {
    std::string host = env("GCE_METADATA_HOST");
    if (host.empty()) host = "metadata.google.internal";
    found.reset(new GoogleCredentials(Kind::kMetadataServer, kCloudStorage, "the metadata server at " + host));
  }
  std::lock_guard lock(found->mu_);
  if (absl::Status s = found->refresh(); !s.ok()) {
    return absl::FailedPreconditionError("no Cloud Storage credentials from " + found->source_ + ": " +
                                         std::string(s.message()));
  }
  return found;
}

absl::StatusOr<std::string> GoogleCredentials::authorization() {
  if (kind_ == Kind::kEmulator) return std::string();
  std::lock_guard lock(mu_);
  if (now_s() + kRefreshAheadS >= expires_at_s_) {
    // A token not yet expired is used while it lasts when renewing fails (a failed renewal keeps it).
    if (absl::Status s = refresh(); !s.ok() && now_s() >= expires_at_s_) {
      return absl::UnavailableError("renewing the access token from " + source_ + ": " + std::string(s.message()));
    }
  }
  return "Bearer " + token_;
}

absl::Status GoogleCredentials::refresh() {
  HttpRequest request;
  request.timeout_ms = 30'000;
  std::string body;
  switch (kind_) {
    case Kind::kEmulator: return absl::OkStatus();
    case Kind::kMetadataServer: {
      std::string host = env("GCE_METADATA_HOST");
      if (host.empty()) host = "metadata.google.internal";
      request.url = "http://" + host + "/computeMetadata/v1/instance/service-accounts/default/token";
      request.headers = {"Metadata-Flavor: Google"};
      request.timeout_ms = 5000;
      return take_token(with_retries([&] { return perform(request, 1 << 20); }, 3), "the metadata server", token_,
                        expires_at_s_);
    }
    case Kind::kServiceAccount: {
      simdjson::dom::parser parser;
      simdjson::dom::element key;
      if (parser.parse(key_json_).get(key) != simdjson::SUCCESS)
        return absl::InvalidArgumentError("the key is no JSON");
      const std::string_view email = json_field(key, "client_email"), private_key = json_field(key, "private_key");
      const std::string_view token_uri = json_field(key, "token_uri", "https://oauth2.googleapis.com/token");
      const std::string_view key_id = json_field(key, "private_key_id");
      if (email.empty() || private_key.empty()) {
        return absl::InvalidArgumentError("the key has no client_email and private_key");
      }
      const int64_t now = now_s();
      const std::string header = "{\"alg\":\"RS256\",\"typ\":\"JWT\",\"kid\":" + json_string(key_id) + "}";
      const std::string claims = "{\"iss\":" + json_string(email) + ",\"scope\":\"" + kReadWriteScope +
                                 "\",\"aud\":" + json_string(token_uri) + ",\"iat\":" + std::to_string(now) +
                                 ",\"exp\":" + std::to_string(now + 3600) + "}";
      const std::string unsigned_jwt = base64url(header) + "." + base64url(claims);
      absl::StatusOr<std::string> signature = sign_rs256(private_key, unsigned_jwt);
      if (!signature.ok()) return signature.status();
      body = "grant_type=" + uri_encode("urn:ietf:params:oauth:grant-type:jwt-bearer", false) +
             "&assertion=" + unsigned_jwt + "." + base64url(*signature);
      request.url = std::string(token_uri);
      break;
    }
    case Kind::kAuthorizedUser: {
      simdjson::dom::parser parser;
      simdjson::dom::element key;
      if (parser.parse(key_json_).get(key) != simdjson::SUCCESS) {
        return absl::InvalidArgumentError("the user credentials are no JSON");
      }
      const std::string_view refresh_token = json_field(key, "refresh_token");
      const std::string_view client_id = json_field(key, "client_id"), client_secret = json_field(key, "client_secret");
      const std::string_view token_uri = json_field(key, "token_uri", "https://oauth2.googleapis.com/token");
      if (refresh_token.empty()) return absl::InvalidArgumentError("the user credentials have no refresh_token");
      body = "grant_type=refresh_token&client_id=" + uri_encode(client_id, false) +
             "&client_secret=" + uri_encode(client_secret, false) +
             "&refresh_token=" + uri_encode(refresh_token, false);
      request.url = std::string(token_uri);
      break;
    }
  }
  request.method = "POST";
  request.headers = {"Content-Type: application/x-www-form-urlencoded"};
  request.body = body;
  return take_token(with_retries([&] { return perform(request, 1 << 20); }), "the token endpoint " + request.url,
                    token_, expires_at_s_);
}

}  // namespace podscope::storage
