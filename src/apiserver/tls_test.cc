// TLS of falcon-apiserver's listeners, in process on loopback ports with a test CA made at test time: HTTPS
// with the CA, plain HTTP to the TLS port refused, a wrong CA refused, a client certificate's identity at
// /v1/whoami (CN the user, O the groups, roles from the policy file), certificate reload (a new connection sees
// the new serial; a broken replacement keeps the old one), and gRPC over TLS with a client certificate.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "apiserver/access.h"
#include "apiserver/api_service.h"
#include "apiserver/http_server.h"
#include "apiserver/service.h"
#include "auth/static_tokens.h"
#include "falcon/api/v1/api.grpc.pb.h"
#include "net/http_client.h"
#include "tls/grpc_credentials.h"
#include "tls/server_certificate.h"
#include "tls/testing/test_pki.h"
#include "tls/x509_identity.h"

namespace falcon::apiserver {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using tls::testing::TestCa;
using tls::testing::WriteFile;
namespace apiv1 = ::falcon::api::v1;

tls::ClientTlsFiles Files(const std::string& ca, const std::string& cert = "", const std::string& key = "") {
  tls::ClientTlsFiles f;
  f.ca_file = ca;
  f.cert_file = cert;
  f.key_file = key;
  return f;
}
net::ClientOptions WithTls(const net::TlsOptions& tls) {
  net::ClientOptions o;
  o.tls = tls;
  return o;
}

std::string PeerSerial(int port, const std::string& ca_pem) { return tls::testing::PeerCertificateSerial(port, ca_pem); }

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "falcon-apiserver-tls-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    auto store = store::OpenStore("sqlite://" + (dir_ / "falcon.db").string());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    files_.cert_file = (dir_ / "tls.crt").string();
    files_.key_file = (dir_ / "tls.key").string();
    files_.client_ca_file = (dir_ / "ca.crt").string();
    files_.check_interval = std::chrono::seconds(1);  // the gRPC copy's refresh; reloads are called by hand
    PutServer(ca_.Server(1));
    WriteFile(files_.client_ca_file, ca_.cert_pem());
    policy_ = (dir_ / "policy.yaml").string();
    std::ofstream(policy_) << "bindings:\n- role: viewer\n  groups: [ml-team]\n"
                              "- role: controller\n  users: [analyzer-controller]\n";
    store::ApiToken t;
    t.name = "admin";
    t.role = "admin";
    t.token_hash = auth::HashToken("secret-of-admin");
    t.created_by = "test";
    t.created_at = clock_.Now();
    ASSERT_TRUE(store_->CreateApiToken(t).ok());
  }
  void PutServer(const tls::testing::TestCert& c) {
    WriteFile(files_.cert_file, c.cert_pem);
    WriteFile(files_.key_file, c.key_pem);
  }
  void Start(bool auth = true) {
    auto cert = tls::ServerCertificate::Create(files_, clock_);
    ASSERT_TRUE(cert.ok()) << cert.status();
    cert_ = std::move(*cert);
    ApiServiceOptions so;
    if (auth) {
      tokens_ = std::make_unique<auth::StaticTokenAuthenticator>(*store_, clock_);
      AccessOptions ao;
      ao.policy_file = policy_;
      auto ac = AccessControl::Create(*tokens_, nullptr, clock_, ao);
      ASSERT_TRUE(ac.ok()) << ac.status();
      access_ = std::move(*ac);
      so.access = access_.get();
    }
    so.transport_status = [this] { return cert_->Describe(); };
    service_ = std::make_unique<ApiService>(*store_, nullptr, nullptr, clock_, random_, so);
    HttpServerOptions ho;
    ho.tls = cert_.get();
    http_ = std::make_unique<HttpServer>(*service_, metrics_, ho);
    auto port = http_->Bind("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
    http_thread_ = std::thread([this] { http_->Run(); });
    grpc_service_ = std::make_unique<FalconApiService>(*service_, metrics_);
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", tls::GrpcServerCredentials(*cert_), &grpc_port_);
    b.RegisterService(grpc_service_.get());
    grpc_ = b.BuildAndStart();
    ASSERT_TRUE(grpc_ != nullptr && grpc_port_ > 0);
  }
  void TearDown() override {
    if (http_) http_->Stop();
    if (http_thread_.joinable()) http_thread_.join();
    if (grpc_) grpc_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    grpc_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  absl::StatusOr<net::HttpResponse> Get(const std::string& url, net::TlsOptions tls,
                                        const std::string& bearer = "") {
    net::HttpClient client(WithTls(tls));
    net::HttpRequest req;
    req.url = url;
    req.bearer_token = bearer;
    req.connect_timeout = std::chrono::seconds(5);
    req.timeout = std::chrono::seconds(10);
    return client.Send(req);
  }
  std::string Https(const std::string& path) { return "https://127.0.0.1:" + std::to_string(port_) + path; }
  net::TlsOptions Trusting(const std::string& ca_pem) {
    net::TlsOptions t;
    t.ca_pem = ca_pem;
    return t;
  }

  std::unique_ptr<apiv1::FalconAPIService::Stub> Stub(const tls::ClientTlsFiles& f) {
    auto creds = tls::GrpcChannelCredentials(f, "api-");
    EXPECT_TRUE(creds.ok()) << creds.status();
    return apiv1::FalconAPIService::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port_), *creds));
  }
  grpc::Status ListRunning(apiv1::FalconAPIService::Stub& stub, std::string* server_cert_pem = nullptr) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    apiv1::ListRunningAnalysesRequest q;
    apiv1::ListRunningAnalysesResponse r;
    grpc::Status s = stub.ListRunningAnalyses(&ctx, q, &r);
    if (server_cert_pem != nullptr && ctx.auth_context() != nullptr) {
      auto v = ctx.auth_context()->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME);
      if (!v.empty()) *server_cert_pem = std::string(v[0].data(), v[0].size());
    }
    return s;
  }
  std::string WriteClientFiles(const std::string& name, const tls::testing::TestCert& c) {
    WriteFile((dir_ / (name + ".crt")).string(), c.cert_pem);
    WriteFile((dir_ / (name + ".key")).string(), c.key_pem);
    return (dir_ / name).string();
  }

  TestCa ca_{"falcon test CA"};
  fs::path dir_;
  tls::ServerTlsFiles files_;
  std::string policy_;
  FakeClock clock_;
  FakeRandom random_;
  Metrics metrics_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<auth::StaticTokenAuthenticator> tokens_;
  std::unique_ptr<AccessControl> access_;
  std::unique_ptr<tls::ServerCertificate> cert_;
  std::unique_ptr<ApiService> service_;
  std::unique_ptr<HttpServer> http_;
  std::thread http_thread_;
  int port_ = 0, grpc_port_ = 0;
  std::unique_ptr<FalconApiService> grpc_service_;
  std::unique_ptr<grpc::Server> grpc_;
};

