// TLS between the real binaries, with a CA, server and client certificates made at test time in a temp dir:
// falcon-apiserver serves HTTPS and gRPC over TLS (--tls-cert-file, --tls-key-file, --client-ca-file) with
// access control on; analyzer-controller serves gRPC over TLS and requires a client certificate
// (--client-ca-file); each dials the other over TLS (--controller-ca-file with a client certificate,
// --api-ca-file). The falcon CLI reaches the HTTPS API with --certificate-authority / FALCON_CA_FILE and runs
// an analysis end to end; a client certificate's identity reaches /v1/whoami (curl); the certificate is
// replaced on disk and new connections get it, while a broken replacement is refused and the old one kept.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "falcon/analyzer/v1/analyzer.grpc.pb.h"
#include "support/process.h"
#include "support/wait.h"
#include "tls/testing/test_pki.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using falcon::testsupport::FreePort;
using falcon::testsupport::Process;
using falcon::testsupport::ReadFile;
using falcon::testsupport::WaitFor;
using falcon::tls::testing::PeerCertificateSerial;
using falcon::tls::testing::TestCa;
using falcon::tls::testing::TestCert;

const std::string kBin = FALCON_BIN_DIR;

class TransportSecurity : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "falcon-transport-sec-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ / "objects");
    fs::create_directories(dir_ / "state");
    fs::permissions(dir_, fs::perms::all);  // Pods may run as an unprivileged user
    Put("ca.crt", ca_.cert_pem());
    PutPair("apiserver", ca_.Server(1, "falcon-apiserver"));
    PutPair("controller", ca_.Server(2, "analyzer-controller"));
    PutPair("apiserver-client", ca_.Client("falcon-apiserver", {}, 3));
    PutPair("controller-client", ca_.Client("analyzer-controller", {}, 4));
    PutPair("alice", ca_.Client("alice@example.com", {"ml-team"}, 5));
    Put("policy.yaml", "bindings:\n- role: submitter\n  groups: [ml-team]\n");
    http_ = FreePort();
    grpc_ = FreePort();
    ctl_grpc_ = FreePort();
    ctl_http_ = FreePort();

    apiserver_ = std::make_unique<Process>(
        std::vector<std::string>{
            kBin + "/falcon-apiserver", "--db=sqlite://" + P("falcon.db"),
            "--http-listen=127.0.0.1:" + std::to_string(http_), "--grpc-listen=127.0.0.1:" + std::to_string(grpc_),
            "--controller-addr=127.0.0.1:" + std::to_string(ctl_grpc_), "--object-store=file://" + P("objects"),
            "--allowed-input-root=file://" + dir_.string(), "--auth=on", "--admin-token-file=" + P("admin.token"),
            "--policy-file=" + P("policy.yaml"), "--tls-cert-file=" + P("apiserver.crt"),
            "--tls-key-file=" + P("apiserver.key"), "--client-ca-file=" + P("ca.crt"), "--tls-reload-interval=1",
            "--controller-ca-file=" + P("ca.crt"), "--controller-client-cert-file=" + P("apiserver-client.crt"),
            "--controller-client-key-file=" + P("apiserver-client.key")},
        dir_ / "apiserver.log");
    ASSERT_TRUE(WaitFor([&] { return PeerCertificateSerial(http_, ca_.cert_pem()) == "01"; }, 30s))
        << "API server not serving TLS:\n"
        << apiserver_->Log();
    ASSERT_TRUE(WaitFor([&] { return fs::exists(dir_ / "controller.token"); }, 10s));

    controller_ = std::make_unique<Process>(
        std::vector<std::string>{
            kBin + "/analyzer-controller", "--api-server=127.0.0.1:" + std::to_string(grpc_),
            "--api-token-file=" + P("controller.token"), "--api-ca-file=" + P("ca.crt"),
            "--api-client-cert-file=" + P("controller-client.crt"),
            "--api-client-key-file=" + P("controller-client.key"),
            "--grpc-listen=127.0.0.1:" + std::to_string(ctl_grpc_),
            "--http-listen=127.0.0.1:" + std::to_string(ctl_http_), "--object-store=file://" + P("objects"),
            "--allowed-input-root=file://" + dir_.string(), "--runtime=local", "--state-dir=" + P("state"),
            "--poll-interval=0.5", "--resync-interval=1", "--log-upload-interval=1", "--identity=c0",
            "--tls-cert-file=" + P("controller.crt"), "--tls-key-file=" + P("controller.key"),
            "--client-ca-file=" + P("ca.crt")},
        dir_ / "controller.log");
    // Ready = the leader, which got its epoch from the API server's gRPC over TLS.
    ASSERT_TRUE(WaitFor([&] { return ControllerReady(); }, 60s))
        << "controller not ready:\n" << controller_->LogTail() << "\n--- apiserver\n" << apiserver_->LogTail();
  }
  bool ControllerReady() {
    httplib::Client cli("127.0.0.1", ctl_http_);
    cli.set_connection_timeout(1);
    cli.set_read_timeout(2);
    auto r = cli.Get("/readyz");
    return r && r->status == 200;
  }
  void TearDown() override {
    controller_.reset();
    apiserver_.reset();
    if (!HasFailure()) fs::remove_all(dir_);
    else std::cerr << "kept " << dir_ << " for inspection\n";
  }

  std::string P(const std::string& name) const { return (dir_ / name).string(); }
  void Put(const std::string& name, const std::string& data) { falcon::tls::testing::WriteFile(P(name), data); }
  void PutPair(const std::string& name, const TestCert& c) {
    Put(name + ".crt", c.cert_pem);
    Put(name + ".key", c.key_pem);
  }
  std::string Server() const { return "https://127.0.0.1:" + std::to_string(http_); }

  // The falcon CLI with the admin token and the CA (unless `flags` replace them), without any config file.
  Process::Result Cli(std::vector<std::string> args, std::map<std::string, std::string> env = {},
                      bool with_ca = true, bool with_token = true) {
    std::vector<std::string> argv = {kBin + "/falcon", "--server", Server()};
    if (with_ca) argv.insert(argv.end(), {"--certificate-authority", P("ca.crt")});
    if (with_token) argv.insert(argv.end(), {"--token-file", P("admin.token")});
    argv.insert(argv.end(), args.begin(), args.end());
    Process::Options o;
    o.env = std::move(env);
    o.env["HOME"] = dir_.string();  // no config file there
    o.unset_env = {"FALCON_SERVER", "FALCON_TOKEN", "FALCON_CA_FILE", "FALCON_CONTEXT", "FALCON_CONFIG",
                   "XDG_CONFIG_HOME"};
    return Process::Run(argv, 120s, o);
  }

  TestCa ca_{"falcon transport test CA"};
  fs::path dir_;
  int http_ = 0, grpc_ = 0, ctl_grpc_ = 0, ctl_http_ = 0;
  std::unique_ptr<Process> apiserver_, controller_;
};

