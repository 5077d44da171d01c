#include "daemon/metrics_web_config.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <set>
#include <string_view>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "daemon/options.h"

namespace podscope {
namespace {

using Ssl = boost::asio::ssl::context;

// PEM files and the config are a few KiB; a larger one is refused before it is read whole.
constexpr size_t kMaxFileBytes = kMaxConfigFileBytes;

// The bytes of a regular file of at most kMaxFileBytes. Opened without blocking and checked to be a regular file,
// so that a FIFO put in place of one never stalls the server that re-reads it.
absl::StatusOr<std::string> read_regular_file(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return absl::NotFoundError("\"" + path + "\": cannot be read: " + std::strerror(errno));
  struct stat st {};
  std::string text;
  absl::Status status = absl::OkStatus();
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    status = absl::InvalidArgumentError("\"" + path + "\" is not a regular file");
  } else if (static_cast<size_t>(st.st_size) > kMaxFileBytes) {
    status = absl::InvalidArgumentError("\"" + path + "\" is larger than " + std::to_string(kMaxFileBytes) + " bytes");
  } else {
    text.resize(kMaxFileBytes + 1);
    size_t filled = 0;
    ssize_t n = 0;
    while (filled < text.size() && (n = read(fd, text.data() + filled, text.size() - filled)) > 0) {
      filled += static_cast<size_t>(n);
    }
    if (n < 0) status = absl::UnavailableError("\"" + path + "\": read failed: " + std::strerror(errno));
    if (filled > kMaxFileBytes) status = absl::InvalidArgumentError("\"" + path + "\" grew past the size bound");
    text.resize(filled);
  }
  close(fd);
  if (!status.ok()) return status;
  return text;
}

// "dir/web.yml" + "agent.pem" → "dir/agent.pem"; absolute paths and empty ones stay.
std::string relative_to(const std::string& config_path, const std::string& path) {
  if (path.empty() || path.front() == '/') return path;
  const size_t slash = config_path.rfind('/');
  return slash == std::string::npos ? path : config_path.substr(0, slash + 1) + path;
}

// Where a node is, for errors: "path:line: key".
class Where {
 public:
  explicit Where(const std::string& path) : path_(path) {}
  absl::Status error(const YAML::Node& node, const std::string& key, const std::string& what) const {
    return absl::InvalidArgumentError(path_ + ":" + std::to_string(node.Mark().line + 1) + ": " + key + ": " + what);
  }

