#include "storage/s3_store.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "absl/strings/numbers.h"
#include "storage/parted_writer.h"
#include "storage/xml.h"

namespace podscope::storage {
namespace {

// S3's error document: <Error><Code>...</Code><Message>...</Message></Error>.
std::string service_said(const HttpResponse& response) {
  absl::StatusOr<std::vector<XmlText>> xml = xml_texts(response.body);
  std::string code = xml.ok() ? first_xml_text(*xml, "Error/Code") : "";
  std::string message = xml.ok() ? first_xml_text(*xml, "Error/Message") : "";
  std::string out = "HTTP " + std::to_string(response.status);
  if (!code.empty()) out += " " + code;
  if (!message.empty()) out += ": " + message;
  return out;
}

// An ETag as listings and HEAD both give it, without the quotes one of them may leave off.
std::string unquoted(std::string_view etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, etag.size() - 2);
  return std::string(etag);
}

std::string error_code(const HttpResponse& response) {
  absl::StatusOr<std::vector<XmlText>> xml = xml_texts(response.body);
  return xml.ok() ? first_xml_text(*xml, "Error/Code") : "";
}

// The parts of one multipart upload sent by kPartsInFlight threads at once, each reusing its connection: a part is
// held from when it is handed over until the service acknowledged it, so a writer holds at most kPartsInFlight + 1
// parts (the one filling) whatever the object's size. The first failure stops the sending; later parts are dropped.
class PartSenders {
 public:
  PartSenders(S3Store& store, std::string key, std::string upload_id)
      : store_(store), key_(std::move(key)), upload_id_(std::move(upload_id)) {
    for (size_t i = 0; i < kPartsInFlight; ++i) threads_.emplace_back([this] { send_parts(); });
  }
  ~PartSenders() { static_cast<void>(finish()); }

  // Hands part `number` (from 1) over, waiting while kPartsInFlight parts are held. The first failure so far, if any.
  absl::Status send(int number, std::string bytes) {
    std::unique_lock lock(mu_);
    room_.wait(lock, [&] { return held_ < kPartsInFlight || !status_.ok(); });
    if (!status_.ok()) return status_;
    ++held_;
    queue_.push_back({number, std::move(bytes)});
    work_.notify_one();
    return absl::OkStatus();
  }

  // The upload is given up: parts not sent yet are dropped (those being sent end first).
  void cancel() {
    std::lock_guard lock(mu_);
    if (status_.ok()) status_ = absl::CancelledError("the upload of " + store_.object_url(key_) + " was given up");
    room_.notify_all();
  }

  // Waits for every part handed over; each part's ETag by number, or the first failure.
  absl::StatusOr<std::vector<std::string>> finish() {
    {
      std::lock_guard lock(mu_);
      closed_ = true;
    }
    work_.notify_all();
    for (std::thread& thread : threads_) {
      if (thread.joinable()) thread.join();
    }
    if (!status_.ok()) return status_;
    return etags_;
  }

 private:
  struct Part {
    int number;
    std::string bytes;
  };

  void send_parts() {
    while (true) {
      Part part;
      {
        std::unique_lock lock(mu_);
        work_.wait(lock, [&] { return !queue_.empty() || closed_; });
        if (queue_.empty()) return;
        part = std::move(queue_.front());
        queue_.pop_front();
        if (!status_.ok()) {  // a part failed: the upload is aborted, nothing more is sent
          --held_;
          room_.notify_all();
          continue;
        }
      }
      const std::string query =
          "partNumber=" + std::to_string(part.number) + "&uploadId=" + uri_encode(upload_id_, false);
      const absl::StatusOr<HttpResponse> sent =
          store_.call("PUT", key_, query, {"Content-MD5: " + md5_base64(part.bytes)}, part.bytes);
      part.bytes = std::string();
      std::lock_guard lock(mu_);
      if (!sent.ok() || sent->status != 200) {
        if (status_.ok()) status_ = store_.error_of(sent, "writing part " + std::to_string(part.number) + " of", key_);
      } else {
        if (etags_.size() < static_cast<size_t>(part.number)) etags_.resize(static_cast<size_t>(part.number));
        etags_[static_cast<size_t>(part.number) - 1] = sent->header("etag");
      }
      --held_;
      room_.notify_all();
    }
  }

