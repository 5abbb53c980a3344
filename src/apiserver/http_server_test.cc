// The HTTP/JSON API on a real port, over SQLite and a local object store, with fake
// AnalyzerControllerService replicas served in-process over gRPC.
#include "apiserver/http_server.h"

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "apiserver/controller_client.h"
#include "apiserver/testing/http_server_fixture.h"
#include "common/ids.h"
#include "falcon/analyzer/v1/analyzer.grpc.pb.h"
#include "google/protobuf/util/time_util.h"

namespace falcon::apiserver {
namespace {

using namespace analyzer::v1;  // NOLINT
using api::v1::AnalysisRecord;
using google::protobuf::util::TimeUtil;
using nlohmann::json;

// A leader replica: does what the real controller does to the database, in the simplest way.
class FakeController final : public AnalyzerControllerService::Service {
 public:
  FakeController(store::Store& store, Clock& clock, Random& random)
      : store_(store), clock_(clock), random_(random) {}

  grpc::Status CreateAnalysis(grpc::ServerContext*, const CreateAnalysisRequest* req,
                              CreateAnalysisResponse* resp) override {
    if (!req->plugin_name().empty() && req->plugin_name() != "file-stats") {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "plugin \"" + req->plugin_name() + "\" is not in the catalog");
    }
    last_create = *req;
    AnalysisRecord r;
    r.set_analysis_id(req->analysis_id().empty() ? NewUuidV7(clock_, random_) : req->analysis_id());
    r.set_exp_id(req->exp_id());
    r.set_name(req->name());
    r.set_analysis_type(req->analysis_type());
    r.set_plugin_name(req->plugin_name());
    r.set_command(req->command());
    r.set_script_content(req->script_content());
    r.set_script_name(req->script_name());
    r.set_artifact_id(req->artifact_id());
    if (req->has_resource_override()) *r.mutable_resource_override() = req->resource_override();
    r.set_image(req->image());
    r.set_timeout_seconds(req->timeout_seconds());
    r.set_rerun_of(req->rerun_of());
    r.set_status(api::v1::ANALYSIS_STATUS_PENDING);
    *r.mutable_created_at() = TimeUtil::SecondsToTimestamp(1'700'000'000);
    *r.mutable_updated_at() = r.created_at();
    auto s = store_.CreateAnalysisRecord(r);
    if (!s.ok()) return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
    resp->set_analysis_id(r.analysis_id());
    return grpc::Status::OK;
  }
  grpc::Status CancelAnalysis(grpc::ServerContext*, const CancelAnalysisRequest* req,
                              CancelAnalysisResponse*) override {
    AnalysisRecord u;
    u.set_status(api::v1::ANALYSIS_STATUS_CANCELLED);
    auto r = store_.UpdateAnalysisRecord(req->analysis_id(), u, {"status"}, clock_.Now());
    if (r.status().code() == absl::StatusCode::kNotFound) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "analysis " + req->analysis_id() + " not found");
    }
    // A delete that lands between the cancel and the API server's read of the record.
    if (delete_after_cancel) (void)store_.DeleteAnalysisRecord(req->analysis_id());
    return grpc::Status::OK;
  }
  grpc::Status DeleteAnalysis(grpc::ServerContext*, const DeleteAnalysisRequest* req,
                              DeleteAnalysisResponse*) override {
    last_delete = *req;
    auto s = store_.DeleteAnalysisRecord(req->analysis_id());
    if (!s.ok()) return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
    return grpc::Status::OK;
  }
  grpc::Status GetAnalysisLogs(grpc::ServerContext*, const GetAnalysisLogsRequest* req,
                               GetAnalysisLogsResponse* resp) override {
    const std::string log = "line 1\nline 2\n";
    size_t off = std::min<size_t>(static_cast<size_t>(req->offset()), log.size());
    resp->set_content(log.substr(off));
    resp->set_next_offset(static_cast<int64_t>(log.size()));
    resp->set_complete(true);
    return grpc::Status::OK;
  }
  grpc::Status ListPlugins(grpc::ServerContext*, const ListPluginsRequest*,
                           ListPluginsResponse* resp) override {
    *resp->add_plugins() = Plugin();
    return grpc::Status::OK;
  }
  grpc::Status GetPlugin(grpc::ServerContext*, const GetPluginRequest* req,
                         api::v1::Plugin* resp) override {
    if (req->name() != "file-stats") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no plugin named \"" + req->name() + "\"");
    }
    *resp = Plugin();
    return grpc::Status::OK;
  }
  static api::v1::Plugin Plugin() {
    api::v1::Plugin p;
    p.set_name("file-stats");
    p.add_artifact_types("file");
    p.set_command("file-stats");
    p.set_timeout_seconds(600);
    p.mutable_default_resources()->set_cpu_request("100m");
    return p;
  }

  CreateAnalysisRequest last_create;
  DeleteAnalysisRequest last_delete;
  std::atomic<bool> delete_after_cancel{false};

 private:
  store::Store& store_;
  Clock& clock_;
  Random& random_;
};

