#include "agent/capture/upstream_profile_call.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <mutex>
#include <string_view>

namespace podscope::agent {
namespace {

constexpr size_t kPrefixBytes = 5;  // gRPC's message prefix: a compressed flag, then the length (big-endian)
constexpr char kProfilePath[] = "/tensorflow.ProfilerService/Profile";

// What the transfer has received so far.
struct Transfer {
  size_t max_answer_bytes = 0;
  const std::atomic<bool>* cancelled = nullptr;
  std::string prefix;
  bool have_length = false;
  bool too_large = false;
  bool compressed = false;
  bool extra_bytes = false;  // more than one message in a unary answer
  size_t declared = 0;
  std::string message;
  std::string grpc_status;
  std::string grpc_message;
};

// The answer's bytes as they arrive: the prefix is read first, so a message longer than allowed is never held.
// Returning fewer bytes than given ends the transfer.
size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto& t = *static_cast<Transfer*>(user);
  const size_t given = size * count;
  for (size_t at = 0; at < given;) {
    if (!t.have_length) {
      const size_t take = std::min(kPrefixBytes - t.prefix.size(), given - at);
      t.prefix.append(data + at, take);
      at += take;
      if (t.prefix.size() < kPrefixBytes) continue;
      t.have_length = true;
      t.compressed = t.prefix[0] != 0;
      for (size_t i = 1; i < kPrefixBytes; ++i) t.declared = t.declared << 8 | static_cast<uint8_t>(t.prefix[i]);
      if (t.compressed) return 0;
      if (t.declared > t.max_answer_bytes) {
        t.too_large = true;
        return 0;
      }
      t.message.reserve(t.declared);
      continue;
    }
    const size_t take = std::min(t.declared - t.message.size(), given - at);
    if (take == 0) {
      t.extra_bytes = true;
      return 0;
    }
    t.message.append(data + at, take);
    at += take;
  }
  return given;
}

// Headers and, after the body, trailers: only grpc-status and grpc-message matter.
size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto& t = *static_cast<Transfer*>(user);
  const std::string_view line(data, size * count);
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return size * count;
  std::string name(line.substr(0, colon));
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) {
    value.remove_suffix(1);
  }
  if (name == "grpc-status") t.grpc_status = value;
  if (name == "grpc-message") t.grpc_message = value;
  return size * count;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<Transfer*>(user)->cancelled->load() ? 1 : 0;
}

// grpc-message is percent-encoded.
std::string percent_decoded(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && std::isxdigit(text[i + 1]) && std::isxdigit(text[i + 2])) {
      out += static_cast<char>(std::stoi(std::string(text.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_NOTHING); });
}

}  // namespace

UpstreamAnswer call_upstream_profile(const std::string& address, const tensorflow::ProfileRequest& request,
                                     size_t max_answer_bytes, std::chrono::system_clock::time_point deadline,
                                     const std::atomic<bool>& cancelled) {
  global_init();
  UpstreamAnswer answer;
  const auto left_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::system_clock::now()).count();
  if (left_ms <= 0) {
    answer.error = "deadline passed before the call";
    return answer;
  }
  const std::string message = request.SerializeAsString();
  std::string body(kPrefixBytes, '\0');
  for (size_t i = 0; i < 4; ++i) body[1 + i] = static_cast<char>(message.size() >> (24 - 8 * i) & 0xFF);
  body += message;

  Transfer transfer;
  transfer.max_answer_bytes = max_answer_bytes;
  transfer.cancelled = &cancelled;
  CURL* curl = curl_easy_init();
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Content-Type: application/grpc");
  headers = curl_slist_append(headers, "TE: trailers");
  headers = curl_slist_append(
      headers, ("grpc-timeout: " + std::to_string(std::min<int64_t>(left_ms, 99'999'999)) + "m").c_str());
  headers = curl_slist_append(headers, "Expect:");
  char error[CURL_ERROR_SIZE] = {};
  const std::string url = "http://" + address + kProfilePath;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http");
  curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");  // the server is on this host; a proxy in the environment is not
  curl_easy_setopt(curl, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(left_ms));
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  const CURLcode done = curl_easy_perform(curl);
  long http_status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &http_status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);

  answer.declared_bytes = transfer.declared;
  if (transfer.too_large) {
    answer.outcome = UpstreamAnswer::Outcome::kTooLarge;
  } else if (transfer.compressed) {
    answer.error = "the answer came compressed, which was not asked for";
  } else if (transfer.extra_bytes) {
    answer.error = "more than one message in the answer to a unary call";
  } else if (done == CURLE_ABORTED_BY_CALLBACK) {
    answer.error = "cancelled";
  } else if (done != CURLE_OK) {
    answer.error = std::string(curl_easy_strerror(done)) + (error[0] != '\0' ? std::string(": ") + error : "");
  } else if (http_status != 200) {
    answer.error = "HTTP status " + std::to_string(http_status) + " (not a gRPC server?)";
  } else if (transfer.grpc_status.empty()) {
    answer.error = "no grpc-status in the answer (not a gRPC server?)";
  } else if (transfer.grpc_status != "0") {
    answer.error = "grpc-status " + transfer.grpc_status + " " + percent_decoded(transfer.grpc_message);
  } else if (!transfer.have_length || transfer.message.size() != transfer.declared) {
    answer.error = "the answer ended " + std::to_string(transfer.message.size()) + " bytes into its " +
                   std::to_string(transfer.declared) + "-byte message";
  } else {
    answer.outcome = UpstreamAnswer::Outcome::kAnswered;
    answer.bytes = std::move(transfer.message);
  }
  return answer;
}

}  // namespace podscope::agent
