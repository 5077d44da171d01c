#include "storage/http.h"

#include <curl/curl.h>
#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"

namespace podscope::storage {
namespace {

// What a connection may go without moving a byte before it is given up.
int64_t idle_timeout_s() {
  int64_t seconds = 30;
  if (const char* text = std::getenv("PODSCOPE_STORAGE_IDLE_TIMEOUT_S"); text != nullptr) {
    if (!absl::SimpleAtoi(text, &seconds) || seconds <= 0) seconds = 30;
  }
  return seconds;
}

void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct EasyDeleter {
  void operator()(CURL* curl) const { curl_easy_cleanup(curl); }
};
struct ListDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};
using Easy = std::unique_ptr<CURL, EasyDeleter>;
using HeaderList = std::unique_ptr<curl_slist, ListDeleter>;

// Collects the response's status line and headers (those of the last response, past any 100 Continue).
struct HeaderSink {
  long status = 0;
  std::map<std::string, std::string> headers;
  bool complete = false;

  static size_t on_header(char* data, size_t size, size_t count, void* self) {
    auto& sink = *static_cast<HeaderSink*>(self);
    std::string_view line(data, size * count);
    if (line.starts_with("HTTP/")) {
      sink.headers.clear();
      sink.complete = false;
      const size_t space = line.find(' ');
      // A status line without a number leaves no status: the answer never completes and the call fails.
      if (space == std::string_view::npos || !absl::SimpleAtoi(std::string(line.substr(space + 1, 3)), &sink.status))
        sink.status = 0;
    } else if (line == "\r\n" || line == "\n") {
      sink.complete = sink.status >= 200;
    } else if (const size_t colon = line.find(':'); colon != std::string_view::npos) {
      sink.headers[absl::AsciiStrToLower(std::string(line.substr(0, colon)))] =
          std::string(absl::StripAsciiWhitespace(std::string(line.substr(colon + 1))));
    }
    return size * count;
  }
};

// Sets up `curl` for `request`: its method, headers, body and signing; `headers` keeps the header list alive.
HeaderList prepare(CURL* curl, const HttpRequest& request, HeaderSink& sink) {
  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 10'000L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, static_cast<long>(idle_timeout_s()));
  if (request.timeout_ms > 0) curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout_ms));
  // curl asks for a 100 Continue before a large body; a service that sends none costs this wait.
  curl_easy_setopt(curl, CURLOPT_EXPECT_100_TIMEOUT_MS, 200L);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &HeaderSink::on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &sink);
  curl_slist* list = nullptr;
  for (const std::string& header : request.headers) list = curl_slist_append(list, header.c_str());
  if (request.method == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (request.method != "GET") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    // The body as POST fields whatever the method (curl sends them with its length, from our memory, uncopied).
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data());
    if (std::none_of(request.headers.begin(), request.headers.end(),
                     [](const std::string& h) { return absl::StartsWithIgnoreCase(h, "content-type:"); })) {
      list = curl_slist_append(list, "Content-Type: application/octet-stream");
    }
  }
  if (request.sigv4 != nullptr) {
    const std::string provider = "aws:amz:" + request.sigv4->region + ":s3";
    curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, provider.c_str());
    curl_easy_setopt(curl, CURLOPT_USERNAME, request.sigv4->access_key_id.c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, request.sigv4->secret_access_key.c_str());
    // curl 7.88 signs the payload hash it is given (and every x-amz- header), but does not compute one itself. A body
    // sent with its Content-MD5 (a part, an object), which the signature covers and the service checks, is not
    // hashed a second time: S3's UNSIGNED-PAYLOAD, as AWS's own SDKs send a body whose checksum travels with it.
    const bool has_md5 = std::any_of(request.headers.begin(), request.headers.end(), [](const std::string& h) {
      return absl::StartsWithIgnoreCase(h, "content-md5:");
    });
    list = curl_slist_append(
        list,
        ("x-amz-content-sha256: " + (has_md5 ? std::string("UNSIGNED-PAYLOAD") : sha256_hex(request.body))).c_str());
    if (!request.sigv4->session_token.empty()) {
      list = curl_slist_append(list, ("x-amz-security-token: " + request.sigv4->session_token).c_str());
    }
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
  return HeaderList(list);
}

absl::Status transport_error(CURLcode code, const char* detail, const std::string& method, const std::string& url) {
  // The URL's query may hold a resumable session's id: only scheme, host and path are named.
  const std::string where = url.substr(0, url.find('?'));
  std::string message = method + " " + where + ": " + (detail[0] != '\0' ? detail : curl_easy_strerror(code));
  if (code == CURLE_OPERATION_TIMEDOUT) message += " (no progress within the idle timeout)";
  return absl::UnavailableError(message);
}

std::string digest(const EVP_MD* md, std::string_view bytes) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(bytes.data(), bytes.size(), out, &size, md, nullptr);
  return std::string(reinterpret_cast<char*>(out), size);
}

}  // namespace

