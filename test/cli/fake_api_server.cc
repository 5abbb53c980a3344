#include "fake_api_server.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace falcon::cli::testing {
namespace {

bool Terminal(const std::string& s) { return s == "succeeded" || s == "failed" || s == "cancelled"; }

}  // namespace

FakeApiServer::FakeApiServer() {
  Routes();
  port_ = server_.bind_to_any_port("127.0.0.1");
  if (port_ <= 0) throw std::runtime_error("fake apiserver: cannot bind a loopback port");
  thread_ = std::thread([this] { server_.listen_after_bind(); });
  for (int i = 0; i < 500 && !server_.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

FakeApiServer::~FakeApiServer() {
  server_.stop();
  if (thread_.joinable()) thread_.join();
}

void FakeApiServer::Error(httplib::Response& res, int http, const std::string& code, const std::string& msg) {
  res.status = http;
  res.set_content(json{{"error", {{"code", code}, {"message", msg}}}}.dump(), "application/json");
}

json& FakeApiServer::AddAnalysis(const std::string& id, const std::string& status, const std::string& exp_id) {
  analyses.insert(analyses.begin(), json{{"analysis_id", id},
                                         {"name", "analysis " + id},
                                         {"exp_id", exp_id},
                                         {"artifact_id", ""},
                                         {"analysis_type", "online"},
                                         {"plugin_name", "file-stats"},
                                         {"status", status},
                                         {"result_gcs_path", "file:///store/analysis/" + exp_id + "/" + id + "/"},
                                         {"error_message", ""},
                                         {"command", "file-stats"},
                                         {"script_content", ""},
                                         {"script_name", ""},
                                         {"created_at", "2023-11-14T22:13:20Z"},
                                         {"updated_at", "2023-11-14T22:13:20Z"}});
  return analyses.front();
}

json* FakeApiServer::FindAnalysis(const std::string& id) {
  for (auto& a : analyses) {
    if (a["analysis_id"] == id) return &a;
  }
  return nullptr;
}

int FakeApiServer::CountRequests(const std::string& prefix) {
  std::lock_guard<std::mutex> l(mu);
  return static_cast<int>(std::count_if(requests.begin(), requests.end(),
                                        [&](const std::string& r) { return r.rfind(prefix, 0) == 0; }));
}

void FakeApiServer::AddDefaultPlugins() {
  plugins = {
      json{{"name", "file-stats"},
           {"description", "One record per artifact file with its path, size, sha256 and detected format."},
           {"artifact_types", {"file"}},
           {"command", "file-stats"},
           {"default_resources",
            {{"cpu_request", "100m"}, {"cpu_limit", "1"}, {"memory_request", "64Mi"}, {"memory_limit", "256Mi"}}},
           {"timeout_seconds", 600}},
      json{{"name", "hlo-stats"},
           {"description",
            "Per-module and per-instruction statistics of XLA HLO text dumps (op counts, FLOPs and bytes "
            "estimates, fusions, collectives)."},
           {"artifact_types", {"hlo"}},
           {"command", "hlo-stats"},
           {"default_resources",
            {{"cpu_request", "250m"}, {"cpu_limit", "2"}, {"memory_request", "128Mi"}, {"memory_limit", "1Gi"}}},
           {"timeout_seconds", 1800}},
  };
}

void FakeApiServer::Routes() {
  // Recorded before the request is handled: a logger runs after the response is sent, so a test that
  // checks the count right after the CLI returns would race with it.
  server_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response&) {
    std::string q;
    for (const auto& [k, v] : req.params) q += (q.empty() ? "?" : "&") + k + "=" + v;
    std::lock_guard<std::mutex> l(mu);
    requests.push_back(req.method + " " + req.path + q);
    return httplib::Server::HandlerResponse::Unhandled;
  });

  // --- exps
  server_.Post("/v1/exps", [this](const httplib::Request& req, httplib::Response& res) {
    auto body = json::parse(req.body, nullptr, false);
    if (!body.is_object()) return Error(res, 400, "INVALID_ARGUMENT", "malformed JSON body");
    std::lock_guard<std::mutex> l(mu);
    std::string id = body.value("exp_id", "");
    if (id.empty()) id = "exp-" + std::to_string(next_id++);
    if (exps.count(id)) return Error(res, 409, "ALREADY_EXISTS", "exp " + id + " already exists");
    json e = {{"exp_id", id},
              {"name", body.value("name", "")},
              {"status", body.value("status", "pending")},
              {"created_at", "2023-11-14T22:13:20Z"},
              {"updated_at", "2023-11-14T22:13:20Z"}};
    exps[id] = e;
    res.status = 201;
    res.set_content(e.dump(), "application/json");
  });
  server_.Get("/v1/exps", [this](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> l(mu);
    json list = json::array();
    for (auto& [id, e] : exps) {
      if (req.has_param("status") && e["status"] != req.get_param_value("status")) continue;
      list.push_back(e);
    }
    res.set_content(json{{"exps", list}}.dump(), "application/json");
  });
  server_.Get(R"(/v1/exps/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> l(mu);
    auto it = exps.find(req.matches[1]);
    if (it == exps.end()) return Error(res, 404, "NOT_FOUND", "exp " + std::string(req.matches[1]) + " not found");
    json arts = json::array();
    for (auto& a : artifacts) {
      if (a["exp_id"] == it->first) arts.push_back(a);
    }
    json e = it->second;
    e["artifacts"] = arts;
    res.set_content(e.dump(), "application/json");
  });
  server_.Patch(R"(/v1/exps/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> l(mu);
    auto it = exps.find(req.matches[1]);
    if (it == exps.end()) return Error(res, 404, "NOT_FOUND", "exp " + std::string(req.matches[1]) + " not found");
    auto body = json::parse(req.body, nullptr, false);
    it->second["status"] = body.value("status", "");
    res.set_content(it->second.dump(), "application/json");
  });
  server_.Post(R"(/v1/exps/([^/]+)/artifacts)", [this](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> l(mu);
    std::string exp = req.matches[1];
    if (!exps.count(exp)) return Error(res, 404, "NOT_FOUND", "exp " + exp + " not found");
    auto body = json::parse(req.body, nullptr, false);
    json a = {{"artifact_id", "art-" + std::to_string(next_id++)},
              {"exp_id", exp},
              {"artifact_type", body.value("artifact_type", "")},
              {"uri", body.value("uri", "")},
              {"created_at", "2023-11-14T22:13:20Z"}};
    artifacts.push_back(a);
    res.status = 201;
    res.set_content(a.dump(), "application/json");
  });
  server_.Put(R"(/v1/exps/([^/]+)/files/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> l(mu);
    std::string exp = req.matches[1], name = req.matches[2];
    if (!exps.count(exp)) return Error(res, 404, "NOT_FOUND", "exp " + exp + " not found");
    uploads[exp + "/" + name] = req.body;
    res.status = 201;
    res.set_content(json{{"uri", "file:///store/exps/" + exp + "/files/" + name},
                         {"size_bytes", req.body.size()}}
                        .dump(),
                    "application/json");
  });

  // --- analyses
  server_.Post("/v1/analyses", [this](const httplib::Request& req, httplib::Response& res) {
    auto body = json::parse(req.body, nullptr, false);
    if (!body.is_object()) return Error(res, 400, "INVALID_ARGUMENT", "malformed JSON body");
    std::lock_guard<std::mutex> l(mu);
    last_create_body = body;
    std::string exp = body.value("exp_id", "");
    if (!exps.count(exp)) return Error(res, 404, "NOT_FOUND", "exp " + exp + " not found");
    std::string plugin = body.value("plugin_name", "");
    if (!plugin.empty() &&
        std::none_of(plugins.begin(), plugins.end(), [&](const json& p) { return p["name"] == plugin; })) {
      return Error(res, 404, "NOT_FOUND", "plugin " + plugin + " is not in the catalog");
    }
    char id[64];
    std::snprintf(id, sizeof(id), "0193a5c2-0000-7000-8000-%012d", next_id++);
    json& a = AddAnalysis(id, "pending", exp);
    a["name"] = body.value("name", "");
    a["plugin_name"] = plugin;
    a["command"] = body.value("command", "");
    a["script_name"] = body.value("script_name", "");
    res.status = 201;
    res.set_content(json{{"analysis_id", id}}.dump(), "application/json");
  });
  server_.Get("/v1/analyses", [this](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> l(mu);
    std::vector<json> match;
    for (auto& a : analyses) {
      if (req.has_param("exp_id") && a["exp_id"] != req.get_param_value("exp_id")) continue;
      std::string st = a["status"];
      if (st.rfind("ANALYSIS_STATUS_", 0) == 0) {
        st = st.substr(16);
        for (auto& ch : st) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      }
      if (req.has_param("status") && st != req.get_param_value("status")) continue;
      match.push_back(a);
    }
    size_t start = req.has_param("page_token") ? std::stoul(req.get_param_value("page_token")) : 0;
    size_t size = req.has_param("page_size") ? std::stoul(req.get_param_value("page_size")) : 50;
    json page = json::array();
    for (size_t i = start; i < match.size() && i < start + size; ++i) page.push_back(match[i]);
    std::string next = start + size < match.size() ? std::to_string(start + size) : "";
    res.set_content(json{{"analyses", page}, {"next_page_token", next}}.dump(), "application/json");
  });
  server_.Get(R"(/v1/analyses/([^/:]+))", [this](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> l(mu);
    json* a = FindAnalysis(req.matches[1]);
    if (!a) return Error(res, 404, "NOT_FOUND", "analysis " + std::string(req.matches[1]) + " not found");
    auto& script = status_script[req.matches[1]];
    if (!script.empty()) {
      (*a)["status"] = script.front();
      script.pop_front();
    }
    res.set_content(a->dump(), "application/json");
  });
  server_.Post(R"(/v1/analyses/([^/:]+):rerun)", [this](const httplib::Request& req, httplib::Response& res) {
    auto body = json::parse(req.body.empty() ? "{}" : req.body, nullptr, false);
    if (!body.is_object()) return Error(res, 400, "INVALID_ARGUMENT", "malformed JSON body");
    std::lock_guard<std::mutex> l(mu);
    last_rerun_body = body;
    json* old = FindAnalysis(req.matches[1]);
    if (!old) return Error(res, 404, "NOT_FOUND", "analysis " + std::string(req.matches[1]) + " not found");
    char id[64];
    std::snprintf(id, sizeof(id), "0193a5c2-0000-7000-8000-%012d", next_id++);
    json copy = *old;
    json& a = AddAnalysis(id, "pending", copy["exp_id"]);
    a["name"] = body.value("name", copy.value("name", ""));
    a["rerun_of"] = req.matches[1].str();
    res.status = 201;
    res.set_content(json{{"analysis_id", id}, {"rerun_of", req.matches[1].str()}}.dump(), "application/json");
  });
  server_.Post(R"(/v1/analyses/([^/:]+):cancel)", [this](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> l(mu);
    json* a = FindAnalysis(req.matches[1]);
    if (!a) return Error(res, 404, "NOT_FOUND", "analysis " + std::string(req.matches[1]) + " not found");
    if (!Terminal((*a)["status"])) (*a)["status"] = "cancelled";
    res.set_content("{}", "application/json");
  });
  server_.Delete(R"(/v1/analyses/([^/:]+))", [this](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> l(mu);
    auto it = std::find_if(analyses.begin(), analyses.end(),
                           [&](const json& a) { return a["analysis_id"] == req.matches[1].str(); });
    if (it == analyses.end()) {
      return Error(res, 404, "NOT_FOUND", "analysis " + std::string(req.matches[1]) + " not found");
    }
    analyses.erase(it);
    res.set_content("{}", "application/json");
  });
  server_.Get(R"(/v1/analyses/([^/:]+)/logs)", [this](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> l(mu);
    std::string id = req.matches[1];
    json* a = FindAnalysis(id);
    if (!a) return Error(res, 404, "NOT_FOUND", "analysis " + id + " not found");
    auto& pieces = log_pieces[id];
    std::string& log = logs[id];
    if (!pieces.empty()) {
      log += pieces.front();
      pieces.pop_front();
    } else if (final_status.count(id)) {
      (*a)["status"] = final_status[id];
    }
    size_t offset = req.has_param("offset") ? std::stoul(req.get_param_value("offset")) : 0;
    offset = std::min(offset, log.size());
    std::string content = log.substr(offset, log_chunk);
    size_t next = offset + content.size();
    bool complete = Terminal((*a)["status"]) && next == log.size() && pieces.empty();
    if (send_log_headers) {
      res.set_header("X-Falcon-Next-Offset", std::to_string(next));
      res.set_header("X-Falcon-Complete", complete ? "true" : "false");
    }
    res.set_content(content, "text/plain");
  });
  server_.Get(R"(/v1/analyses/([^/:]+)/results)", [this](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> l(mu);
    std::string id = req.matches[1];
    json* a = FindAnalysis(id);
    if (!a) return Error(res, 404, "NOT_FOUND", "analysis " + id + " not found");
    json list = json::array();
    for (auto& [name, content] : results[id]) {
      list.push_back({{"name", name},
                      {"size", content.size()},  // as the real server (docs/http-api.md), not size_bytes
                      {"uri", (*a)["result_gcs_path"].get<std::string>() + name}});
    }
    res.set_content(json{{"results", list}}.dump(), "application/json");
  });
  server_.Get(R"(/v1/analyses/([^/:]+)/results/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> l(mu);
    std::string id = req.matches[1], name = req.matches[2];
    auto it = results[id].find(name);
    if (it == results[id].end()) return Error(res, 404, "NOT_FOUND", "result " + name + " not found");
    res.set_content(it->second, "application/octet-stream");
  });

  // --- plugins
  server_.Get("/v1/plugins", [this](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> l(mu);
    res.set_content(json{{"plugins", plugins}}.dump(), "application/json");
  });
  server_.Get(R"(/v1/plugins/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> l(mu);
    for (auto& p : plugins) {
      if (p["name"] == req.matches[1].str()) return res.set_content(p.dump(), "application/json");
    }
    Error(res, 404, "NOT_FOUND", "plugin " + std::string(req.matches[1]) + " is not in the catalog");
  });
}

}  // namespace falcon::cli::testing
