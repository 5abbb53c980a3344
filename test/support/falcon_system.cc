#include "support/falcon_system.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <regex>

namespace falcon::testsupport {

namespace {
using json = nlohmann::json;
using namespace std::chrono_literals;
const std::string kBin = FALCON_BIN_DIR;
}  // namespace

void FalconSystem::StartSystem(int n_controllers, std::vector<std::string> controller_flags) {
  http_port_ = FreePort();
  api_grpc_port_ = FreePort();
  std::string addrs;
  std::vector<std::pair<int, int>> ports;
  for (int i = 0; i < n_controllers; ++i) {
    ports.push_back({FreePort(), FreePort()});
    addrs += (i ? "," : "") + std::string("127.0.0.1:") + std::to_string(ports.back().first);
  }
  if (input_roots_.empty()) input_roots_ = {"file://" + dir_.string()};
  std::vector<std::string> argv = {
      kBin + "/falcon-apiserver", "--db=sqlite://" + (dir_ / "falcon.db").string(),
      "--http-listen=127.0.0.1:" + std::to_string(http_port_),
      "--grpc-listen=127.0.0.1:" + std::to_string(api_grpc_port_), "--controller-addr=" + addrs,
      "--object-store=file://" + objects_.string()};
  for (const auto& r : input_roots_) argv.push_back("--allowed-input-root=" + r);
  argv.insert(argv.end(), apiserver_flags_.begin(), apiserver_flags_.end());
  apiserver_ = std::make_unique<Process>(argv, dir_ / "apiserver.log");
  ASSERT_TRUE(WaitFor([&] { return HttpStatus(http_port_, "/readyz") == 200; }, 30s))
      << "API server not ready:\n"
      << apiserver_->Log();
  flags_ = std::move(controller_flags);
  for (int i = 0; i < n_controllers; ++i) {
    ControllerProc c;
    c.grpc_port = ports[i].first;
    c.http_port = ports[i].second;
    controllers_.push_back(std::move(c));
    StartController(i);
  }
}

void FalconSystem::StartController(int i) {
  auto& c = controllers_[i];
  std::vector<std::string> argv = {kBin + "/analyzer-controller",
                                   "--api-server=127.0.0.1:" + std::to_string(api_grpc_port_),
                                   "--grpc-listen=127.0.0.1:" + std::to_string(c.grpc_port),
                                   "--http-listen=127.0.0.1:" + std::to_string(c.http_port),
                                   "--object-store=file://" + objects_.string(),
                                   "--resync-interval=1",
                                   "--log-upload-interval=1",
                                   "--identity=c" + std::to_string(i)};
  for (const auto& r : input_roots_) argv.push_back("--allowed-input-root=" + r);
  argv.insert(argv.end(), runtime_flags_.begin(), runtime_flags_.end());
  argv.insert(argv.end(), flags_.begin(), flags_.end());
  c.proc = std::make_unique<Process>(argv, dir_ / ("controller" + std::to_string(i) + ".log"));
}

void FalconSystem::StopSystem() {
  controllers_.clear();
  apiserver_.reset();
}

void FalconSystem::WaitReady(int i) {
  ASSERT_TRUE(WaitFor([&] { return HttpStatus(controllers_[i].http_port, "/readyz") == 200; }, 30s))
      << "controller " << i << " not ready:\n"
      << controllers_[i].proc->Log();
}

int FalconSystem::WaitLeader() {
  int leader = -1;
  WaitFor(
      [&] {
        for (size_t i = 0; i < controllers_.size(); ++i) {
          if (HttpStatus(controllers_[i].http_port, "/readyz") == 200) leader = static_cast<int>(i);
        }
        return leader >= 0;
      },
      30s);
  return leader;
}

int FalconSystem::HttpStatus(int port, const std::string& path, std::string* body) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_connection_timeout(1);
  cli.set_read_timeout(2);
  auto r = cli.Get(path.c_str());
  if (r && body) *body = r->body;
  return r ? r->status : -1;
}