  S3Store& store_;
  const std::string key_;
  const std::string upload_id_;
  std::mutex mu_;
  std::condition_variable work_;
  std::condition_variable room_;
  std::deque<Part> queue_;
  size_t held_ = 0;  // queued or being sent
  bool closed_ = false;
  std::vector<std::string> etags_;
  absl::Status status_;
  std::vector<std::thread> threads_;
};

// Writes an object as it comes: what fits in one part is one PutObject at commit; beyond, a multipart upload whose
// parts go as they fill, several at once (PartSenders). Every request is retried when transient; the upload is
// aborted unless completed.
class S3Writer : public PartedWriter {
 public:
  S3Writer(S3Store& store, std::string key)
      : PartedWriter(store.object_url(key), kPartBytes), store_(store), key_(std::move(key)) {}
  ~S3Writer() override { abort(); }

 private:
  absl::Status send_full_part() override { return send_part(); }

  absl::Status finish() override {
    if (upload_id_.empty()) {
      const absl::StatusOr<HttpResponse> put =
          store_.call("PUT", key_, "", {"Content-MD5: " + md5_base64(part_)}, part_);
      if (!put.ok() || put->status != 200) return store_.error_of(put, "writing", key_);
      return absl::OkStatus();
    }
    if (!part_.empty()) {
      if (absl::Status s = send_part(); !s.ok()) return s;
    }
    absl::StatusOr<std::vector<std::string>> etags = senders_->finish();
    if (!etags.ok()) return etags.status();
    std::string body = "<CompleteMultipartUpload>";
    for (size_t i = 0; i < etags->size(); ++i) {
      body += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" + (*etags)[i] + "</ETag></Part>";
    }
    body += "</CompleteMultipartUpload>";
    const absl::StatusOr<HttpResponse> done =
        store_.call("POST", key_, "uploadId=" + uri_encode(upload_id_, false), {"Content-Type: application/xml"}, body);
    // S3 may answer 200 and report the failure in the body.
    if (!done.ok() || done->status != 200 || done->body.find("<Error>") != std::string::npos) {
      return store_.error_of(done, "completing the upload of", key_);
    }
    upload_id_.clear();
    return absl::OkStatus();
  }

  void give_up() override {
    if (upload_id_.empty()) return;
    if (senders_) senders_->cancel();
    senders_.reset();  // the parts being sent end first
    // Best effort: an upload left behind is never an object, and buckets' lifecycle rules clear such uploads.
    store_.call("DELETE", key_, "uploadId=" + uri_encode(upload_id_, false)).IgnoreError();
    upload_id_.clear();
  }

  absl::Status send_part() {
    if (upload_id_.empty()) {
      const absl::StatusOr<HttpResponse> created = store_.call("POST", key_, "uploads=");
      if (!created.ok() || created->status != 200) return store_.error_of(created, "starting the upload of", key_);
      absl::StatusOr<std::vector<XmlText>> xml = xml_texts(created->body);
      if (xml.ok()) upload_id_ = first_xml_text(*xml, "InitiateMultipartUploadResult/UploadId");
      if (upload_id_.empty()) return absl::InternalError("S3 gave no upload id for " + store_.object_url(key_));
      senders_ = std::make_unique<PartSenders>(store_, key_, upload_id_);
    }
    absl::Status handed = senders_->send(++parts_, std::move(part_));
    part_ = std::string();
    part_.reserve(kPartBytes);
    return handed;
  }

  S3Store& store_;
  std::string key_;
  std::string upload_id_;
  std::unique_ptr<PartSenders> senders_;
  int parts_ = 0;
};

}  // namespace