TEST_F(TransportSecurity, AnAnalysisRunsEndToEndOverTlsBetweenTheRealBinaries) {
  auto r = Cli({"exp", "create", "--id", "e1", "--status", "completed"});
  ASSERT_EQ(r.code, 0) << r.output;
  // Created through HTTPS, forwarded to the controller over mutual TLS, its record written back over TLS
  // to the API server's gRPC by the controller.
  r = Cli({"analysis", "create", "--exp-id", "e1", "--command", "echo hello-over-tls", "--wait", "--wait-timeout", "90s"});
  ASSERT_EQ(r.code, 0) << r.output << "\n--- apiserver\n" << apiserver_->LogTail() << "\n--- controller\n"
                       << controller_->LogTail();
  r = Cli({"analysis", "list", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.output;
  json list = json::parse(r.output, nullptr, false);
  ASSERT_TRUE(list.is_array() || list.is_object()) << r.output;
  const json& items = list.is_array() ? list : list["analyses"];
  ASSERT_FALSE(items.empty()) << r.output;
  std::string id = items[0].value("analysis_id", "");
  r = Cli({"analysis", "logs", id});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("hello-over-tls"), std::string::npos) << r.output;
}

TEST_F(TransportSecurity, TheCliNeedsTheCaAndTakesItFromTheEnvironment) {
  auto r = Cli({"whoami"}, {}, /*with_ca=*/false);
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("--certificate-authority"), std::string::npos) << r.output;
  r = Cli({"whoami", "-o", "json"}, {{"FALCON_CA_FILE", P("ca.crt")}}, /*with_ca=*/false);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("token:local-admin"), std::string::npos) << r.output;
  // Plain http:// to the TLS port is not served.
  std::vector<std::string> argv = {kBin + "/falcon", "--server", "http://127.0.0.1:" + std::to_string(http_),
                                   "--token-file", P("admin.token"), "whoami"};
  Process::Options o;
  o.env["HOME"] = dir_.string();
  auto plain = Process::Run(argv, 60s, o);
  EXPECT_NE(plain.code, 0) << plain.output;
}

TEST_F(TransportSecurity, OnlyCallersWithAClientCertificateReachTheControllersGrpc) {
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = ca_.cert_pem();
  auto call = [&](const grpc::SslCredentialsOptions& creds) {
    auto stub = falcon::analyzer::v1::AnalyzerControllerService::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(ctl_grpc_), grpc::SslCredentials(creds)));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    falcon::analyzer::v1::ListPluginsRequest q;
    falcon::analyzer::v1::ListPluginsResponse resp;
    return stub->ListPlugins(&ctx, q, &resp);
  };
  EXPECT_EQ(call(o).error_code(), grpc::StatusCode::UNAVAILABLE) << "no client certificate: no handshake";
  o.pem_cert_chain = ReadFile(P("apiserver-client.crt"));
  o.pem_private_key = ReadFile(P("apiserver-client.key"));
  grpc::Status s = call(o);
  // Past TLS, the controller still wants its token: UNAUTHENTICATED, not UNAVAILABLE.
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
}

