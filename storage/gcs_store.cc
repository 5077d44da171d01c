#include "storage/gcs_store.h"

#include <openssl/evp.h>
#include <simdjson.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/numbers.h"
#include "storage/parted_writer.h"
#include "storage/s3_store.h"

namespace podscope::storage {
namespace {

// The service's error document: {"error": {"code": 403, "message": "..."}}.
std::string service_said(const HttpResponse& response) {
  std::string out = "HTTP " + std::to_string(response.status);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view message;
  if (parser.parse(response.body).get(doc) == simdjson::SUCCESS &&
      doc["error"]["message"].get(message) == simdjson::SUCCESS) {
    out += ": " + std::string(message);
  } else if (!response.body.empty() && response.body.size() < 300) {
    out += ": " + response.body;
  }
  return out;
}

// How much of an upload the service holds, from a 308's Range header ("bytes=0-N"): N + 1, or 0 without one.
uint64_t persisted_bytes(const HttpResponse& response) {
  const std::string range = response.header("range");
  const size_t dash = range.rfind('-');
  uint64_t last = 0;
  if (dash == std::string::npos || !absl::SimpleAtoi(range.substr(dash + 1), &last)) return 0;
  return last + 1;
}

void back_off(int attempt) { std::this_thread::sleep_for(std::chrono::milliseconds(std::min(200 << attempt, 5000))); }

// Writes an object through one resumable session: chunks go as they fill, each resent from where the service says
// it holds the upload when a request fails; the last carries the object's MD5, which the service checks.
class GcsWriter : public PartedWriter {
 public:
  GcsWriter(GcsStore& store, std::string key)
      : PartedWriter(store.object_url(key), kChunkBytes), store_(store), key_(std::move(key)) {
    md5_.reset(EVP_MD_CTX_new());
    EVP_DigestInit_ex(md5_.get(), EVP_md5(), nullptr);
  }
  ~GcsWriter() override { abort(); }

 private:
  absl::Status send_full_part() override { return send_chunk(false); }

  absl::Status finish() override {
    if (absl::Status s = send_chunk(true); !s.ok()) return s;
    session_.clear();
    return absl::OkStatus();
  }

  void give_up() override {
    if (session_.empty()) return;
    // A cancelled session leaves nothing; one left behind is never an object and expires within a week.
    store_.call("DELETE", session_).IgnoreError();
    session_.clear();
  }

  std::string md5_of_all() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    EVP_DigestFinal_ex(md5_.get(), digest, &size);
    return base64(std::string_view(reinterpret_cast<char*>(digest), size));
  }

  // Sends the chunk held (at offset_ of the object), the last one when `last`.
  absl::Status send_chunk(bool last) {
    EVP_DigestUpdate(md5_.get(), part_.data(), part_.size());
    if (session_.empty()) {
      absl::StatusOr<std::string> session = store_.begin_upload(key_);
      if (!session.ok()) return session.status();
      session_ = *session;
    }
    const std::string md5 = last ? md5_of_all() : "";
    const uint64_t end = offset_ + part_.size();
    size_t sent_from = 0;  // of part_
    absl::StatusOr<HttpResponse> answer;
    for (int attempt = 0; attempt < 6; ++attempt) {
      const std::string_view rest = std::string_view(part_).substr(sent_from);
      const uint64_t from = offset_ + sent_from;
      std::vector<std::string> headers;
      const std::string total = last ? std::to_string(end) : "*";
      headers.push_back(rest.empty() ? "Content-Range: bytes */" + total
                                     : "Content-Range: bytes " + std::to_string(from) + "-" +
                                           std::to_string(from + rest.size() - 1) + "/" + total);
      if (last) headers.push_back("X-Goog-Hash: md5=" + md5);
      answer = store_.call("PUT", session_, headers, rest);
      if (answer.ok() && (answer->status == 200 || answer->status == 201)) return check_object(*answer, md5, last);
      if (answer.ok() && answer->status == 308) {
        const uint64_t held = persisted_bytes(*answer);
        if (held >= end && !last) {
          offset_ = end;
          part_.clear();
          return absl::OkStatus();
        }
        sent_from = static_cast<size_t>(std::max(held, offset_) - offset_);
        continue;
      }
      if (answer.ok() && (answer->status == 404 || answer->status == 410)) {
        return absl::NotFoundError("writing " + store_.object_url(key_) + ": the service lost the upload session (" +
                                   service_said(*answer) + ")");
      }
      if (!is_transient(answer)) break;
      back_off(attempt);
      // Where does the service stand? Resend from there.
      const absl::StatusOr<HttpResponse> status = store_.call("PUT", session_, {"Content-Range: bytes */*"});
      if (status.ok() && status->status == 308) {
        sent_from = static_cast<size_t>(std::max(persisted_bytes(*status), offset_) - offset_);
      } else if (status.ok() && (status->status == 200 || status->status == 201)) {
        return check_object(*status, md5, last);
      }
    }
    return store_.error_of(answer, "writing", key_);
  }