S3Store::S3Store(Location root, S3Endpoint endpoint, std::shared_ptr<AwsCredentials> keys)
    : Store(std::move(root)), endpoint_(std::move(endpoint)), keys_(std::move(keys)) {}

std::string S3Store::object_url(const std::string& key) const {
  return std::string(root().scheme == Scheme::kGcs ? "gs://" : "s3://") + root().bucket + "/" + key;
}

std::string S3Store::url_of(const std::string& key, const std::string& query) const {
  std::string url;
  if (!endpoint_.endpoint.empty()) {
    url = endpoint_.endpoint + "/" + root().bucket + "/" + uri_encode(key, true);
  } else if (root().bucket.find('.') == std::string::npos) {
    url = "https://" + root().bucket + ".s3." + endpoint_.region + ".amazonaws.com/" + uri_encode(key, true);
  } else {
    url = "https://s3." + endpoint_.region + ".amazonaws.com/" + root().bucket + "/" + uri_encode(key, true);
  }
  return query.empty() ? url : url + "?" + query;
}

absl::StatusOr<HttpResponse> S3Store::call(const std::string& method, const std::string& key, const std::string& query,
                                           std::vector<std::string> headers, std::string_view body) {
  return with_retries([&]() -> absl::StatusOr<HttpResponse> {
    absl::StatusOr<SigV4> keys = keys_->signing_keys();
    if (!keys.ok()) return keys.status();
    HttpRequest request;
    request.method = method;
    request.url = url_of(key, query);
    request.headers = headers;
    request.body = body;
    request.sigv4 = &*keys;
    return perform(request);
  });
}

absl::StatusOr<std::unique_ptr<HttpStream>> S3Store::open_stream(const std::string& key,
                                                                 std::vector<std::string> headers) {
  absl::StatusOr<SigV4> keys = keys_->signing_keys();
  if (!keys.ok()) return keys.status();
  HttpRequest request;
  request.url = url_of(key, "");
  request.headers = std::move(headers);
  request.sigv4 = &*keys;
  return HttpStream::open(request);
}

absl::Status S3Store::error_of(const absl::StatusOr<HttpResponse>& answer, const std::string& what,
                               const std::string& key) {
  const std::string where = what + " " + object_url(key) + " (credentials: " + keys_->source() + ")";
  if (!answer.ok()) return absl::Status(answer.status().code(), where + ": " + std::string(answer.status().message()));
  const std::string said = service_said(*answer);
  const std::string code = error_code(*answer);
  if (code == "NoSuchBucket") {
    return absl::NotFoundError(where + ": bucket \"" + root().bucket + "\" does not exist (" + said + ")");
  }
  switch (answer->status) {
    case 401:
    case 403: return absl::PermissionDeniedError(where + ": refused (" + said + ")");
    case 404: return absl::NotFoundError(where + ": not found (" + said + ")");
    case 400: return absl::InvalidArgumentError(where + ": " + said);
    default:
      return answer->status >= 500 ? absl::UnavailableError(where + ": " + said)
                                   : absl::InternalError(where + ": " + said);
  }
}

absl::StatusOr<std::unique_ptr<ObjectWriter>> S3Store::create(std::string_view name, LocalDurability) {
  return std::make_unique<S3Writer>(*this, key_of(name));
}

// GetObject of one version: a resumed read asks for it with the ETag its first answer named.
absl::StatusOr<std::unique_ptr<ObjectReader>> S3Store::open(std::string_view name) {
  const std::string key = key_of(name);
  auto open_range = [this, key](uint64_t offset, const std::string& etag) {
    std::vector<std::string> headers;
    if (offset > 0) headers = {"Range: bytes=" + std::to_string(offset) + "-", "If-Match: " + etag};
    return open_stream(key, std::move(headers));
  };
  return ResumingHttpReader::open(open_range, "etag", [this, key](const absl::StatusOr<HttpResponse>& answer) {
    return error_of(answer, "reading", key);
  });
}