// A standby replica: refuses everything with UNAVAILABLE.
class StandbyController final : public AnalyzerControllerService::Service {
 public:
  grpc::Status CreateAnalysis(grpc::ServerContext*, const CreateAnalysisRequest*,
                              CreateAnalysisResponse*) override {
    ++calls;
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "not the leader");
  }
  grpc::Status ListPlugins(grpc::ServerContext*, const ListPluginsRequest*,
                           ListPluginsResponse*) override {
    ++calls;
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "not the leader");
  }
  std::atomic<int> calls{0};
};

// A leader that has hung (a paused process, a stuck thread): it accepts calls and answers only much later.
class HungController final : public AnalyzerControllerService::Service {
 public:
  grpc::Status CreateAnalysis(grpc::ServerContext*, const CreateAnalysisRequest*,
                              CreateAnalysisResponse*) override {
    ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "lease epoch is stale");
  }
  std::atomic<int> calls{0};
};

std::unique_ptr<grpc::Server> Serve(grpc::Service* service, int* port) {
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
  b.RegisterService(service);
  return b.BuildAndStart();
}

// A loopback port nobody listens on (bound, then closed).
int ClosedPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

class ApiserverHttpTest : public testing::HttpServerFixture {
 protected:
  void SetUp() override {
    HttpServerFixture::SetUp();
    if (HasFatalFailure()) return;
    fake_ = std::make_unique<FakeController>(*store_, clock_, random_);
    fake_server_ = Serve(fake_.get(), &fake_port_);
    standby_server_ = Serve(&standby_, &standby_port_);
    ASSERT_TRUE(fake_server_ && standby_server_);
  }

  // Starts the HTTP server forwarding to `controller_addrs`.
  void StartHttp(const std::string& controller_addrs, std::chrono::milliseconds budget,
                 HttpServerOptions options = {},
                 std::chrono::milliseconds call_timeout = ControllerClientOptions().call_timeout) {
    ControllerClientOptions copts;
    copts.retry_budget = budget;
    copts.call_timeout = call_timeout;
    copts.initial_backoff = std::chrono::milliseconds(20);
    copts.max_backoff = std::chrono::milliseconds(100);
    auto c = ControllerClient::Create(controller_addrs, copts, system_clock_, metrics_);
    ASSERT_TRUE(c.ok()) << c.status();
    controller_ = std::move(*c);
    HttpServerFixture::StartHttp(controller_.get(), options, std::chrono::seconds(30));
  }

  void StartHttpWithReplicas() {
    StartHttp("127.0.0.1:" + std::to_string(standby_port_) + ",127.0.0.1:" + std::to_string(fake_port_),
              std::chrono::seconds(5));
  }

  void TearDown() override {
    StopHttp();
    auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(5);
    if (fake_server_) fake_server_->Shutdown(deadline);
    if (standby_server_) standby_server_->Shutdown(deadline);
    HttpServerFixture::TearDown();
  }