TEST_F(TlsTest, HttpsWithTheCaWorksAndReadyzSaysTls) {
  Start();
  auto r = Get(Https("/healthz"), Trusting(ca_.cert_pem()));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "ok\n");
  r = Get(Https("/readyz"), Trusting(ca_.cert_pem()));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->body.find("tls: on, certificate CN=falcon-test-server serial 01"), std::string::npos) << r->body;
  // A bearer token works over TLS as over plain HTTP.
  r = Get(Https("/v1/whoami"), Trusting(ca_.cert_pem()), "secret-of-admin");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(json::parse(r->body)["username"], "token:admin") << r->body;
  // Keep-alive and a body over TLS: several requests on one client.
  net::HttpClient client(WithTls(Trusting(ca_.cert_pem())));
  for (int i = 0; i < 3; ++i) {
    net::HttpRequest req;
    req.method = "POST";
    req.url = Https("/v1/exps");
    req.bearer_token = "secret-of-admin";
    req.headers = {"Content-Type: application/json"};
    req.body = json{{"exp_id", "e" + std::to_string(i)}, {"name", "e"}, {"status", "completed"}}.dump();
    auto c = client.Send(req);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->status, 201) << c->body;
  }
}

TEST_F(TlsTest, PlainHttpToTheTlsPortFails) {
  Start();
  auto r = Get("http://127.0.0.1:" + std::to_string(port_) + "/healthz", {});
  EXPECT_FALSE(r.ok() && r->status == 200) << "plain HTTP must not be served on the TLS port";
  // The server keeps serving TLS afterwards.
  r = Get(Https("/healthz"), Trusting(ca_.cert_pem()));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
}

TEST_F(TlsTest, AWrongCaIsRefused) {
  Start();
  TestCa other("another CA");
  auto r = Get(Https("/healthz"), Trusting(other.cert_pem()));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(net::TransportFailureOf(r.status()), net::TransportFailure::kTlsVerify) << r.status();
  EXPECT_NE(PeerSerial(port_, other.cert_pem()).find("handshake failed"), std::string::npos);
}