 private:
  const std::string& path_;
};

// Keys of the format that podscope does not implement: refused by name rather than ignored.
bool unsupported(std::string_view section, std::string_view key) {
  static const std::set<std::pair<std::string_view, std::string_view>> kKeys = {
      {"", "http_server_config"},
      {"", "rate_limit"},
      {"tls_server_config", "cert"},
      {"tls_server_config", "key"},
      {"tls_server_config", "client_ca"},
      {"tls_server_config", "cipher_suites"},
      {"tls_server_config", "curve_preferences"},
      {"tls_server_config", "prefer_server_cipher_suites"}};
  return kKeys.count({section, key}) != 0;
}

// The entries of a map node, each key a plain name seen once; `visit(key, value)` handles each.
template <typename Visit>
absl::Status for_each_entry(const YAML::Node& map, std::string_view section, const Where& where, Visit visit) {
  const std::string prefix = section.empty() ? "" : std::string(section) + ".";
  if (map.IsNull()) return absl::OkStatus();
  if (!map.IsMap()) return where.error(map, section.empty() ? "the file" : std::string(section), "expected a map");
  std::set<std::string> seen;
  for (const auto& entry : map) {
    if (!entry.first.IsScalar()) return where.error(entry.first, std::string(section), "a key must be a plain name");
    const std::string key = entry.first.Scalar();
    if (!seen.insert(key).second) return where.error(entry.first, prefix + key, "duplicate key");
    if (absl::Status s = visit(key, entry.first, entry.second); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> scalar(const YAML::Node& node, const std::string& key, const Where& where) {
  if (node.IsNull()) return std::string();
  if (!node.IsScalar()) return where.error(node, key, "expected a single value");
  return node.Scalar();
}

absl::StatusOr<int> tls_version(const std::string& name) {
  static const std::map<std::string, int> kVersions = {
      {"TLS10", TLS1_VERSION}, {"TLS11", TLS1_1_VERSION}, {"TLS12", TLS1_2_VERSION}, {"TLS13", TLS1_3_VERSION}};
  const auto it = kVersions.find(name);
  if (it == kVersions.end()) return absl::InvalidArgumentError("\"" + name + "\" is not TLS10, TLS11, TLS12 or TLS13");
  return it->second;
}

absl::StatusOr<ClientAuth> client_auth(const std::string& name) {
  static const std::map<std::string, ClientAuth> kPolicies = {
      {"", ClientAuth::kNoClientCert},
      {"NoClientCert", ClientAuth::kNoClientCert},
      {"RequestClientCert", ClientAuth::kRequestClientCert},
      {"RequireAnyClientCert", ClientAuth::kRequireAnyClientCert},
      {"RequireClientCert", ClientAuth::kRequireAnyClientCert},  // the format's older name
      {"VerifyClientCertIfGiven", ClientAuth::kVerifyClientCertIfGiven},
      {"RequireAndVerifyClientCert", ClientAuth::kRequireAndVerifyClientCert}};
  const auto it = kPolicies.find(name);
  if (it == kPolicies.end()) {
    return absl::InvalidArgumentError("\"" + name +
                                      "\" is not NoClientCert, RequestClientCert, RequireAnyClientCert, "
                                      "VerifyClientCertIfGiven or RequireAndVerifyClientCert");
  }
  return it->second;
}

// The section's keys, as the format reads them (`set` says which were given).
struct TlsSection {
  MetricsTlsSettings settings;
  std::set<std::string> set;
  std::string client_auth_name;
};

absl::StatusOr<TlsSection> read_tls_section(const YAML::Node& node, const std::string& path, const Where& where) {
  TlsSection section;
  MetricsTlsSettings& tls = section.settings;
  const std::map<std::string, std::string*> files = {
      {"cert_file", &tls.cert_file}, {"key_file", &tls.key_file}, {"client_ca_file", &tls.client_ca_file}};
  absl::Status status =
      for_each_entry(node, "tls_server_config", where,
                     [&](const std::string& key, const YAML::Node& key_node, const YAML::Node& value) -> absl::Status {
                       const std::string name = "tls_server_config." + key;
                       if (unsupported("tls_server_config", key))
                         return where.error(key_node, name, "is not supported by podscope");
                       if (key == "client_allowed_sans") {
                         if (!value.IsSequence()) return where.error(value, name, "expected a list");
                         for (const YAML::Node& item : value) {
                           absl::StatusOr<std::string> san = scalar(item, name, where);
                           if (!san.ok()) return san.status();
                           tls.client_allowed_sans.push_back(*san);
                         }
                         section.set.insert(key);
                         return absl::OkStatus();
                       }
                       absl::StatusOr<std::string> text = scalar(value, name, where);
                       if (!text.ok()) return text.status();
                       if (!text->empty()) section.set.insert(key);
                       if (const auto file = files.find(key); file != files.end()) {
                         *file->second = relative_to(path, *text);
                       } else if (key == "client_auth_type") {
                         absl::StatusOr<ClientAuth> policy = client_auth(*text);
                         if (!policy.ok()) return where.error(value, name, std::string(policy.status().message()));
                         tls.client_auth = *policy;
                         section.client_auth_name = *text;
                       } else if (key == "min_version" || key == "max_version") {
                         absl::StatusOr<int> version = tls_version(*text);
                         if (!version.ok()) return where.error(value, name, std::string(version.status().message()));
                         (key == "min_version" ? tls.min_version : tls.max_version) = *version;
                       } else {
                         return where.error(key_node, name, "unknown key");
                       }
                       return absl::OkStatus();
                     });
  if (!status.ok()) return status;
  return section;
}

// The format's rules on how the keys go together; nullopt when the section configures no TLS at all.
absl::StatusOr<std::optional<MetricsTlsSettings>> check_tls_section(const TlsSection& section,
                                                                    const std::string& path) {
  const MetricsTlsSettings& tls = section.settings;
  const auto error = [&path](const std::string& what) {
    return absl::InvalidArgumentError(path + ": tls_server_config: " + what);
  };
  const bool enabled = section.set.count("cert_file") || section.set.count("key_file") ||
                       section.set.count("client_ca_file") || section.set.count("client_auth_type");
  if (!enabled) {
    if (!section.set.empty()) return error("has no cert_file and key_file: TLS is off, so nothing else applies");
    return std::nullopt;
  }
  if (tls.cert_file.empty()) return error("cert_file is missing");
  if (tls.key_file.empty()) return error("key_file is missing");
  if (tls.min_version > tls.max_version) return error("min_version is above max_version");
  const bool asks = tls.client_auth != ClientAuth::kNoClientCert;
  const bool verifies = tls.client_auth == ClientAuth::kVerifyClientCertIfGiven ||
                        tls.client_auth == ClientAuth::kRequireAndVerifyClientCert;
  const bool demands = tls.client_auth == ClientAuth::kRequireAnyClientCert ||
                       tls.client_auth == ClientAuth::kRequireAndVerifyClientCert;
  if (!tls.client_ca_file.empty() && !asks) {
    return error(
        "client_ca_file is set without a client_auth_type that asks for a certificate "
        "(RequireAndVerifyClientCert authenticates scrapers)");
  }
  if (verifies && tls.client_ca_file.empty()) {
    return error("client_auth_type " + section.client_auth_name +
                 " verifies client certificates: it needs client_ca_file");
  }
  if (!tls.client_allowed_sans.empty() && !demands) {
    return error("client_allowed_sans needs client_auth_type RequireAnyClientCert or RequireAndVerifyClientCert");
  }
  return tls;
}

// A bcrypt hash as htpasswd, Python's bcrypt and Go's write it: $2a$, $2b$ or $2y$, a two-digit cost, 53 characters
// of bcrypt's base64. Verification itself is libxcrypt's.
absl::Status check_bcrypt_hash(const std::string& hash) {
  static constexpr std::string_view kAlphabet = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  const bool shaped =
      hash.size() == 60 && hash[0] == '$' && hash[1] == '2' && (hash[2] == 'a' || hash[2] == 'b' || hash[2] == 'y') &&
      hash[3] == '$' && std::isdigit(static_cast<unsigned char>(hash[4])) &&
      std::isdigit(static_cast<unsigned char>(hash[5])) && hash[6] == '$' &&
      std::all_of(hash.begin() + 7, hash.end(), [](char c) { return kAlphabet.find(c) != std::string_view::npos; });
  if (!shaped) return absl::InvalidArgumentError("is not a bcrypt hash ($2a$, $2b$ or $2y$, as htpasswd -B writes)");
  const int cost = (hash[4] - '0') * 10 + (hash[5] - '0');
  if (cost < 4) return absl::InvalidArgumentError("bcrypt cost " + std::to_string(cost) + " is below 4");
  if (cost > kMaxBcryptCost) {
    return absl::InvalidArgumentError("bcrypt cost " + std::to_string(cost) + " is above " +
                                      std::to_string(kMaxBcryptCost) +
                                      " (each check would take seconds; a scrape's password is checked once)");
  }
  return absl::OkStatus();
}

absl::Status read_users(const YAML::Node& node, const Where& where, std::map<std::string, std::string>& users) {
  return for_each_entry(
      node, "basic_auth_users", where,
      [&](const std::string& user, const YAML::Node& key_node, const YAML::Node& value) -> absl::Status {
        const std::string name = "basic_auth_users." + user;
        if (user.empty() || user.find(':') != std::string::npos) {
          return where.error(key_node, name, "a user name is not empty and has no ':' (basic auth splits at it)");
        }
        absl::StatusOr<std::string> hash = scalar(value, name, where);
        if (!hash.ok()) return hash.status();
        if (absl::Status s = check_bcrypt_hash(*hash); !s.ok())
          return where.error(value, name, std::string(s.message()));
        users[user] = *hash;
        return absl::OkStatus();
      });
}

absl::StatusOr<MetricsWebConfig> parse(const std::string& path, const std::string& text) {
  MetricsWebConfig config{.path = path};
  const Where where(path);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(path + ":" + std::to_string(e.mark.line + 1) + ": invalid YAML: " + e.msg);
  }
  std::optional<TlsSection> tls_section;
  // yaml-cpp throws on conversions the document did not expect; every one becomes an error naming the line.
  try {
    absl::Status status = for_each_entry(
        root, "", where,
        [&](const std::string& key, const YAML::Node& key_node, const YAML::Node& value) -> absl::Status {
          if (unsupported("", key)) return where.error(key_node, key, "is not supported by podscope");
          if (key == "basic_auth_users") return read_users(value, where, config.basic_auth_users);
          if (key != "tls_server_config") return where.error(key_node, key, "unknown key");
          absl::StatusOr<TlsSection> section = read_tls_section(value, path, where);
          if (!section.ok()) return section.status();
          tls_section = std::move(*section);
          return absl::OkStatus();
        });
    if (!status.ok()) return status;
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(path + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (tls_section.has_value()) {
    absl::StatusOr<std::optional<MetricsTlsSettings>> tls = check_tls_section(*tls_section, path);
    if (!tls.ok()) return tls.status();
    config.tls = std::move(*tls);
  }
  return config;
}

// OpenSSL's queued errors as one line (and the queue emptied).
std::string openssl_errors() {
  std::string out;
  while (const unsigned long code = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(code, text, sizeof text);
    if (!out.empty()) out += "; ";
    out += text;
  }
  return out.empty() ? "no PEM data" : out;
}

using X509Ptr = std::unique_ptr<X509, decltype(&X509_free)>;

// Every certificate of a PEM text, in order.
absl::StatusOr<std::vector<X509Ptr>> read_certificates(const std::string& path) {
  absl::StatusOr<std::string> pem = read_regular_file(path);
  if (!pem.ok()) return pem.status();
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem->data(), static_cast<int>(pem->size())), BIO_free);
  std::vector<X509Ptr> certificates;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr))
    certificates.emplace_back(cert, X509_free);
  const unsigned long last = ERR_peek_last_error();
  if (ERR_GET_LIB(last) == ERR_LIB_PEM && ERR_GET_REASON(last) == PEM_R_NO_START_LINE) ERR_clear_error();  // the end
  if (certificates.empty() || ERR_peek_error() != 0) {
    return absl::InvalidArgumentError("\"" + path + "\": no PEM certificate (" + openssl_errors() + ")");
  }
  return certificates;
}

// The certificate chain and the private key, read from their files (never through OpenSSL's own file reads, so
// that what is read is bounded and never blocks) and checked to be a pair.
absl::Status load_identity(SSL_CTX* ctx, const MetricsTlsSettings& tls) {
  absl::StatusOr<std::vector<X509Ptr>> chain = read_certificates(tls.cert_file);
  if (!chain.ok()) return absl::InvalidArgumentError("cert_file " + std::string(chain.status().message()));
  if (SSL_CTX_use_certificate(ctx, chain->front().get()) != 1 || SSL_CTX_clear_chain_certs(ctx) != 1) {
    return absl::InvalidArgumentError("cert_file \"" + tls.cert_file + "\": " + openssl_errors());
  }
  for (size_t i = 1; i < chain->size(); ++i) {
    if (SSL_CTX_add1_chain_cert(ctx, (*chain)[i].get()) != 1) {
      return absl::InvalidArgumentError("cert_file \"" + tls.cert_file + "\": " + openssl_errors());
    }
  }
  absl::StatusOr<std::string> key_pem = read_regular_file(tls.key_file);
  if (!key_pem.ok()) return absl::InvalidArgumentError("key_file " + std::string(key_pem.status().message()));
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(key_pem->data(), static_cast<int>(key_pem->size())),
                                                BIO_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr),
                                                          EVP_PKEY_free);
  OPENSSL_cleanse(key_pem->data(), key_pem->size());
  if (key == nullptr) {
    return absl::InvalidArgumentError("key_file \"" + tls.key_file + "\": no PEM private key (" + openssl_errors() +
                                      ")");
  }
  if (X509_check_private_key(chain->front().get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError("key_file \"" + tls.key_file + "\" is not the private key of cert_file \"" +
                                      tls.cert_file + "\"");
  }
  if (SSL_CTX_use_PrivateKey(ctx, key.get()) != 1) {
    return absl::InvalidArgumentError("key_file \"" + tls.key_file + "\": " + openssl_errors());
  }
  return absl::OkStatus();
}