  // Sends a request; returns status and parsed JSON (null when the body is not JSON).
  std::pair<int, json> Do(const std::string& method, const std::string& path, const std::string& body = "") {
    auto send = [&]() -> httplib::Result {
      if (method == "POST") return client_->Post(path.c_str(), body, "application/json");
      if (method == "PATCH") return client_->Patch(path.c_str(), body, "application/json");
      if (method == "DELETE") return client_->Delete(path.c_str());
      return client_->Get(path.c_str());
    };
    httplib::Result r = send();
    EXPECT_TRUE(r) << method << " " << path << ": " << httplib::to_string(r.error());
    if (!r) return {0, nullptr};
    return {r->status, json::parse(r->body, nullptr, false)};
  }

  void CreateExp(const std::string& id, const std::string& status = "completed") {
    auto [code, j] = Do("POST", "/v1/exps",
                        json{{"exp_id", id}, {"name", "exp " + id}, {"status", status}}.dump());
    ASSERT_EQ(code, 201) << j;
  }

  SystemClock system_clock_;
  std::unique_ptr<FakeController> fake_;
  StandbyController standby_;
  std::unique_ptr<grpc::Server> fake_server_, standby_server_;
  int fake_port_ = 0, standby_port_ = 0;
  std::unique_ptr<ControllerClient> controller_;
};

// POSTs over a plain socket and reads the answer to EOF ("Connection: close"): shows what any client sees
// of a 413, independently of cpp-httplib's client.
std::pair<int, json> RawPost(int port, const std::string& path, const std::string& body) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return {0, nullptr};
  }
  timeval bound{10, 0};  // a server that never closes fails the test instead of hanging it
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof(bound));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof(bound));
  std::string req = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
                    "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  size_t sent = 0;
  while (sent < req.size()) {
    ssize_t n = send(fd, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may stop reading once it has answered
    sent += static_cast<size_t>(n);
  }
  std::string resp;
  char buf[65536];
  for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;) resp.append(buf, static_cast<size_t>(n));
  close(fd);
  int status = 0;
  std::sscanf(resp.c_str(), "HTTP/1.1 %d", &status);
  auto split = resp.find("\r\n\r\n");
  return {status, split == std::string::npos ? json(nullptr)
                                             : json::parse(resp.substr(split + 4), nullptr, false)};
}

