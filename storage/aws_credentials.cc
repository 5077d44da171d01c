#include "storage/aws_credentials.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <simdjson.h>

#include <boost/property_tree/ptree.hpp>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "storage/ini.h"
#include "storage/xml.h"

namespace podscope::storage {
namespace {

// Temporary credentials are fetched again this long before they expire.
constexpr int64_t kRefreshAheadS = 300;
// The metadata services answer on the local link at once; waiting longer only delays the error elsewhere.
constexpr int64_t kMetadataTimeoutMs = 2000;

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

std::string home_file(const char* variable, const char* default_relative) {
  if (std::string set = env(variable); !set.empty()) return set;
  return env("HOME") + "/" + default_relative;
}

std::string profile_name() {
  std::string profile = env("AWS_PROFILE");
  return profile.empty() ? "default" : profile;
}

// One profile's keys from an INI file: the credentials file names sections by the profile, the config file as
// "profile NAME" (but "default").
std::optional<boost::property_tree::ptree> ini_section(const std::string& path, const std::string& section) {
  const std::optional<boost::property_tree::ptree> tree = read_ini(path);
  if (!tree) return std::nullopt;
  const auto child = tree->get_child_optional(boost::property_tree::ptree::path_type(section, '\0'));
  if (!child) return std::nullopt;
  return *child;
}

std::optional<boost::property_tree::ptree> config_profile() {
  const std::string profile = profile_name();
  return ini_section(home_file("AWS_CONFIG_FILE", ".aws/config"),
                     profile == "default" ? profile : "profile " + profile);
}

std::string trimmed(const boost::property_tree::ptree& section, const char* key) {
  return std::string(absl::StripAsciiWhitespace(section.get<std::string>(key, "")));
}

int64_t parse_expiration(std::string_view text) {
  absl::Time time;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, std::string(text), &time, &error)) return 0;
  return absl::ToUnixSeconds(time);
}

// A string member of a JSON object, or "".
std::string_view json_field(simdjson::dom::element object, const char* key) {
  std::string_view value;
  if (object[key].get(value) != simdjson::SUCCESS) return {};
  return value;
}

int64_t now_s() { return static_cast<int64_t>(std::time(nullptr)); }

// {AccessKeyId, SecretAccessKey, Token, Expiration}: the container and instance metadata answers.
absl::Status keys_from_json(const std::string& json, SigV4& keys, int64_t& expires_at_s, const std::string& what) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(json).get(doc) != simdjson::SUCCESS) return absl::UnavailableError(what + " answered no JSON");
  const std::string_view id = json_field(doc, "AccessKeyId"), secret = json_field(doc, "SecretAccessKey");
  const std::string_view token = json_field(doc, "Token"), expiration = json_field(doc, "Expiration");
  if (id.empty() || secret.empty())
    return absl::UnavailableError(what + " answered no AccessKeyId and SecretAccessKey");
  keys.access_key_id = std::string(id);
  keys.secret_access_key = std::string(secret);
  keys.session_token = std::string(token);
  expires_at_s = expiration.empty() ? 0 : parse_expiration(expiration);
  return absl::OkStatus();
}

absl::StatusOr<HttpResponse> metadata_get(const std::string& url, std::vector<std::string> headers,
                                          std::string method = "GET") {
  HttpRequest request;
  request.method = std::move(method);
  request.url = url;
  request.headers = std::move(headers);
  request.timeout_ms = kMetadataTimeoutMs;
  return with_retries([&] { return perform(request, 1 << 20); }, 2);
}

std::string imds_endpoint() {
  std::string endpoint = env("AWS_EC2_METADATA_SERVICE_ENDPOINT");
  if (endpoint.empty()) endpoint = "http://169.254.169.254";
  while (endpoint.ends_with('/')) endpoint.pop_back();
  return endpoint;
}

std::string container_uri() {
  if (std::string full = env("AWS_CONTAINER_CREDENTIALS_FULL_URI"); !full.empty()) return full;
  if (std::string relative = env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"); !relative.empty()) {
    return "http://169.254.170.2" + relative;
  }
  return "";
}