// The CAs client certificates are verified against, also named to clients in the handshake.
absl::Status load_client_cas(SSL_CTX* ctx, const std::string& path) {
  absl::StatusOr<std::vector<X509Ptr>> cas = read_certificates(path);
  if (!cas.ok()) return absl::InvalidArgumentError("client_ca_file " + std::string(cas.status().message()));
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  for (const X509Ptr& ca : *cas) {
    if (X509_STORE_add_cert(store, ca.get()) != 1 || SSL_CTX_add_client_CA(ctx, ca.get()) != 1) {
      return absl::InvalidArgumentError("client_ca_file \"" + path + "\": " + openssl_errors());
    }
  }
  return absl::OkStatus();
}

// A subject alternative name as the format compares it: DNS names, emails and URIs as written, IPs as text.
std::string san_text(const GENERAL_NAME* name) {
  switch (name->type) {
    case GEN_DNS:
    case GEN_EMAIL:
    case GEN_URI: {
      const ASN1_IA5STRING* text = name->d.ia5;
      return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(text)),
                         static_cast<size_t>(ASN1_STRING_length(text)));
    }
    case GEN_IPADD: {
      const ASN1_OCTET_STRING* ip = name->d.iPAddress;
      char text[INET6_ADDRSTRLEN] = {};
      const int family = ASN1_STRING_length(ip) == 4 ? AF_INET : ASN1_STRING_length(ip) == 16 ? AF_INET6 : 0;
      if (family == 0 || inet_ntop(family, ASN1_STRING_get0_data(ip), text, sizeof text) == nullptr) return "";
      return text;
    }
    default: return "";
  }
}