TEST_F(ApiserverHttpTest, ExpAndArtifactRegistration) {
  StartHttpWithReplicas();
  auto [code, exp] = Do("POST", "/v1/exps", R"({"name": "bench run"})");
  ASSERT_EQ(code, 201) << exp;
  EXPECT_EQ(exp["status"], "pending");
  EXPECT_EQ(exp["name"], "bench run");
  EXPECT_EQ(exp["created_at"], "2023-11-14T22:13:20.000000Z") << "RFC 3339 from the injected clock";
  const std::string id = exp["exp_id"];
  ASSERT_EQ(id.size(), 36u) << "generated UUIDv7";

  ExpectError(Do("POST", "/v1/exps", json{{"exp_id", id}, {"name", "again"}}.dump()), 409,
              "ALREADY_EXISTS");
  ExpectError(Do("POST", "/v1/exps", R"({"exp_id": "a b", "name": "x"})"), 400, "INVALID_ARGUMENT",
              "exp_id");
  ExpectError(Do("POST", "/v1/exps", R"({"exp_id": "x"})"), 400, "INVALID_ARGUMENT", "name");

  // Under the object store's exps/ prefix: the one artifact root a server without --allowed-input-root has.
  const std::string uri = objects_->Uri("exps/e/module.hlo");
  auto [acode, art] = Do("POST", "/v1/exps/" + id + "/artifacts",
                         json{{"artifact_type", "hlo"}, {"uri", uri}}.dump());
  ASSERT_EQ(acode, 201) << art;
  EXPECT_EQ(art["exp_id"], id);
  EXPECT_EQ(art["artifact_type"], "hlo");
  ExpectError(Do("POST", "/v1/exps/nope/artifacts",
                 json{{"artifact_type", "hlo"}, {"uri", objects_->Uri("exps/nope/x")}}.dump()),
              404, "NOT_FOUND");
  ExpectError(Do("POST", "/v1/exps/" + id + "/artifacts", R"({"artifact_type": "hlo", "uri": "gs://b/x"})"),
              400, "INVALID_ARGUMENT", "outside the allowed artifact roots");
  ExpectError(Do("POST", "/v1/exps/" + id + "/artifacts", R"({"artifact_type": "hlo", "uri": "x"})"),
              400, "INVALID_ARGUMENT", "uri");

  auto [pcode, patched] = Do("PATCH", "/v1/exps/" + id, R"({"status": "completed"})");
  ASSERT_EQ(pcode, 200) << patched;
  EXPECT_EQ(patched["status"], "completed");
  EXPECT_TRUE(patched.contains("completed_at"));
  ExpectError(Do("PATCH", "/v1/exps/nope", R"({"status": "completed"})"), 404, "NOT_FOUND");
  ExpectError(Do("PATCH", "/v1/exps/" + id, R"({"status": "done"})"), 400, "INVALID_ARGUMENT",
              "completed");

  CreateExp("other", "running");
  auto [lcode, list] = Do("GET", "/v1/exps?status=completed");
  ASSERT_EQ(lcode, 200) << list;
  ASSERT_EQ(list["exps"].size(), 1u) << list;
  EXPECT_EQ(list["exps"][0]["exp_id"], id);
  auto [all_code, all] = Do("GET", "/v1/exps");
  EXPECT_EQ(all["exps"].size(), 2u) << all;

  auto [gcode, got] = Do("GET", "/v1/exps/" + id);
  ASSERT_EQ(gcode, 200) << got;
  EXPECT_EQ(got["exp"]["exp_id"], id);
  ASSERT_EQ(got["artifacts"].size(), 1u);
  EXPECT_EQ(got["artifacts"][0]["uri"], uri);
  ExpectError(Do("GET", "/v1/exps/nope"), 404, "NOT_FOUND");
}

TEST_F(ApiserverHttpTest, MalformedJsonUnknownFieldsAndUnknownRoutes) {
  StartHttpWithReplicas();
  ExpectError(Do("POST", "/v1/exps", R"({"name": "x",)"), 400, "INVALID_ARGUMENT", "at byte");
  ExpectError(Do("POST", "/v1/exps", "[1]"), 400, "INVALID_ARGUMENT", "JSON object");
  ExpectError(Do("POST", "/v1/exps", R"({"name": "x", "colour": "red"})"), 400, "INVALID_ARGUMENT",
              "colour");
  ExpectError(Do("POST", "/v1/analyses", R"({"exp_id": 7})"), 400, "INVALID_ARGUMENT", "exp_id");
  ExpectError(Do("GET", "/v1/nothing-here"), 404, "NOT_FOUND", "no route");
  ExpectError(Do("GET", "/v1/analyses?status=sleeping"), 400, "INVALID_ARGUMENT", "sleeping");
  ExpectError(Do("GET", "/v1/analyses?page_size=0"), 400, "INVALID_ARGUMENT", "page_size");
}

TEST_F(ApiserverHttpTest, OversizeBodyAndOversizeScriptAre413) {
  HttpServerOptions options;
  options.max_body_bytes = kDefaultMaxBodyBytes;
  StartHttp("127.0.0.1:" + std::to_string(fake_port_), std::chrono::seconds(5), options);
  CreateExp("e1");
  json body = {{"exp_id", "e1"}, {"command", "sh script"}, {"script_content", std::string(1'048'577, 'x')}};
  ExpectError(Do("POST", "/v1/analyses", body.dump()), 413, "RESOURCE_EXHAUSTED", "1048576 bytes");

  body["script_content"] = std::string(kDefaultMaxBodyBytes + 10, 'x');
  ExpectError(RawPost(port_, "/v1/analyses", body.dump()), 413, "RESOURCE_EXHAUSTED",
              std::to_string(kDefaultMaxBodyBytes));
  EXPECT_TRUE(fake_->last_create.exp_id().empty()) << "nothing was forwarded";
}

TEST_F(ApiserverHttpTest, AnalysesAreForwardedToTheReplicaThatAccepts) {
  StartHttpWithReplicas();  // the first address is a standby answering UNAVAILABLE
  CreateExp("e1");
  const std::string script = "import sys\nprint(\"héllo\", sys.argv)\n";
  auto [code, created] = Do("POST", "/v1/analyses",
                            json{{"name", "mine"},
                                 {"exp_id", "e1"},
                                 {"command", "python3 main.py"},
                                 {"script_content", script},
                                 {"script_name", "main.py"},
                                 {"resource_override", {{"cpu_limit", "2"}}}}
                                .dump());
  ASSERT_EQ(code, 201) << created;
  const std::string id = created["analysis_id"];
  EXPECT_GE(standby_.calls.load(), 1) << "the standby was asked first";
  EXPECT_EQ(fake_->last_create.analysis_type(), api::v1::ANALYSIS_TYPE_ONLINE) << "default type";
  EXPECT_EQ(fake_->last_create.resource_override().cpu_limit(), "2");
  EXPECT_EQ(fake_->last_create.script_content(), script) << "script_content is text, not base64";

  auto [gcode, record] = Do("GET", "/v1/analyses/" + id);
  ASSERT_EQ(gcode, 200) << record;
  EXPECT_EQ(record["status"], "pending");
  EXPECT_EQ(record["analysis_type"], "online");
  EXPECT_EQ(record["script_content"], script);
  EXPECT_EQ(record["created_at"], "2023-11-14T22:13:20.000000Z");

  // The controller's own errors come back unchanged.
  ExpectError(Do("POST", "/v1/analyses", R"({"exp_id": "e1", "plugin_name": "nope"})"), 400,
              "INVALID_ARGUMENT", "not in the catalog");
  ExpectError(Do("POST", "/v1/analyses", R"({"exp_id": "missing", "command": "ls"})"), 404, "NOT_FOUND",
              "missing");

  auto [lcode, list] = Do("GET", "/v1/analyses?exp_id=e1&status=pending,running");
  ASSERT_EQ(lcode, 200) << list;
  ASSERT_EQ(list["analyses"].size(), 1u);
  EXPECT_EQ(list["next_page_token"], "");
  EXPECT_FALSE(list["analyses"][0].contains("script_content")) << "the basic view leaves scripts out";
  auto [fcode, full] = Do("GET", "/v1/analyses?exp_id=e1&view=full");
  ASSERT_EQ(fcode, 200) << full;
  EXPECT_EQ(full["analyses"][0]["script_content"], script);
  ExpectError(Do("GET", "/v1/analyses?view=everything"), 400, "INVALID_ARGUMENT", "view=basic");

  auto [ccode, cancelled] = Do("POST", "/v1/analyses/" + id + ":cancel");
  ASSERT_EQ(ccode, 200) << cancelled;
  EXPECT_EQ(cancelled["status"], "cancelled");
  ExpectError(Do("POST", "/v1/analyses/01900000-0000-7000-8000-000000000000:cancel"), 404, "NOT_FOUND");
  // Cancelled, then deleted before the record could be read back: 404 like any read of it, never a
  // record with only its id (which does not fit the documented answer).
  auto [c2code, second] = Do("POST", "/v1/analyses", R"({"exp_id": "e1", "command": "ls"})");
  ASSERT_EQ(c2code, 201) << second;
  fake_->delete_after_cancel = true;
  ExpectError(Do("POST", "/v1/analyses/" + second["analysis_id"].get<std::string>() + ":cancel"), 404,
              "NOT_FOUND");
  fake_->delete_after_cancel = false;

  auto logs = client_->Get(("/v1/analyses/" + id + "/logs?offset=7").c_str());
  ASSERT_TRUE(logs);
  EXPECT_EQ(logs->status, 200);
  EXPECT_EQ(logs->body, "line 2\n");
  EXPECT_EQ(logs->get_header_value("X-Falcon-Next-Offset"), "14");
  EXPECT_EQ(logs->get_header_value("X-Falcon-Complete"), "true");

  auto [pcode, plugins] = Do("GET", "/v1/plugins");
  ASSERT_EQ(pcode, 200) << plugins;
  EXPECT_EQ(plugins["plugins"][0]["name"], "file-stats");
  EXPECT_EQ(plugins["plugins"][0]["default_resources"]["cpu_request"], "100m");
  auto [p1code, plugin] = Do("GET", "/v1/plugins/file-stats");
  EXPECT_EQ(p1code, 200);
  EXPECT_EQ(plugin["artifact_types"], json::array({"file"}));
  ExpectError(Do("GET", "/v1/plugins/nope"), 404, "NOT_FOUND", "nope");

  auto [dcode, deleted] = Do("DELETE", "/v1/analyses/" + id + "?purge=true");
  ASSERT_EQ(dcode, 200) << deleted;
  EXPECT_TRUE(fake_->last_delete.purge_gcs());
  ExpectError(Do("GET", "/v1/analyses/" + id), 404, "NOT_FOUND");
}

TEST_F(ApiserverHttpTest, RerunRepeatsInputsAndRunOptionsWithChangesAndLinksTheOld) {
  StartHttpWithReplicas();
  CreateExp("e1");
  auto [code, created] = Do("POST", "/v1/analyses", R"({"exp_id": "e1", "name": "probe", "command": "sh \"$FALCON_SCRIPT\"",
      "script_content": "echo hi", "script_name": "a.sh", "image": "img:1", "timeout_seconds": 600,
      "resource_override": {"cpu_limit": "2", "memory_limit": "1Gi"}})");
  ASSERT_EQ(code, 201) << created;
  const std::string old_id = created["analysis_id"];
  auto [gcode, old] = Do("GET", "/v1/analyses/" + old_id);
  ASSERT_EQ(gcode, 200) << old;
  EXPECT_EQ(old["image"], "img:1") << "the record keeps its run options";
  EXPECT_EQ(old["timeout_seconds"], 600);
  EXPECT_EQ(old["resource_override"]["memory_limit"], "1Gi");
  EXPECT_EQ(old["rerun_of"], "");

  // No body: the same inputs and options.
  auto [rcode, rerun] = Do("POST", "/v1/analyses/" + old_id + ":rerun", "");
  ASSERT_EQ(rcode, 201) << rerun;
  EXPECT_EQ(rerun["rerun_of"], old_id);
  EXPECT_NE(rerun["analysis_id"], old_id);
  EXPECT_EQ(fake_->last_create.rerun_of(), old_id);
  EXPECT_EQ(fake_->last_create.script_content(), "echo hi");
  EXPECT_EQ(fake_->last_create.script_name(), "a.sh");
  EXPECT_EQ(fake_->last_create.command(), "sh \"$FALCON_SCRIPT\"");
  EXPECT_EQ(fake_->last_create.name(), "probe");
  EXPECT_EQ(fake_->last_create.image(), "img:1");
  EXPECT_EQ(fake_->last_create.timeout_seconds(), 600);
  EXPECT_EQ(fake_->last_create.resource_override().cpu_limit(), "2");
  EXPECT_EQ(fake_->last_create.analysis_id().size(), 36u) << "a fixed id, so a retried forward makes one";

  // Changes replace field by field; the rest is kept.
  auto [c2, second] = Do("POST", "/v1/analyses/" + old_id + ":rerun",
                         R"({"image": "img:2", "resource_override": {"memory_limit": "4Gi"}, "name": "probe-2"})");
  ASSERT_EQ(c2, 201) << second;
  EXPECT_EQ(fake_->last_create.image(), "img:2");
  EXPECT_EQ(fake_->last_create.name(), "probe-2");
  EXPECT_EQ(fake_->last_create.timeout_seconds(), 600);
  EXPECT_EQ(fake_->last_create.resource_override().memory_limit(), "4Gi");
  EXPECT_EQ(fake_->last_create.resource_override().cpu_limit(), "2");
  auto [g2, rec2] = Do("GET", "/v1/analyses/" + second["analysis_id"].get<std::string>());
  ASSERT_EQ(g2, 200) << rec2;
  EXPECT_EQ(rec2["rerun_of"], old_id);

  // What a rerun cannot do: change the inputs, name an unknown analysis, or be forged through create.
  ExpectError(Do("POST", "/v1/analyses/" + old_id + ":rerun", R"({"command": "rm -rf /"})"), 400,
              "INVALID_ARGUMENT", "unknown field \"command\"");
  ExpectError(Do("POST", "/v1/analyses/01900000-0000-7000-8000-000000000000:rerun", "{}"), 404, "NOT_FOUND");
  ExpectError(Do("POST", "/v1/analyses/" + old_id + ":rerun", R"({"timeout_seconds": -1})"), 400,
              "INVALID_ARGUMENT", "timeout_seconds");
  ExpectError(Do("POST", "/v1/analyses", R"({"exp_id": "e1", "command": "ls", "rerun_of": ")" + old_id + R"("})"),
              400, "INVALID_ARGUMENT", ":rerun");
}