std::string HttpResponse::header(const std::string& lowercase_name) const {
  const auto it = headers.find(lowercase_name);
  return it == headers.end() ? "" : it->second;
}

std::string sha256_hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  const std::string raw = digest(EVP_sha256(), bytes);
  std::string out;
  for (const unsigned char c : raw) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

std::string base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string md5_base64(std::string_view bytes) { return base64(digest(EVP_md5(), bytes)); }

std::string uri_encode(std::string_view text, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (absl::ascii_isalnum(byte) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += c;
    } else {
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    }
  }
  return out;
}

absl::StatusOr<uint64_t> object_size(std::string_view text, const std::string& object_url) {
  uint64_t size = 0;
  if (!absl::SimpleAtoi(std::string(text), &size)) {
    return absl::InternalError(object_url + ": the service gave the object's size as \"" +
                               std::string(text.substr(0, 64)) + "\", not a number");
  }
  return size;
}

absl::StatusOr<HttpResponse> perform(const HttpRequest& request, uint64_t max_body_bytes) {
  init_curl_once();
  // One handle per thread, reset for each request: it keeps its connections open, so a thread's next request to the
  // same service (the next part, the next object) does not connect, or shake hands, again.
  thread_local Easy handle(curl_easy_init());
  if (!handle) return absl::InternalError("curl_easy_init failed");
  curl_easy_reset(handle.get());
  CURL* const curl = handle.get();
  HeaderSink sink;
  const HeaderList headers = prepare(curl, request, sink);
  struct BodySink {
    std::string body;
    uint64_t max;
    bool too_large = false;
  } body{{}, max_body_bytes};
  curl_easy_setopt(
      curl, CURLOPT_WRITEFUNCTION, +[](char* data, size_t size, size_t count, void* self) {
        auto& sink = *static_cast<BodySink*>(self);
        if (sink.body.size() + size * count > sink.max) {
          sink.too_large = true;
          return size_t{0};
        }
        sink.body.append(data, size * count);
        return size * count;
      });
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  char error[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  const CURLcode code = curl_easy_perform(curl);
  if (body.too_large) {
    return absl::ResourceExhaustedError(request.method + " " + request.url.substr(0, request.url.find('?')) +
                                        ": the answer is larger than " + std::to_string(max_body_bytes) + " bytes");
  }
  if (code != CURLE_OK) return transport_error(code, error, request.method, request.url);
  HttpResponse response;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  response.headers = std::move(sink.headers);
  response.body = std::move(body.body);
  return response;
}

bool is_transient(const absl::StatusOr<HttpResponse>& answer) {
  if (!answer.ok()) return absl::IsUnavailable(answer.status());
  return answer->status == 408 || answer->status == 429 || answer->status >= 500;
}

absl::StatusOr<HttpResponse> with_retries(const std::function<absl::StatusOr<HttpResponse>()>& attempt, int attempts) {
  thread_local std::mt19937 jitter(std::random_device{}());
  std::chrono::milliseconds wait(200);
  for (int i = 1;; ++i) {
    absl::StatusOr<HttpResponse> answer = attempt();
    if (i >= attempts || !is_transient(answer)) return answer;
    std::uniform_int_distribution<int64_t> spread(wait.count() / 2, wait.count());
    std::this_thread::sleep_for(std::chrono::milliseconds(spread(jitter)));
    wait = std::min(wait * 2, std::chrono::milliseconds(5000));
  }
}

// The transfer is driven through a multi handle as read() asks: the write callback takes at most one buffer's worth
// and pauses the transfer until it is read.
struct HttpStream::State {
  Easy easy;
  struct MultiDeleter {
    void operator()(CURLM* multi) const { curl_multi_cleanup(multi); }
  };
  std::unique_ptr<CURLM, MultiDeleter> multi{curl_multi_init()};
  HeaderList headers;
  HeaderSink sink;
  std::string pending;  // arrived, not read yet
  size_t pending_pos = 0;
  bool paused = false;
  bool done = false;
  CURLcode result = CURLE_OK;
  char error[CURL_ERROR_SIZE] = "";
  std::string method;
  std::string url;

  static constexpr size_t kMaxPending = size_t{1} << 20;

  static size_t on_body(char* data, size_t size, size_t count, void* self) {
    auto& state = *static_cast<State*>(self);
    if (state.pending.size() - state.pending_pos >= kMaxPending) {
      state.paused = true;
      return CURL_WRITEFUNC_PAUSE;
    }
    if (state.pending_pos == state.pending.size()) {
      state.pending.clear();
      state.pending_pos = 0;
    }
    state.pending.append(data, size * count);
    return size * count;
  }

  // Moves the transfer on, waiting up to `wait_ms` for the socket.
  void drive(int wait_ms) {
    int running = 0;
    curl_multi_perform(multi.get(), &running);
    int messages = 0;
    while (CURLMsg* message = curl_multi_info_read(multi.get(), &messages)) {
      if (message->msg == CURLMSG_DONE) {
        done = true;
        result = message->data.result;
      }
    }
    // Wait for the socket only when nothing came: a transfer just resumed hands over what curl held at once.
    if (!done && running > 0 && available() == 0) curl_multi_poll(multi.get(), nullptr, 0, wait_ms, nullptr);
  }

  size_t available() const { return pending.size() - pending_pos; }
};

HttpStream::HttpStream(std::unique_ptr<State> state) : state_(std::move(state)) {}

HttpStream::~HttpStream() {
  if (state_ && state_->multi && state_->easy) curl_multi_remove_handle(state_->multi.get(), state_->easy.get());
}

absl::StatusOr<std::unique_ptr<HttpStream>> HttpStream::open(const HttpRequest& request) {
  init_curl_once();
  auto state = std::make_unique<State>();
  state->easy.reset(curl_easy_init());
  if (!state->easy || !state->multi) return absl::InternalError("curl init failed");
  state->method = request.method;
  state->url = request.url;
  state->headers = prepare(state->easy.get(), request, state->sink);
  curl_easy_setopt(state->easy.get(), CURLOPT_WRITEFUNCTION, &State::on_body);
  curl_easy_setopt(state->easy.get(), CURLOPT_WRITEDATA, state.get());
  curl_easy_setopt(state->easy.get(), CURLOPT_ERRORBUFFER, state->error);
  curl_multi_add_handle(state->multi.get(), state->easy.get());
  std::unique_ptr<HttpStream> stream(new HttpStream(std::move(state)));
  State& s = *stream->state_;
  while (!s.done && !s.sink.complete) s.drive(1000);
  if (s.done && s.result != CURLE_OK) return transport_error(s.result, s.error, s.method, s.url);
  return stream;
}

long HttpStream::status() const { return state_->sink.status; }

std::string HttpStream::header(const std::string& lowercase_name) const {
  const auto it = state_->sink.headers.find(lowercase_name);
  return it == state_->sink.headers.end() ? "" : it->second;
}

absl::StatusOr<size_t> HttpStream::read(char* buffer, size_t size) {
  State& s = *state_;
  while (s.available() == 0 && !s.done) {
    if (s.paused) {
      s.paused = false;
      curl_easy_pause(s.easy.get(), CURLPAUSE_CONT);  // delivers what curl held while paused
      if (s.available() > 0) break;
    }
    s.drive(1000);
  }
  if (s.available() == 0) {
    if (s.result != CURLE_OK) return transport_error(s.result, s.error, s.method, s.url);
    return size_t{0};
  }
  const size_t n = std::min(size, s.available());
  std::copy_n(s.pending.data() + s.pending_pos, n, buffer);
  s.pending_pos += n;
  return n;
}

absl::StatusOr<std::string> HttpStream::read_all(uint64_t max_bytes) {
  std::string out;
  char buffer[16384];
  while (true) {
    absl::StatusOr<size_t> n = read(buffer, sizeof buffer);
    if (!n.ok()) return n.status();
    if (*n == 0) return out;
    if (out.size() + *n > max_bytes) {
      return absl::ResourceExhaustedError("the answer is larger than " + std::to_string(max_bytes) + " bytes");
    }
    out.append(buffer, *n);
  }
}

ResumingHttpReader::ResumingHttpReader(OpenRange open_range, std::string version_header, ErrorOf error_of)
    : open_range_(std::move(open_range)), version_header_(std::move(version_header)), error_of_(std::move(error_of)) {}

absl::StatusOr<std::unique_ptr<ObjectReader>> ResumingHttpReader::open(OpenRange open_range, std::string version_header,
                                                                       ErrorOf error_of) {
  std::unique_ptr<ResumingHttpReader> reader(
      new ResumingHttpReader(std::move(open_range), std::move(version_header), std::move(error_of)));
  if (absl::Status s = reader->start(); !s.ok()) return s;
  return reader;
}

absl::Status ResumingHttpReader::start() {
  const absl::StatusOr<HttpResponse> answer = with_retries([&]() -> absl::StatusOr<HttpResponse> {
    absl::StatusOr<std::unique_ptr<HttpStream>> stream = open_range_(offset_, version_);
    if (!stream.ok()) return stream.status();
    HttpResponse answer;
    answer.status = (*stream)->status();
    if (answer.status == 200 || answer.status == 206) {
      stream_ = std::move(*stream);
    } else {
      answer.body = (*stream)->read_all(1 << 20).value_or("");
    }
    return answer;
  });
  if (stream_ == nullptr) return error_of_(answer);
  if (version_.empty()) version_ = stream_->header(version_header_);
  return absl::OkStatus();
}

absl::StatusOr<size_t> ResumingHttpReader::read(char* buffer, size_t size) {
  if (!resume_failed_.ok()) return resume_failed_;
  for (int resumes = 0;; ++resumes) {
    absl::StatusOr<size_t> n = stream_->read(buffer, size);
    if (n.ok()) {
      offset_ += *n;
      return n;
    }
    if (resumes >= 3) return n.status();
    stream_.reset();
    if (absl::Status s = start(); !s.ok()) {
      resume_failed_ = s;
      return s;
    }
  }
}

}  // namespace podscope::storage