json FalconSystem::Call(const std::string& method, const std::string& path, const json& body,
                        int* status, std::string* raw) {
  httplib::Client cli("127.0.0.1", http_port_);
  cli.set_read_timeout(60);
  if (!bearer_token_.empty()) cli.set_bearer_token_auth(bearer_token_);
  const std::string payload = body.is_null() ? "" : body.dump();
  httplib::Result r = method == "GET"     ? cli.Get(path.c_str())
                      : method == "POST"  ? cli.Post(path.c_str(), payload, "application/json")
                      : method == "PATCH" ? cli.Patch(path.c_str(), payload, "application/json")
                                          : cli.Delete(path.c_str());
  if (!r) {
    if (status) *status = -1;
    return nullptr;
  }
  if (status) *status = r->status;
  if (raw) *raw = r->body;
  return json::parse(r->body, nullptr, false);
}

void FalconSystem::CreateExp(const std::string& id, const std::string& status) {
  int st;
  json j = Call("POST", "/v1/exps", {{"exp_id", id}, {"name", id}, {"status", status}}, &st);
  ASSERT_EQ(st, 201) << j.dump();
}

std::string FalconSystem::AddArtifact(const std::string& exp, const std::string& type,
                                      const std::filesystem::path& file) {
  int st;
  json j = Call("POST", "/v1/exps/" + exp + "/artifacts",
                {{"artifact_type", type}, {"uri", "file://" + file.string()}}, &st);
  EXPECT_EQ(st, 201) << j.dump();
  return j.is_object() ? j.value("artifact_id", "") : "";
}

std::string FalconSystem::Submit(const json& body) {
  int st;
  json j = Call("POST", "/v1/analyses", body, &st);
  EXPECT_EQ(st, 201) << j.dump();
  return j.is_object() ? j.value("analysis_id", "") : "";
}

std::string FalconSystem::Command(const std::string& exp, const std::string& cmd) {
  return Submit({{"exp_id", exp}, {"analysis_type", "online"}, {"command", cmd}});
}

json FalconSystem::Get(const std::string& id) { return Call("GET", "/v1/analyses/" + id); }

std::string FalconSystem::Status(const std::string& id) {
  json j = Get(id);
  return j.is_object() ? j.value("status", "") : "";
}

bool FalconSystem::WaitStatus(const std::string& id, const std::string& want,
                              std::chrono::milliseconds timeout) {
  return WaitFor([&] { return Status(id) == want; }, timeout);
}

std::string FalconSystem::Logs(const std::string& id) {
  std::string raw;
  int st;
  Call("GET", "/v1/analyses/" + id + "/logs", nullptr, &st, &raw);
  return raw;
}

std::string FalconSystem::AllControllerLogs() {
  std::string s;
  for (size_t i = 0; i < controllers_.size(); ++i) {
    s += "--- controller " + std::to_string(i) + "\n" + controllers_[i].proc->Log();
  }
  return s;
}

double FalconSystem::ApiserverRequests(const std::string& method, const std::string& code) {
  std::string body;
  if (HttpStatus(http_port_, "/metrics", &body) != 200) return -1;
  std::regex re("falcon_grpc_requests_total\\{[^}]*method=\"" + method + "\"[^}]*code=\"" + code +
                "\"[^}]*\\} ([0-9.e+]+)");
  std::smatch m;
  return std::regex_search(body, m, re) ? std::stod(m[1]) : 0;
}

int64_t FalconSystem::ControllerEpoch(int i) {
  std::string body;
  if (HttpStatus(controllers_[i].http_port, "/metrics", &body) != 200) return -1;
  std::regex re("\nfalcon_controller_lease_epoch ([0-9.e+]+)");
  std::smatch m;
  return std::regex_search(body, m, re) ? static_cast<int64_t>(std::stod(m[1])) : 0;
}

}  // namespace falcon::testsupport