TEST_F(ApiserverHttpTest, AHungReplicaIsPassedOverWithTheSameAnalysisId) {
  HungController hung;
  int hung_port = 0;
  auto hung_server = Serve(&hung, &hung_port);
  ASSERT_TRUE(hung_server);
  StartHttp("127.0.0.1:" + std::to_string(hung_port) + ",127.0.0.1:" + std::to_string(fake_port_),
            std::chrono::seconds(5), {}, std::chrono::milliseconds(300));
  CreateExp("e1");
  auto start = std::chrono::steady_clock::now();
  auto [code, created] = Do("POST", "/v1/analyses", R"({"exp_id": "e1", "command": "ls"})");
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(code, 201) << created;
  EXPECT_EQ(hung.calls.load(), 1);
  EXPECT_LT(took, std::chrono::milliseconds(1400)) << "did not wait for the hung replica's answer";
  // Both replicas were sent the id falcon-apiserver chose, so the hung one cannot create a second analysis.
  EXPECT_EQ(created["analysis_id"], fake_->last_create.analysis_id());
  EXPECT_EQ(fake_->last_create.analysis_id().size(), 36u);
  // The next call goes to the replica that answered.
  auto [code2, created2] = Do("POST", "/v1/analyses", R"({"exp_id": "e1", "command": "ls"})");
  ASSERT_EQ(code2, 201) << created2;
  EXPECT_EQ(hung.calls.load(), 1);
  EXPECT_NE(created2["analysis_id"], created["analysis_id"]);
  // A client may propose its own id; a malformed one is refused before forwarding.
  const std::string mine = "0192f3c4-5d6e-7abc-8def-0123456789ab";
  auto [code3, created3] =
      Do("POST", "/v1/analyses", json{{"exp_id", "e1"}, {"command", "ls"}, {"analysis_id", mine}}.dump());
  ASSERT_EQ(code3, 201) << created3;
  EXPECT_EQ(created3["analysis_id"], mine);
  ExpectError(Do("POST", "/v1/analyses", R"({"exp_id": "e1", "command": "ls", "analysis_id": "x"})"), 400,
              "INVALID_ARGUMENT", "lower-case UUID");
  hung_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(3));
}