bool has_allowed_san(X509* cert, const std::vector<std::string>& allowed) {
  GENERAL_NAMES* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  bool found = false;
  for (int i = 0; names != nullptr && i < sk_GENERAL_NAME_num(names) && !found; ++i) {
    const std::string san = san_text(sk_GENERAL_NAME_value(names, i));
    found = !san.empty() && std::find(allowed.begin(), allowed.end(), san) != allowed.end();
  }
  GENERAL_NAMES_free(names);
  return found;
}

void set_client_policy(Ssl& context, const MetricsTlsSettings& tls) {
  switch (tls.client_auth) {
    case ClientAuth::kNoClientCert: context.set_verify_mode(Ssl::verify_none); return;
    case ClientAuth::kRequestClientCert:
    case ClientAuth::kVerifyClientCertIfGiven: context.set_verify_mode(Ssl::verify_peer); break;
    case ClientAuth::kRequireAnyClientCert:
    case ClientAuth::kRequireAndVerifyClientCert:
      context.set_verify_mode(Ssl::verify_peer | Ssl::verify_fail_if_no_peer_cert);
      break;
  }
  const bool verifies = tls.client_auth == ClientAuth::kVerifyClientCertIfGiven ||
                        tls.client_auth == ClientAuth::kRequireAndVerifyClientCert;
  context.set_verify_callback(
      [verifies, sans = tls.client_allowed_sans](bool preverified, boost::asio::ssl::verify_context& verify) {
        if (verifies && !preverified) return false;
        X509_STORE_CTX* store = verify.native_handle();
        if (sans.empty() || X509_STORE_CTX_get_error_depth(store) != 0) return true;
        return has_allowed_san(X509_STORE_CTX_get_current_cert(store), sans);
      });
}

}  // namespace