TEST_F(TlsTest, AClientCertificateIsTheCallerAtWhoami) {
  Start();
  auto alice = ca_.Client("alice@example.com", {"ml-team", "interns"});
  net::TlsOptions t = Trusting(ca_.cert_pem());
  t.client_cert_pem = alice.cert_pem;
  t.client_key_pem = alice.key_pem;
  auto r = Get(Https("/v1/whoami"), t);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->status, 200) << r->body;
  json who = json::parse(r->body);
  EXPECT_EQ(who["username"], "alice@example.com");
  EXPECT_EQ(who["groups"], json::array({"ml-team", "interns"}));
  EXPECT_EQ(who["roles"], json::array({"viewer"}));  // from the policy file, by group
  EXPECT_EQ(who["authenticator"], "x509");
  // The roles apply: a viewer may list, not create.
  r = Get(Https("/v1/exps"), t);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200) << r->body;

  // A bearer token sent along decides alone.
  r = Get(Https("/v1/whoami"), t, "secret-of-admin");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(json::parse(r->body)["username"], "token:admin");

  // Without a certificate: anonymous (401 on whoami).
  r = Get(Https("/v1/whoami"), Trusting(ca_.cert_pem()));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 401) << r->body;

  // A certificate from a CA the server does not trust fails the handshake.
  TestCa other("another CA");
  auto mallory = other.Client("admin", {"ml-team"});
  t.client_cert_pem = mallory.cert_pem;
  t.client_key_pem = mallory.key_pem;
  r = Get(Https("/v1/whoami"), t);
  EXPECT_FALSE(r.ok() && r->status == 200) << r->body;
}

TEST_F(TlsTest, ANewConnectionSeesAReloadedCertificateAndABrokenOneKeepsTheOld) {
  Start();
  EXPECT_EQ(PeerSerial(port_, ca_.cert_pem()), "01");
  PutServer(ca_.Server(2));
  ASSERT_TRUE(cert_->MaybeReload().ok());
  EXPECT_EQ(PeerSerial(port_, ca_.cert_pem()), "02");

  // A broken replacement (the new certificate with the old key) is refused; connections still get 02.
  WriteFile(files_.cert_file, ca_.Server(3).cert_pem);
  EXPECT_FALSE(cert_->MaybeReload().ok());
  EXPECT_EQ(PeerSerial(port_, ca_.cert_pem()), "02");
  auto r = Get(Https("/readyz"), Trusting(ca_.cert_pem()));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->body.find("serial 02"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("refused"), std::string::npos) << r->body;

  // gRPC follows too (its provider re-reads the checked copy every second): a new channel sees serial 02.
  auto stub = Stub(Files(files_.client_ca_file));
  std::string serial;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(std::chrono::milliseconds(200))) {
    stub = Stub(Files(files_.client_ca_file));
    std::string pem;
    ListRunning(*stub, &pem);
    if (pem.empty()) continue;
    BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    X509* x = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    if (x != nullptr) {
      serial = tls::SerialText(x);
      X509_free(x);
    }
    if (serial == "02") break;
  }
  EXPECT_EQ(serial, "02") << "gRPC did not pick up the reloaded certificate within 15 s";
}

TEST_F(TlsTest, GrpcOverTlsWithAClientCertificate) {
  Start();
  // Plaintext to the TLS port fails.
  auto plain = apiv1::FalconAPIService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port_), grpc::InsecureChannelCredentials()));
  EXPECT_EQ(ListRunning(*plain).error_code(), grpc::StatusCode::UNAVAILABLE);
  // TLS without a client certificate: anonymous.
  auto anon = Stub(Files(files_.client_ca_file));
  EXPECT_EQ(ListRunning(*anon).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // With the controller's client certificate (the policy binds its CN to role controller).
  std::string base = WriteClientFiles("controller", ca_.Client("analyzer-controller", {}));
  auto ctl = Stub(Files(files_.client_ca_file, base + ".crt", base + ".key"));
  grpc::Status s = ListRunning(*ctl);
  EXPECT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
  // A wrong CA on the client side: refused.
  TestCa other("another CA");
  WriteFile((dir_ / "other-ca.crt").string(), other.cert_pem());
  auto wrong = Stub(Files((dir_ / "other-ca.crt").string()));
  EXPECT_EQ(ListRunning(*wrong).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsTest, ClientTlsFlagsAreChecked) {
  auto c = tls::GrpcChannelCredentials(Files("", "x.crt", "x.key"), "controller-");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("--controller-ca-file"), absl::string_view::npos) << c.status();
  c = tls::GrpcChannelCredentials(Files(files_.client_ca_file, "x.crt"), "controller-");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("together"), absl::string_view::npos) << c.status();
  c = tls::GrpcChannelCredentials(Files((dir_ / "missing.crt").string()), "controller-");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("missing.crt"), absl::string_view::npos) << c.status();
}

}  // namespace
}  // namespace falcon::apiserver