TEST_F(ApiserverHttpTest, NoControllerIs503NamingTheAddress) {
  const std::string addr = "127.0.0.1:" + std::to_string(ClosedPort());
  StartHttp(addr, std::chrono::milliseconds(300));
  CreateExp("e1");
  ExpectError(Do("POST", "/v1/analyses", R"({"exp_id": "e1", "command": "ls"})"), 503, "UNAVAILABLE",
              addr);
  ExpectError(Do("GET", "/v1/plugins"), 503, "UNAVAILABLE", addr);
  ExpectError(Do("GET", "/v1/analyses/x/logs"), 503, "UNAVAILABLE", addr);
  // Reads served from the database still work.
  auto [code, list] = Do("GET", "/v1/analyses");
  EXPECT_EQ(code, 200) << list;
}

TEST_F(ApiserverHttpTest, OnlyStandbysIs503NamingEveryAddress) {
  const std::string standby = "127.0.0.1:" + std::to_string(standby_port_);
  const std::string down = "127.0.0.1:" + std::to_string(ClosedPort());
  StartHttp(standby + "," + down, std::chrono::milliseconds(300));
  auto got = Do("GET", "/v1/plugins");
  ExpectError(got, 503, "UNAVAILABLE", standby);
  ExpectError(got, 503, "UNAVAILABLE", down);
  ExpectError(got, 503, "UNAVAILABLE", "not the leader");
}

