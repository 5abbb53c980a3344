// An in-process fake of falcon-apiserver's HTTP/JSON API (the routes of docs/cli.md) for the CLI's unit
// tests: in-memory Exps, artifacts, analyses, plugins, logs and result files, scripted state changes, and
// a record of every request. Listens on a free loopback port; stopped by the destructor.
#pragma once

#include <httplib.h>

#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace falcon::cli::testing {

using nlohmann::json;

class FakeApiServer {
 public:
  FakeApiServer();
  ~FakeApiServer();

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // --- state (tests hold mu while touching it once requests may be in flight)
  std::mutex mu;
  std::map<std::string, json> exps;                   // by exp_id
  std::vector<json> artifacts;
  std::vector<json> analyses;                          // newest first, as the server lists them
  std::vector<json> plugins;
  std::map<std::string, std::string> logs;             // by analysis id
  std::map<std::string, std::map<std::string, std::string>> results;  // id -> name -> content
  std::map<std::string, std::string> uploads;          // "exp/name" -> content
  // Each GET of the analysis moves it to the next state of its script.
  std::map<std::string, std::deque<std::string>> status_script;
  // Each GET of the log first appends the next piece; once the pieces run out the analysis takes
  // final_status. The log is served at most log_chunk bytes at a time.
  std::map<std::string, std::deque<std::string>> log_pieces;
  std::map<std::string, std::string> final_status;
  size_t log_chunk = 1 << 20;
  bool send_log_headers = true;
  // Requests seen: "METHOD /path?query".
  std::vector<std::string> requests;
  json last_create_body;
  json last_rerun_body;
  int next_id = 1;

  // Helpers for tests.
  json& AddAnalysis(const std::string& id, const std::string& status, const std::string& exp_id = "exp-1");
  json* FindAnalysis(const std::string& id);
  int CountRequests(const std::string& prefix);
  void AddDefaultPlugins();

 private:
  void Routes();
  static void Error(httplib::Response& res, int http, const std::string& code, const std::string& msg);

  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace falcon::cli::testing
