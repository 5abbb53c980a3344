// A base for test fixtures that run the system through real processes: falcon-apiserver (SQLite in
// dir_, objects in objects_) and N analyzer-controllers on free loopback ports, driven over the API
// server's HTTP API. The fixture sets dir_, objects_ and runtime_flags_ (the controller's runtime
// and where its Pods go), optionally input_roots_, calls StartSystem, and StopSystem in its TearDown.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/process.h"

namespace falcon::testsupport {

class FalconSystem {
 public:
  struct ControllerProc {
    int grpc_port = 0, http_port = 0;
    std::unique_ptr<Process> proc;
  };

  // Starts the API server pointing at `n_controllers` controller ports chosen now, waits until it
  // is ready, then starts every controller with runtime_flags_ and `controller_flags` added to the
  // common flags.
  void StartSystem(int n_controllers, std::vector<std::string> controller_flags);
  // (Re)starts controller i on its ports (after a Kill9, say); its log is appended to.
  void StartController(int i);
  // Stops every controller, then the API server.
  void StopSystem();
  // Fails the test unless controller i answers /readyz (it holds the lease) within 30 s.
  void WaitReady(int i);
  // The controller that answers /readyz within 30 s, or -1.
  int WaitLeader();

  // GET 127.0.0.1:port/path: its HTTP status (-1: no answer), the body in `body`.
  int HttpStatus(int port, const std::string& path, std::string* body = nullptr);
  // A request to the API server's HTTP API; the parsed JSON answer (discarded when not JSON).
  nlohmann::json Call(const std::string& method, const std::string& path,
                      const nlohmann::json& body = nullptr, int* status = nullptr,
                      std::string* raw = nullptr);
  void CreateExp(const std::string& id, const std::string& status = "completed");
  std::string AddArtifact(const std::string& exp, const std::string& type,
                          const std::filesystem::path& file);
  // POST /v1/analyses; the new id ("" and a test failure when it is not 201).
  std::string Submit(const nlohmann::json& body);
  // An online analysis running `cmd`.
  std::string Command(const std::string& exp, const std::string& cmd);
  nlohmann::json Get(const std::string& id);
  std::string Status(const std::string& id);
  bool WaitStatus(const std::string& id, const std::string& want,
                  std::chrono::milliseconds timeout = std::chrono::seconds(60));
  std::string Logs(const std::string& id);
  static std::string PodName(const std::string& id) { return "falcon-analysis-" + id; }
  // Every controller's log, each under a "--- controller i" line.
  std::string AllControllerLogs();
  // falcon_grpc_requests_total of the API server for one method and code (-1: /metrics did not
  // answer).
  double ApiserverRequests(const std::string& method, const std::string& code);
  // falcon_controller_lease_epoch of controller i: the epoch the database issued it while it leads, else 0
  // (-1: /metrics did not answer).
  int64_t ControllerEpoch(int i);

 protected:
  std::filesystem::path dir_, objects_;
  std::vector<std::string> runtime_flags_;
  // --allowed-input-root of the API server and every controller; empty: file://<dir_> (AddArtifact
  // registers files of the test's temp dir).
  std::vector<std::string> input_roots_;
  // Added to the API server's flags (e.g. --auth=on).
  std::vector<std::string> apiserver_flags_;
  // Sent by Call as `Authorization: Bearer ...` when not empty.
  std::string bearer_token_;
  int http_port_ = 0, api_grpc_port_ = 0;
  std::vector<std::string> flags_;
  std::unique_ptr<Process> apiserver_;
  std::vector<ControllerProc> controllers_;
};

}  // namespace falcon::testsupport