// Whether the container credentials endpoint may be sent its authorization token: over https, or over http only to
// this machine or the addresses ECS and EKS Pod Identity serve it on (as AWS's SDKs allow), never in clear text to
// whatever host a URI names.
bool container_uri_trusted(const std::string& uri) {
  std::unique_ptr<CURLU, decltype(&curl_url_cleanup)> url(curl_url(), curl_url_cleanup);
  char* scheme = nullptr;
  char* host = nullptr;
  bool trusted = false;
  if (curl_url_set(url.get(), CURLUPART_URL, uri.c_str(), 0) == CURLUE_OK &&
      curl_url_get(url.get(), CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
      curl_url_get(url.get(), CURLUPART_HOST, &host, 0) == CURLUE_OK) {
    const std::string name = absl::AsciiStrToLower(host);
    in_addr v4{};
    trusted = std::string_view(scheme) == "https" || name == "localhost" || name == "[::1]" ||
              name == "169.254.170.2" || name == "169.254.170.23" || name == "[fd00:ec2::23]" ||
              (inet_pton(AF_INET, name.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127);
  }
  curl_free(scheme);
  curl_free(host);
  return trusted;
}

}  // namespace

S3Endpoint s3_endpoint_from_environment() {
  S3Endpoint out;
  const std::optional<boost::property_tree::ptree> profile = config_profile();
  if (std::string region = env("AWS_REGION"); !region.empty()) {
    out.region = region;
  } else if (std::string fallback = env("AWS_DEFAULT_REGION"); !fallback.empty()) {
    out.region = fallback;
  } else if (profile && !trimmed(*profile, "region").empty()) {
    out.region = trimmed(*profile, "region");
  }
  if (std::string s3 = env("AWS_ENDPOINT_URL_S3"); !s3.empty()) {
    out.endpoint = s3;
  } else if (std::string any = env("AWS_ENDPOINT_URL"); !any.empty()) {
    out.endpoint = any;
  } else if (profile && !trimmed(*profile, "endpoint_url").empty()) {
    out.endpoint = trimmed(*profile, "endpoint_url");
  }
  while (out.endpoint.ends_with('/')) out.endpoint.pop_back();
  return out;
}

absl::StatusOr<std::shared_ptr<AwsCredentials>> AwsCredentials::find(const S3Endpoint& endpoint) {
  std::vector<std::string> looked_at;
  // 1. The environment.
  if (std::string id = env("AWS_ACCESS_KEY_ID"); !id.empty() && !env("AWS_SECRET_ACCESS_KEY").empty()) {
    std::shared_ptr<AwsCredentials> found(
        new AwsCredentials(Kind::kStatic, "AWS_ACCESS_KEY_ID from the environment", endpoint.region));
    found->keys_.access_key_id = id;
    found->keys_.secret_access_key = env("AWS_SECRET_ACCESS_KEY");
    found->keys_.session_token = env("AWS_SESSION_TOKEN");
    return found;
  }
  looked_at.push_back("AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY");
  // 2. The shared files' profile.
  const std::string profile = profile_name();
  const std::string credentials_file = home_file("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
  const std::string config_file = home_file("AWS_CONFIG_FILE", ".aws/config");
  for (const auto& [file, section] : {std::pair{credentials_file, profile},
                                      std::pair{config_file, profile == "default" ? profile : "profile " + profile}}) {
    const std::optional<boost::property_tree::ptree> keys = ini_section(file, section);
    if (!keys || trimmed(*keys, "aws_access_key_id").empty()) continue;
    std::shared_ptr<AwsCredentials> found(
        new AwsCredentials(Kind::kStatic, "profile \"" + profile + "\" of " + file, endpoint.region));
    found->keys_.access_key_id = trimmed(*keys, "aws_access_key_id");
    found->keys_.secret_access_key = trimmed(*keys, "aws_secret_access_key");
    found->keys_.session_token = trimmed(*keys, "aws_session_token");
    return found;
  }
  looked_at.push_back("profile \"" + profile + "\" of " + credentials_file + " and " + config_file);
  // 3. A web identity, 4. the container endpoint, 5. the instance metadata service: fetched now, so a source that
  // does not answer is known before anything is captured.
  std::shared_ptr<AwsCredentials> found;
  if (!env("AWS_WEB_IDENTITY_TOKEN_FILE").empty() && !env("AWS_ROLE_ARN").empty()) {
    found.reset(new AwsCredentials(Kind::kWebIdentity,
                                   "the web identity token " + env("AWS_WEB_IDENTITY_TOKEN_FILE") + " (role " +
                                       env("AWS_ROLE_ARN") + ", through STS)",
                                   endpoint.region));
  } else if (!container_uri().empty()) {
    if (!container_uri_trusted(container_uri())) {
      return absl::FailedPreconditionError(
          "the container credentials endpoint " + container_uri() +
          " is neither https nor on this machine, 169.254.170.2, 169.254.170.23 or fd00:ec2::23: its authorization "
          "token is not sent there");
    }
    found.reset(
        new AwsCredentials(Kind::kContainer, "the container credentials endpoint " + container_uri(), endpoint.region));
  } else if (absl::AsciiStrToLower(env("AWS_EC2_METADATA_DISABLED")) != "true") {
    found.reset(new AwsCredentials(Kind::kInstanceMetadata,
                                   "the instance metadata service (IMDSv2) at " + imds_endpoint(), endpoint.region));
  } else {
    looked_at.push_back("a web identity, the container endpoint and the instance metadata service (disabled)");
    return absl::FailedPreconditionError("no S3 credentials found (looked at: " + absl::StrJoin(looked_at, "; ") + ")");
  }
  std::lock_guard lock(found->mu_);
  if (absl::Status s = found->refresh(); !s.ok()) {
    return absl::FailedPreconditionError("no S3 credentials from " + found->source_ + ": " + std::string(s.message()));
  }
  return found;
}

std::shared_ptr<AwsCredentials> AwsCredentials::fixed(std::string access_key_id, std::string secret, std::string source,
                                                      std::string region) {
  std::shared_ptr<AwsCredentials> out(new AwsCredentials(Kind::kStatic, std::move(source), std::move(region)));
  out->keys_.access_key_id = std::move(access_key_id);
  out->keys_.secret_access_key = std::move(secret);
  return out;
}

absl::StatusOr<SigV4> AwsCredentials::signing_keys() {
  std::lock_guard lock(mu_);
  if (kind_ != Kind::kStatic && expires_at_s_ > 0 && now_s() + kRefreshAheadS >= expires_at_s_) {
    // Keys not yet expired are used while they last when renewing fails: a credentials service that fails for a
    // moment fails no request (a failed renewal changes no key).
    if (absl::Status s = refresh(); !s.ok() && now_s() >= expires_at_s_) {
      return absl::UnavailableError("renewing S3 credentials from " + source_ + ": " + std::string(s.message()));
    }
  }
  return keys_;
}

absl::Status AwsCredentials::refresh() {
  switch (kind_) {
    case Kind::kStatic: return absl::OkStatus();
    case Kind::kWebIdentity: {
      std::ifstream in(env("AWS_WEB_IDENTITY_TOKEN_FILE"));
      std::stringstream token;
      token << in.rdbuf();
      if (!in) return absl::UnavailableError("cannot read " + env("AWS_WEB_IDENTITY_TOKEN_FILE"));
      std::string sts = env("AWS_ENDPOINT_URL_STS");
      if (sts.empty()) sts = "https://sts." + keys_.region + ".amazonaws.com";
      while (sts.ends_with('/')) sts.pop_back();
      std::string session = env("AWS_ROLE_SESSION_NAME");
      if (session.empty()) session = "podscope-" + std::to_string(now_s());
      HttpRequest request;
      request.method = "POST";
      request.url = sts + "/";
      request.headers = {"Content-Type: application/x-www-form-urlencoded"};
      const std::string body =
          "Action=AssumeRoleWithWebIdentity&RoleArn=" + uri_encode(env("AWS_ROLE_ARN"), false) +
          "&RoleSessionName=" + uri_encode(session, false) + "&Version=2011-06-15" +
          "&WebIdentityToken=" + uri_encode(std::string(absl::StripAsciiWhitespace(token.str())), false);
      request.body = body;
      request.timeout_ms = 30'000;
      absl::StatusOr<HttpResponse> answer = with_retries([&] { return perform(request, 1 << 20); });
      if (!answer.ok()) return answer.status();
      absl::StatusOr<std::vector<XmlText>> xml = xml_texts(answer->body);
      if (!xml.ok()) return xml.status();
      if (answer->status != 200) {
        return absl::PermissionDeniedError("STS answered " + std::to_string(answer->status) + ": " +
                                           first_xml_text(*xml, "ErrorResponse/Error/Code") + " " +
                                           first_xml_text(*xml, "ErrorResponse/Error/Message"));
      }
      const std::string base = "AssumeRoleWithWebIdentityResponse/AssumeRoleWithWebIdentityResult/Credentials/";
      const std::string id = first_xml_text(*xml, base + "AccessKeyId");
      const std::string secret = first_xml_text(*xml, base + "SecretAccessKey");
      if (id.empty() || secret.empty()) return absl::UnavailableError("STS answered no credentials");
      keys_.access_key_id = id;
      keys_.secret_access_key = secret;
      keys_.session_token = first_xml_text(*xml, base + "SessionToken");
      expires_at_s_ = parse_expiration(first_xml_text(*xml, base + "Expiration"));
      return absl::OkStatus();
    }
    case Kind::kContainer: {
      std::vector<std::string> headers;
      std::string authorization = env("AWS_CONTAINER_AUTHORIZATION_TOKEN");
      if (const std::string file = env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"); !file.empty()) {
        std::ifstream in(file);
        std::stringstream text;
        text << in.rdbuf();
        authorization = std::string(absl::StripAsciiWhitespace(text.str()));
      }
      if (!authorization.empty()) headers.push_back("Authorization: " + authorization);
      absl::StatusOr<HttpResponse> answer = metadata_get(container_uri(), headers);
      if (!answer.ok()) return answer.status();
      if (answer->status != 200) {
        return absl::UnavailableError("the container endpoint answered " + std::to_string(answer->status));
      }
      return keys_from_json(answer->body, keys_, expires_at_s_, "the container endpoint");
    }
    case Kind::kInstanceMetadata: {
      const std::string base = imds_endpoint();
      absl::StatusOr<HttpResponse> token =
          metadata_get(base + "/latest/api/token", {"X-aws-ec2-metadata-token-ttl-seconds: 21600"}, "PUT");
      if (!token.ok()) return token.status();
      if (token->status != 200) {
        return absl::UnavailableError("IMDSv2 refused a session token (" + std::to_string(token->status) + ")");
      }
      const std::string header = "X-aws-ec2-metadata-token: " + token->body;
      absl::StatusOr<HttpResponse> roles = metadata_get(base + "/latest/meta-data/iam/security-credentials/", {header});
      if (!roles.ok()) return roles.status();
      const std::string role(absl::StripAsciiWhitespace(roles->body.substr(0, roles->body.find('\n'))));
      if (roles->status != 200 || role.empty()) return absl::UnavailableError("the instance has no IAM role");
      absl::StatusOr<HttpResponse> keys =
          metadata_get(base + "/latest/meta-data/iam/security-credentials/" + uri_encode(role, false), {header});
      if (!keys.ok()) return keys.status();
      if (keys->status != 200) {
        return absl::UnavailableError("IMDS answered " + std::to_string(keys->status) + " for role " + role);
      }
      return keys_from_json(keys->body, keys_, expires_at_s_, "the instance metadata service");
    }
  }
  return absl::InternalError("unknown credential source");
}

}  // namespace podscope::storage