TEST_F(TransportSecurity, AClientCertificateIsTheCallerAndTheCertificateReloadsOnDisk) {
  // alice presents her client certificate through the CLI: by flags, by the environment, by a context.
  auto whoami = Cli({"--client-certificate", P("alice.crt"), "--client-key", P("alice.key"), "whoami", "-o", "json"},
                    {}, /*with_ca=*/true, /*with_token=*/false);
  ASSERT_EQ(whoami.code, 0) << whoami.output;
  json who = json::parse(whoami.output, nullptr, false);
  EXPECT_EQ(who.value("username", ""), "alice@example.com") << whoami.output;
  EXPECT_EQ(who.value("authenticator", ""), "x509") << whoami.output;
  EXPECT_EQ(who["roles"], json::array({"submitter"})) << whoami.output;
  whoami = Cli({"whoami", "-o", "json"},
               {{"FALCON_CLIENT_CERTIFICATE", P("alice.crt")}, {"FALCON_CLIENT_KEY", P("alice.key")}},
               /*with_ca=*/true, /*with_token=*/false);
  ASSERT_EQ(whoami.code, 0) << whoami.output;
  EXPECT_NE(whoami.output.find("alice@example.com"), std::string::npos) << whoami.output;
  auto set = Cli({"config", "set-context", "mtls", "--server", Server(), "--certificate-authority", P("ca.crt"),
                  "--client-certificate", P("alice.crt"), "--client-key", P("alice.key"), "--current"},
                 {}, /*with_ca=*/false, /*with_token=*/false);
  ASSERT_EQ(set.code, 0) << set.output;
  Process::Options po;
  po.env["HOME"] = dir_.string();
  po.unset_env = {"FALCON_SERVER", "FALCON_TOKEN", "FALCON_CA_FILE", "FALCON_CONTEXT", "FALCON_CONFIG",
                  "XDG_CONFIG_HOME"};
  auto by_context = Process::Run({kBin + "/falcon", "whoami", "-o", "json"}, 60s, po);
  ASSERT_EQ(by_context.code, 0) << by_context.output;
  EXPECT_NE(by_context.output.find("alice@example.com"), std::string::npos) << by_context.output;
  fs::remove_all(dir_ / ".config");  // the rest of the test is the admin's
  // Half a pair, or a certificate for a plain http:// server, is a clear error.
  auto half = Cli({"--client-certificate", P("alice.crt"), "whoami"}, {}, true, false);
  EXPECT_NE(half.code, 0);
  EXPECT_NE(half.output.find("--client-certificate and --client-key go together"), std::string::npos) << half.output;
  auto plain = Process::Run({kBin + "/falcon", "--server", "http://127.0.0.1:" + std::to_string(http_),
                             "--client-certificate", P("alice.crt"), "--client-key", P("alice.key"), "whoami"},
                            60s, po);
  EXPECT_NE(plain.code, 0);
  EXPECT_NE(plain.output.find("needs an https:// server"), std::string::npos) << plain.output;
  auto swapped = Cli({"--client-certificate", P("alice.key"), "--client-key", P("alice.crt"), "whoami"}, {}, true,
                     false);
  EXPECT_NE(swapped.code, 0);
  EXPECT_NE(swapped.output.find("holds no PEM block"), std::string::npos) << swapped.output;

  // Replace the pair on disk (as cert-manager does): new connections get serial 09 within a few seconds.
  PutPair("apiserver", ca_.Server(9, "falcon-apiserver"));
  EXPECT_TRUE(WaitFor([&] { return PeerCertificateSerial(http_, ca_.cert_pem()) == "09"; }, 20s))
      << PeerCertificateSerial(http_, ca_.cert_pem()) << "\n" << apiserver_->LogTail();
  // A broken replacement (a certificate without its key) is refused and logged; serial 09 stays.
  Put("apiserver.crt", ca_.Server(10, "falcon-apiserver").cert_pem);
  EXPECT_TRUE(WaitFor([&] { return apiserver_->Log().find("refused, keeping the certificate in use") !=
                                   std::string::npos; },
                      20s))
      << apiserver_->LogTail();
  EXPECT_EQ(PeerCertificateSerial(http_, ca_.cert_pem()), "09");
  // The system keeps working over the reloaded certificate: the controller reaches the API server's gRPC.
  auto r = Cli({"exp", "create", "--id", "e2", "--status", "completed"});
  ASSERT_EQ(r.code, 0) << r.output;
  r = Cli({"analysis", "create", "--exp-id", "e2", "--command", "true", "--wait", "--wait-timeout", "90s"});
  EXPECT_EQ(r.code, 0) << r.output << "\n--- controller\n" << controller_->LogTail();
}

}  // namespace