std::vector<std::string> MetricsWebConfig::files() const {
  std::vector<std::string> out{path};
  if (tls.has_value()) {
    for (const std::string* file : {&tls->cert_file, &tls->key_file, &tls->client_ca_file}) {
      if (!file->empty()) out.push_back(*file);
    }
  }
  return out;
}

absl::StatusOr<MetricsWebConfig> read_metrics_web_config(const std::string& path) {
  absl::StatusOr<std::string> text = read_regular_file(path);
  if (!text.ok()) return text.status();
  return parse(path, *text);
}

absl::StatusOr<std::shared_ptr<Ssl>> make_tls_context(const MetricsTlsSettings& tls) {
  auto context = std::make_shared<Ssl>(Ssl::tls_server);
  SSL_CTX* ctx = context->native_handle();
  ERR_clear_error();
  SSL_CTX_set_min_proto_version(ctx, tls.min_version);
  SSL_CTX_set_max_proto_version(ctx, tls.max_version);
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  // Resumption goes by tickets (kept by clients); the server keeps few sessions of its own.
  SSL_CTX_sess_set_cache_size(ctx, 64);
  if (absl::Status s = load_identity(ctx, tls); !s.ok()) return s;
  if (!tls.client_ca_file.empty()) {
    if (absl::Status s = load_client_cas(ctx, tls.client_ca_file); !s.ok()) return s;
  }
  set_client_policy(*context, tls);
  return context;
}

}  // namespace podscope