absl::StatusOr<std::vector<ObjectInfo>> S3Store::list(std::string_view prefix) {
  const std::string full_prefix = key_of(prefix);
  const size_t strip = root().key.empty() ? 0 : root().key.size() + 1;
  std::vector<ObjectInfo> out;
  std::string token;
  while (true) {
    // The query's parameters sorted by name, as the signature's canonical request has them.
    std::string query;
    if (!token.empty()) query = "continuation-token=" + uri_encode(token, false) + "&";
    query += "list-type=2&prefix=" + uri_encode(full_prefix, false);
    const absl::StatusOr<HttpResponse> page = call("GET", "", query);
    if (!page.ok() || page->status != 200) return error_of(page, "listing", full_prefix);
    absl::StatusOr<std::vector<XmlText>> xml = xml_texts(page->body);
    if (!xml.ok()) return xml.status();
    std::string next;
    bool truncated = false;
    for (const XmlText& t : *xml) {
      if (t.path == "ListBucketResult/Contents/Key") {
        if (t.text.size() >= strip) out.push_back({t.text.substr(strip), 0, ""});
      } else if (t.path == "ListBucketResult/Contents/Size" && !out.empty()) {
        absl::StatusOr<uint64_t> size = object_size(t.text, object_url(key_of(out.back().name)));
        if (!size.ok()) return size.status();
        out.back().size = *size;
      } else if (t.path == "ListBucketResult/Contents/ETag" && !out.empty()) {
        out.back().version = unquoted(t.text);
      } else if (t.path == "ListBucketResult/NextContinuationToken") {
        next = t.text;
      } else if (t.path == "ListBucketResult/IsTruncated") {
        truncated = t.text == "true";
      }
    }
    if (!truncated || next.empty()) break;
    token = next;
  }
  std::sort(out.begin(), out.end(), [](const ObjectInfo& a, const ObjectInfo& b) { return a.name < b.name; });
  return out;
}

absl::StatusOr<ObjectInfo> S3Store::stat(std::string_view name) {
  const std::string key = key_of(name);
  const absl::StatusOr<HttpResponse> head = call("HEAD", key, "");
  if (!head.ok() || head->status != 200) return error_of(head, "looking up", key);
  absl::StatusOr<uint64_t> size = object_size(head->header("content-length"), object_url(key));
  if (!size.ok()) return size.status();
  return ObjectInfo{std::string(name), *size, unquoted(head->header("etag"))};
}

absl::Status S3Store::remove(std::string_view name) {
  const std::string key = key_of(name);
  const absl::StatusOr<HttpResponse> removed = call("DELETE", key, "");
  if (removed.ok() && (removed->status == 204 || removed->status == 200 || removed->status == 404)) {
    return absl::OkStatus();
  }
  return error_of(removed, "removing", key);
}

absl::Status S3Store::check_writable() {
  const std::string key = key_of(".podscope-write-check");
  // Some S3-compatible stores make an upload's bucket lazily: a missing bucket is asked for first. (A writer without
  // the right to list the bucket may be refused here: only a 404 counts.)
  const absl::StatusOr<HttpResponse> bucket = call("HEAD", "", "");
  if (bucket.ok() && bucket->status == 404) {
    return absl::NotFoundError("checking that it can write " + object_url(key) + " (credentials: " + keys_->source() +
                               "): bucket \"" + root().bucket + "\" does not exist (HTTP 404)");
  }
  const absl::StatusOr<HttpResponse> created = call("POST", key, "uploads=");
  if (!created.ok() || created->status != 200) return error_of(created, "checking that it can write", key);
  absl::StatusOr<std::vector<XmlText>> xml = xml_texts(created->body);
  const std::string upload_id = xml.ok() ? first_xml_text(*xml, "InitiateMultipartUploadResult/UploadId") : "";
  if (!upload_id.empty()) call("DELETE", key, "uploadId=" + uri_encode(upload_id, false)).IgnoreError();
  return absl::OkStatus();
}

}  // namespace podscope::storage
