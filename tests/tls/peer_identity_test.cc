#include "tls/peer_identity.h"

#include <gtest/gtest.h>

namespace podscope::tls {
namespace {

PeerCertificate with_sans(std::vector<std::string> sans, std::vector<std::string> dns_and_uri,
                          std::string common_name = "ignored-cn") {
  return PeerCertificate{
      .over_tls = true, .sans = std::move(sans), .dns_and_uri = std::move(dns_and_uri), .common_name = common_name};
}

TEST(PeerIdentity, DnsAndUriSansAreTheNamesWhenTheCertificateHasSans) {
  const PeerCertificate peer =
      with_sans({"cli.example", "spiffe://example/cli", "127.0.0.1"}, {"cli.example", "spiffe://example/cli"});
  EXPECT_EQ(certificate_names(peer), (std::vector<std::string>{"cli.example", "spiffe://example/cli"}));
  EXPECT_EQ(peer_identity(peer), "cli.example,spiffe://example/cli");
}

TEST(PeerIdentity, CommonNameIsTheNameOnlyWithoutAnySan) {
  const PeerCertificate cn_only{.over_tls = true, .common_name = "cn-only"};
  EXPECT_EQ(certificate_names(cn_only), std::vector<std::string>{"cn-only"});
  // Only an IP SAN: it has SANs, so the CN does not count, and no name matches.
  const PeerCertificate ip_only = with_sans({"10.0.0.1"}, {}, "cn-only");
  EXPECT_TRUE(certificate_names(ip_only).empty());
  EXPECT_EQ(peer_identity(ip_only), "a certificate without DNS or URI name");
}

TEST(PeerIdentity, PlaintextPortAndMissingCertificateAreNamed) {
  EXPECT_EQ(peer_identity(PeerCertificate{.over_tls = false}), "local plaintext");
  EXPECT_EQ(peer_identity(PeerCertificate{.over_tls = true}), "no certificate");
}

TEST(CallerAllowed, AnEntryMustEqualADnsOrUriSan) {
  const std::vector<std::string> allowed = {"cli.example", "spiffe://example/ops"};
  EXPECT_TRUE(caller_allowed(with_sans({"cli.example"}, {"cli.example"}), allowed));
  EXPECT_TRUE(caller_allowed(with_sans({"spiffe://example/ops"}, {"spiffe://example/ops"}), allowed));
  EXPECT_FALSE(caller_allowed(with_sans({"other.example"}, {"other.example"}, "cli.example"), allowed));
  // No suffix or prefix matching: names are compared whole.
  EXPECT_FALSE(caller_allowed(with_sans({"x.cli.example"}, {"x.cli.example"}), allowed));
  EXPECT_FALSE(caller_allowed(with_sans({"spiffe://example/ops/x"}, {"spiffe://example/ops/x"}), allowed));
}

TEST(CallerAllowed, CommonNameMatchesOnlyWithoutSans) {
  const std::vector<std::string> allowed = {"cn-only"};
  EXPECT_TRUE(caller_allowed(PeerCertificate{.over_tls = true, .common_name = "cn-only"}, allowed));
  EXPECT_FALSE(caller_allowed(with_sans({"10.0.0.1"}, {}, "cn-only"), allowed));
}

TEST(CallerAllowed, EmptyListAdmitsEveryCertificateAndPlaintextPortIsTrusted) {
  EXPECT_TRUE(caller_allowed(with_sans({"anyone.example"}, {"anyone.example"}), {}));
  EXPECT_TRUE(caller_allowed(PeerCertificate{.over_tls = false}, {"cli.example"}));
  EXPECT_FALSE(caller_allowed(PeerCertificate{.over_tls = true}, {"cli.example"}));
}

TEST(ForwardedIdentity, CarriesTheCallersCertificateNamesOrNoCertificate) {
  const PeerCertificate cli{.over_tls = true,
                            .sans = {"cli.example", "spiffe://example/cli"},
                            .dns_and_uri = {"cli.example", "spiffe://example/cli"}};
  EXPECT_EQ(forwarded_identity(cli), "tls:cli.example,spiffe://example/cli");
  const PeerCertificate back = forwarded_certificate(forwarded_identity(cli));
  EXPECT_TRUE(back.over_tls);
  EXPECT_TRUE(caller_allowed(back, {"spiffe://example/cli"}));
  EXPECT_FALSE(caller_allowed(back, {"other.example"}));
  EXPECT_EQ(peer_identity(back), "cli.example,spiffe://example/cli");
  // No certificate (the loopback plaintext port), or anything that is not "tls:...", names no certificate.
  EXPECT_EQ(forwarded_identity(PeerCertificate{}), kLocalPlaintextIdentity);
  for (const std::string& value : {std::string(kLocalPlaintextIdentity), std::string("cli.example"), std::string()}) {
    EXPECT_FALSE(forwarded_certificate(value).over_tls) << value;
  }
  // A name cannot smuggle a second name or a control character through the metadata.
  const PeerCertificate odd{.over_tls = true, .sans = {"a,b\n"}, .dns_and_uri = {"a,b\n"}};
  EXPECT_EQ(forwarded_identity(odd), "tls:a?b?");
}

}  // namespace
}  // namespace podscope::tls
