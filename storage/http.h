// The HTTP under the bucket stores, through libcurl: one request at a time, a body sent from memory, an answer
// read whole or streamed, SigV4 signing by curl itself (CURLOPT_AWS_SIGV4), and the one retry policy of every call
// that reaches a service. A connection that makes no progress for PODSCOPE_STORAGE_IDLE_TIMEOUT_S seconds (default
// 30, as TensorFlow's GCS_REQUEST_IDLE_TIMEOUT_SECS) is given up.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/store.h"

namespace podscope::storage {

// AWS Signature Version 4 over a request, signed by curl: the service's region, and the key pair. The session token
// of temporary credentials goes in a header the signature covers.
struct SigV4 {
  std::string region;
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
};

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  std::string_view body;             // sent as the request's body (PUT, POST); not owned
  const SigV4* sigv4 = nullptr;      // signed when set
  // The longest the whole request may take, beside the idle timeout (0: no bound beyond it).
  int64_t timeout_ms = 0;
};

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;  // names lowercased
  std::string body;
  std::string header(const std::string& lowercase_name) const;
};

// The hex SHA-256 of `bytes`, and the base64 MD5 (Content-MD5, Cloud Storage's md5Hash).
std::string sha256_hex(std::string_view bytes);
std::string md5_base64(std::string_view bytes);
std::string base64(std::string_view bytes);
// Percent-encoding as AWS and Cloud Storage expect it: everything but A-Z a-z 0-9 - _ . ~ (and '/' when kept).
std::string uri_encode(std::string_view text, bool keep_slash);
// An object's size as a service's answer gives it (decimal); anything else is an error naming the object, so that a
// malformed answer is never taken for an empty object.
absl::StatusOr<uint64_t> object_size(std::string_view text, const std::string& object_url);

// Performs one request, the answer read whole (bounded by `max_body_bytes`). A transport failure (refused, reset,
// timed out) is UNAVAILABLE; any HTTP status is a response, for the caller to judge.
absl::StatusOr<HttpResponse> perform(const HttpRequest& request, uint64_t max_body_bytes = uint64_t{64} << 20);

// Whether an answer or a failure is worth another try: a transport failure, 408, 429 and 5xx.
bool is_transient(const absl::StatusOr<HttpResponse>& answer);

// Calls `attempt` until it gives an answer that is not transient, at most `attempts` times, waiting 0.2 s, 0.4 s ...
// (doubling, up to 5 s, with jitter) between tries.
absl::StatusOr<HttpResponse> with_retries(const std::function<absl::StatusOr<HttpResponse>()>& attempt,
                                          int attempts = 5);

// A response body read as it arrives, with bounded memory: the request is driven as read() asks for bytes, and the
// transfer pauses while what arrived is not taken.
class HttpStream {
 public:
  // Starts the request and waits for the response's status and headers.
  static absl::StatusOr<std::unique_ptr<HttpStream>> open(const HttpRequest& request);
  ~HttpStream();

  long status() const;
  std::string header(const std::string& lowercase_name) const;
  // Up to `size` bytes of the body; 0 at its end. UNAVAILABLE when the transfer broke.
  absl::StatusOr<size_t> read(char* buffer, size_t size);
  // The body whole (an error answer's), bounded.
  absl::StatusOr<std::string> read_all(uint64_t max_bytes);

 private:
  struct State;
  explicit HttpStream(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// An object read as it arrives over a ranged GET: a connection that breaks is resumed (up to 3 times in a row) from
// where it broke, pinned to the version the first answer named, so a reader never mixes two versions of an object.
// Each GET is retried as every call is (with_retries): transient failures are backed off, as both clouds ask.
class ResumingHttpReader : public ObjectReader {
 public:
  // Starts a GET of the object from byte `offset` on (no Range at 0), of version `version` when it is not empty.
  using OpenRange =
      std::function<absl::StatusOr<std::unique_ptr<HttpStream>>(uint64_t offset, const std::string& version)>;
  // A GET that failed as an error naming the object.
  using ErrorOf = std::function<absl::Status(const absl::StatusOr<HttpResponse>& answer)>;

  // Reads from the start; `version_header` (lowercase) names the version in the first answer ("etag" ...).
  static absl::StatusOr<std::unique_ptr<ObjectReader>> open(OpenRange open_range, std::string version_header,
                                                            ErrorOf error_of);

  absl::StatusOr<size_t> read(char* buffer, size_t size) override;

 private:
  ResumingHttpReader(OpenRange open_range, std::string version_header, ErrorOf error_of);
  // A GET from offset_, retried when transient.
  absl::Status start();

  OpenRange open_range_;
  std::string version_header_;
  ErrorOf error_of_;
  std::unique_ptr<HttpStream> stream_;
  absl::Status resume_failed_;  // a resume that failed ends the reader: later reads return it
  std::string version_;
  uint64_t offset_ = 0;
};

}  // namespace podscope::storage