TEST_F(ApiserverHttpTest, ResultsAreListedAndStreamed) {
  StartHttpWithReplicas();
  CreateExp("e1");
  auto [code, created] = Do("POST", "/v1/analyses", R"({"exp_id": "e1", "plugin_name": "file-stats"})");
  ASSERT_EQ(code, 201) << created;
  const std::string id = created["analysis_id"];
  const std::string prefix = AnalysisPrefix("e1", id);
  std::string big;
  for (int i = 0; big.size() < 700 * 1024; ++i) big += "{\"row\": " + std::to_string(i) + "}\n";
  std::istringstream in1(big), in2("log\n"), in3("print(1)\n");
  ASSERT_TRUE(objects_->Put(prefix + "file-stats.jsonl", in1).ok());
  ASSERT_TRUE(objects_->Put(prefix + "output.log", in2).ok());
  ASSERT_TRUE(objects_->Put(prefix + "script/main.py", in3).ok());

  auto [lcode, list] = Do("GET", "/v1/analyses/" + id + "/results");
  ASSERT_EQ(lcode, 200) << list;
  ASSERT_EQ(list["results"].size(), 2u) << "the staged script is not a result: " << list;
  EXPECT_EQ(list["results"][0]["name"], "file-stats.jsonl");
  EXPECT_EQ(list["results"][0]["size"], big.size());
  EXPECT_EQ(list["results"][1]["name"], "output.log");

  auto r = client_->Get(("/v1/analyses/" + id + "/results/file-stats.jsonl").c_str());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body.size(), big.size());
  EXPECT_TRUE(r->body == big) << "downloaded bytes differ";
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/x-ndjson");

  ExpectError(Do("GET", "/v1/analyses/" + id + "/results/none.jsonl"), 404, "NOT_FOUND", "none.jsonl");
  ExpectError(Do("GET", "/v1/analyses/" + id + "/results/a/../../x"), 400, "INVALID_ARGUMENT");
  ExpectError(Do("GET", "/v1/analyses/unknown-id/results"), 404, "NOT_FOUND");
}

TEST_F(ApiserverHttpTest, HealthReadinessAndMetrics) {
  StartHttpWithReplicas();
  EXPECT_EQ(Do("GET", "/healthz").first, 200);
  EXPECT_EQ(Do("GET", "/readyz").first, 200);
  EXPECT_EQ(Do("GET", "/_hello").first, 200);
  ExpectError(Do("GET", "/v1/analyses/unknown"), 404, "NOT_FOUND");
  Do("GET", "/v1/plugins");
  // The logger records a request right after its response is written; allow it a moment.
  std::string text;
  for (int i = 0; i < 50; ++i) {
    auto r = client_->Get("/metrics");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    text = r->body;
    if (text.find("route=\"/v1/plugins\"") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_NE(text.find("falcon_http_requests_total{route=\"/v1/analyses/{id}\",method=\"GET\",code=\"404\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("falcon_http_request_duration_seconds_bucket{route=\"/v1/analyses/{id}\",le=\"+Inf\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("falcon_controller_calls_total{method=\"ListPlugins\",code=\"OK\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE falcon_grpc_requests_total counter"), std::string::npos);
}

}  // namespace
}  // namespace falcon::apiserver
