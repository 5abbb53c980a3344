#include "tls/server_certificate.h"

#include <gtest/gtest.h>
#include <openssl/pem.h>

#include <filesystem>
#include <fstream>

#include "common/clock.h"
#include "tls/testing/test_pki.h"
#include "tls/x509_identity.h"

namespace falcon::tls {
namespace {

using testing::TestCa;
using testing::WriteFile;

class ServerCertificateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tls_unit_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    files_.cert_file = (dir_ / "tls.crt").string();
    files_.key_file = (dir_ / "tls.key").string();
    Put(ca_.Server(1));
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Put(const testing::TestCert& c) {
    WriteFile(files_.cert_file, c.cert_pem);
    WriteFile(files_.key_file, c.key_pem);
  }
  std::string Read(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  TestCa ca_{"falcon test CA"};
  std::filesystem::path dir_;
  ServerTlsFiles files_;
  FakeClock clock_;
};

TEST_F(ServerCertificateTest, LoadsThePairAndWritesTheGrpcCopy) {
  auto c = ServerCertificate::Create(files_, clock_);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->Info().serial, "01");
  EXPECT_EQ((*c)->Info().subject, "CN=falcon-test-server");
  EXPECT_NE((*c)->Context(), nullptr);
  std::string copy = Read((*c)->grpc_identity_file());
  EXPECT_NE(copy.find("PRIVATE KEY"), std::string::npos);
  EXPECT_NE(copy.find("BEGIN CERTIFICATE"), std::string::npos);
  EXPECT_EQ(std::filesystem::status((*c)->grpc_identity_file()).permissions() & std::filesystem::perms::others_read,
            std::filesystem::perms::none);
  std::string dir = std::filesystem::path((*c)->grpc_identity_file()).parent_path();
  c->reset();
  EXPECT_FALSE(std::filesystem::exists(dir)) << "the private copy is removed with the object";
}

TEST_F(ServerCertificateTest, ABrokenStartNamesTheFile) {
  WriteFile(files_.key_file, ca_.Server(2).key_pem);  // another certificate's key
  auto c = ServerCertificate::Create(files_, clock_);
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(c.status()));
  EXPECT_NE(c.status().message().find("--tls-key-file"), absl::string_view::npos) << c.status();
  EXPECT_NE(c.status().message().find("does not belong"), absl::string_view::npos) << c.status();

  files_.cert_file = (dir_ / "missing.crt").string();
  c = ServerCertificate::Create(files_, clock_);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("missing.crt"), absl::string_view::npos) << c.status();
}

TEST_F(ServerCertificateTest, ReloadsAChangedPairAndKeepsTheOldOneWhenTheNewOneIsBroken) {
  auto c = ServerCertificate::Create(files_, clock_);
  ASSERT_TRUE(c.ok()) << c.status();
  SslCtxPtr first = (*c)->Context();
  EXPECT_TRUE((*c)->MaybeReload().ok());  // unchanged
  EXPECT_EQ((*c)->Context(), first);
  EXPECT_EQ((*c)->Info().reloads, 0);

  Put(ca_.Server(2));
  ASSERT_TRUE((*c)->MaybeReload().ok());
  EXPECT_EQ((*c)->Info().serial, "02");
  EXPECT_EQ((*c)->Info().reloads, 1);
  SslCtxPtr second = (*c)->Context();
  EXPECT_NE(second, first);
  std::string copy = Read((*c)->grpc_identity_file());

  // Half a rotation: the new certificate, the old key.
  WriteFile(files_.cert_file, ca_.Server(3).cert_pem);
  absl::Status s = (*c)->MaybeReload();
  EXPECT_FALSE(s.ok());
  EXPECT_EQ((*c)->Info().serial, "02");
  EXPECT_EQ((*c)->Context(), second);
  EXPECT_EQ(Read((*c)->grpc_identity_file()), copy) << "gRPC never sees a refused pair";
  EXPECT_NE((*c)->Describe().find("refused"), std::string::npos) << (*c)->Describe();

  // Garbage, then a missing file: refused too.
  WriteFile(files_.cert_file, "not a certificate\n");
  EXPECT_FALSE((*c)->MaybeReload().ok());
  std::filesystem::remove(files_.key_file);
  EXPECT_FALSE((*c)->MaybeReload().ok());
  EXPECT_EQ((*c)->Info().serial, "02");

  // The rotation completes.
  Put(ca_.Server(4));
  ASSERT_TRUE((*c)->MaybeReload().ok());
  EXPECT_EQ((*c)->Info().serial, "04");
  EXPECT_TRUE((*c)->Info().last_error.empty());
}

TEST_F(ServerCertificateTest, TheReloadThreadFollowsTheFilesOnTheInjectedClock) {
  files_.check_interval = std::chrono::seconds(5);
  auto c = ServerCertificate::Create(files_, clock_);
  ASSERT_TRUE(c.ok()) << c.status();
  (*c)->Start();
  Put(ca_.Server(7));
  for (int i = 0; i < 200 && (*c)->Info().serial != "07"; ++i) {
    clock_.Advance(std::chrono::seconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ((*c)->Info().serial, "07");
}

TEST_F(ServerCertificateTest, ClientCaIsCheckedAndRequiredNeedsIt) {
  files_.client_ca_file = (dir_ / "ca.crt").string();
  WriteFile(files_.client_ca_file, "junk");
  auto c = ServerCertificate::Create(files_, clock_);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("--client-ca-file"), absl::string_view::npos) << c.status();
  WriteFile(files_.client_ca_file, ca_.cert_pem());
  c = ServerCertificate::Create(files_, clock_);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE((*c)->grpc_ca_file().empty());

  ServerTlsFiles f = files_;
  f.client_ca_file.clear();
  f.require_client_certificate = true;
  EXPECT_FALSE(ServerCertificate::Create(f, clock_).ok());
}

TEST(X509IdentityTest, CommonNameIsTheUserAndOrganizationsAreGroups) {
  TestCa ca("falcon test CA");
  auto p = PrincipalFromPem(ca.Client("alice@example.com", {"ml-team", "falcon-admins"}).cert_pem);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->username, "alice@example.com");
  EXPECT_EQ(p->groups, (std::vector<std::string>{"ml-team", "falcon-admins"}));
  EXPECT_EQ(p->authenticator, "x509");

  EXPECT_TRUE(absl::IsUnauthenticated(PrincipalFromPem("junk").status()));
  EXPECT_TRUE(absl::IsUnauthenticated(PrincipalFromPem(ca.Client("", {"ml-team"}).cert_pem).status()));
}

}  // namespace
}  // namespace falcon::tls