  // The object the service made: its MD5 is ours (the service checked it too, against X-Goog-Hash).
  absl::Status check_object(const HttpResponse& answer, const std::string& md5, bool last) {
    if (!last) return absl::InternalError("the service finished " + store_.object_url(key_) + " before its end");
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    std::string_view md5_hash;
    if (parser.parse(answer.body).get(doc) == simdjson::SUCCESS && doc["md5Hash"].get(md5_hash) == simdjson::SUCCESS &&
        md5_hash != md5) {
      return absl::DataLossError("writing " + store_.object_url(key_) + ": the service holds MD5 " +
                                 std::string(md5_hash) + ", not the " + md5 + " sent");
    }
    return absl::OkStatus();
  }

  struct MdDeleter {
    void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
  };

  GcsStore& store_;
  std::string key_;
  std::string session_;
  uint64_t offset_ = 0;
  std::unique_ptr<EVP_MD_CTX, MdDeleter> md5_;
};

// An object resource's size and generation (the JSON API gives both as strings; a resource always has both).
absl::Status read_size_and_generation(simdjson::dom::element object, const std::string& object_url, ObjectInfo& info) {
  std::string_view text;
  if (object["size"].get(text) != simdjson::SUCCESS) text = "";
  absl::StatusOr<uint64_t> size = object_size(text, object_url);
  if (!size.ok()) return size.status();
  info.size = *size;
  if (object["generation"].get(text) == simdjson::SUCCESS) info.version = std::string(text);
  return absl::OkStatus();
}

}  // namespace

GcsStore::GcsStore(Location root, std::shared_ptr<GoogleCredentials> credentials)
    : Store(std::move(root)), credentials_(std::move(credentials)) {}

std::string GcsStore::api_url(const std::string& key) const {
  return endpoint() + "/storage/v1/b/" + uri_encode(root().bucket, false) + "/o/" + uri_encode(key, false);
}

absl::StatusOr<HttpResponse> GcsStore::call(const std::string& method, const std::string& url,
                                            std::vector<std::string> headers, std::string_view body) {
  return with_retries([&]() -> absl::StatusOr<HttpResponse> {
    absl::StatusOr<std::string> authorization = credentials_->authorization();
    if (!authorization.ok()) return authorization.status();
    HttpRequest request;
    request.method = method;
    request.url = url;
    request.headers = headers;
    if (!authorization->empty()) request.headers.push_back("Authorization: " + *authorization);
    request.body = body;
    return perform(request);
  });
}

absl::Status GcsStore::error_of(const absl::StatusOr<HttpResponse>& answer, const std::string& what,
                                const std::string& key) {
  const std::string where = what + " " + object_url(key) + " (credentials: " + credentials_->source() + ")";
  if (!answer.ok()) return absl::Status(answer.status().code(), where + ": " + std::string(answer.status().message()));
  const std::string said = service_said(*answer);
  switch (answer->status) {
    case 401:
    case 403: return absl::PermissionDeniedError(where + ": refused (" + said + ")");
    case 404:
      if (said.find("ucket") != std::string::npos) {
        return absl::NotFoundError(where + ": bucket \"" + root().bucket + "\" does not exist (" + said + ")");
      }
      return absl::NotFoundError(where + ": not found (" + said + ")");
    case 400: return absl::InvalidArgumentError(where + ": " + said);
    default:
      return answer->status >= 500 ? absl::UnavailableError(where + ": " + said)
                                   : absl::InternalError(where + ": " + said);
  }
}

absl::StatusOr<std::string> GcsStore::begin_upload(const std::string& key) {
  const std::string url = endpoint() + "/upload/storage/v1/b/" + uri_encode(root().bucket, false) +
                          "/o?uploadType=resumable&name=" + uri_encode(key, false);
  const absl::StatusOr<HttpResponse> begun = call("POST", url, {"Content-Type: application/json; charset=UTF-8"}, "{}");
  if (!begun.ok() || begun->status != 200 || begun->header("location").empty()) {
    return error_of(begun, "starting the upload of", key);
  }
  return begun->header("location");
}

absl::StatusOr<std::unique_ptr<ObjectWriter>> GcsStore::create(std::string_view name, LocalDurability) {
  return std::make_unique<GcsWriter>(*this, key_of(name));
}

// The media of one generation: a resumed read asks for the generation its first answer named.
absl::StatusOr<std::unique_ptr<ObjectReader>> GcsStore::open(std::string_view name) {
  const std::string key = key_of(name);
  auto open_range = [this, key](uint64_t offset,
                                const std::string& generation) -> absl::StatusOr<std::unique_ptr<HttpStream>> {
    absl::StatusOr<std::string> authorization = credentials_->authorization();
    if (!authorization.ok()) return authorization.status();
    HttpRequest request;
    request.url = api_url(key) + "?alt=media" + (generation.empty() ? "" : "&generation=" + generation);
    if (!authorization->empty()) request.headers.push_back("Authorization: " + *authorization);
    if (offset > 0) request.headers.push_back("Range: bytes=" + std::to_string(offset) + "-");
    return HttpStream::open(request);
  };
  return ResumingHttpReader::open(
      open_range, "x-goog-generation",
      [this, key](const absl::StatusOr<HttpResponse>& answer) { return error_of(answer, "reading", key); });
}

absl::StatusOr<std::vector<ObjectInfo>> GcsStore::list(std::string_view prefix) {
  const std::string full_prefix = key_of(prefix);
  const size_t strip = root().key.empty() ? 0 : root().key.size() + 1;
  std::vector<ObjectInfo> out;
  std::string token;
  while (true) {
    std::string url = endpoint() + "/storage/v1/b/" + uri_encode(root().bucket, false) +
                      "/o?prefix=" + uri_encode(full_prefix, false);
    if (!token.empty()) url += "&pageToken=" + uri_encode(token, false);
    const absl::StatusOr<HttpResponse> page = call("GET", url);
    if (!page.ok() || page->status != 200) return error_of(page, "listing", full_prefix);
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.parse(page->body).get(doc) != simdjson::SUCCESS) {
      return absl::InternalError("listing " + object_url(full_prefix) + ": the answer is no JSON");
    }
    simdjson::dom::array items;
    if (doc["items"].get(items) == simdjson::SUCCESS) {
      for (simdjson::dom::element item : items) {
        std::string_view name;
        if (item["name"].get(name) != simdjson::SUCCESS || name.size() < strip) continue;
        ObjectInfo info{std::string(name.substr(strip)), 0, ""};
        if (absl::Status s = read_size_and_generation(item, object_url(std::string(name)), info); !s.ok()) return s;
        out.push_back(std::move(info));
      }
    }
    std::string_view next;
    if (doc["nextPageToken"].get(next) != simdjson::SUCCESS || next.empty()) break;
    token = std::string(next);
  }
  std::sort(out.begin(), out.end(), [](const ObjectInfo& a, const ObjectInfo& b) { return a.name < b.name; });
  return out;
}

absl::StatusOr<ObjectInfo> GcsStore::stat(std::string_view name) {
  const std::string key = key_of(name);
  const absl::StatusOr<HttpResponse> found = call("GET", api_url(key));
  if (!found.ok() || found->status != 200) return error_of(found, "looking up", key);
  ObjectInfo info{std::string(name), 0, ""};
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(found->body).get(doc) != simdjson::SUCCESS) {
    return absl::InternalError("looking up " + object_url(key) + ": the answer is no JSON");
  }
  if (absl::Status s = read_size_and_generation(doc, object_url(key), info); !s.ok()) return s;
  return info;
}

absl::Status GcsStore::remove(std::string_view name) {
  const std::string key = key_of(name);
  const absl::StatusOr<HttpResponse> removed = call("DELETE", api_url(key));
  if (removed.ok() && (removed->status == 204 || removed->status == 200 || removed->status == 404)) {
    return absl::OkStatus();
  }
  return error_of(removed, "removing", key);
}

absl::Status GcsStore::check_writable() {
  const std::string key = key_of(".podscope-write-check");
  absl::StatusOr<std::string> session = begin_upload(key);
  if (!session.ok()) {
    return absl::Status(session.status().code(),
                        "checking that it can write: " + std::string(session.status().message()));
  }
  call("DELETE", *session).IgnoreError();
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Store>> open_gcs_store(const Location& root) {
  std::optional<GoogleHmac> hmac;
  absl::StatusOr<std::shared_ptr<GoogleCredentials>> credentials = GoogleCredentials::find(hmac);
  if (!credentials.ok()) {
    return absl::Status(credentials.status().code(), root.url() + ": " + std::string(credentials.status().message()));
  }
  if (hmac) {
    // Cloud Storage's XML API takes SigV4 with HMAC keys, in the region "auto".
    S3Endpoint endpoint{"auto", hmac->endpoint};
    return std::make_shared<S3Store>(root, endpoint,
                                     AwsCredentials::fixed(hmac->access_key_id, hmac->secret, hmac->source, "auto"));
  }
  return std::make_shared<GcsStore>(root, *credentials);
}

}  // namespace podscope::storage
