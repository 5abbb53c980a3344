// The fake's whole server in one file (about 650 lines) on purpose: routing, the two kinds, the watch and
// log streams and the fault hooks share one lock and one event log, and reading them together is how one
// checks that they agree with each other.
#include "kube/testing/fake_kube_apiserver.h"

#include <httplib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace falcon::kube::testing {

namespace {

constexpr char kPods[] = "pods";
constexpr char kLeases[] = "leases";

std::string Key(const std::string& ns, const std::string& name) { return ns + "/" + name; }

std::string NowRfc3339() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string NameOf(const json& o) {
  const json meta = o.value("metadata", json::object());
  return meta.contains("name") && meta["name"].is_string() ? meta["name"].get<std::string>() : "";
}

json LabelsOf(const json& o) {
  const json meta = o.value("metadata", json::object());
  return meta.contains("labels") && meta["labels"].is_object() ? meta["labels"] : json::object();
}

std::string ApiVersionOf(const std::string& kind) { return kind == kPods ? "v1" : "coordination.k8s.io/v1"; }
std::string KindName(const std::string& kind) { return kind == kPods ? "Pod" : "Lease"; }
std::string GroupResource(const std::string& kind) {
  return kind == kPods ? "pods" : "leases.coordination.k8s.io";
}

bool IsTerminalPhase(const json& pod) {
  std::string phase = pod.value("status", json::object()).value("phase", "");
  return phase == "Succeeded" || phase == "Failed";
}

std::string Line(const std::string& type, const json& object) {
  return json{{"type", type}, {"object", object}}.dump() + "\n";
}

}  // namespace

bool MatchesLabelSelector(const json& labels, const std::string& selector) {
  if (selector.empty()) return true;
  for (absl::string_view term : absl::StrSplit(selector, ',', absl::SkipEmpty())) {
    std::string t(term);
    size_t ne = t.find("!=");
    size_t eq = t.find('=');
    auto value_of = [&](const std::string& k) -> std::optional<std::string> {
      if (!labels.contains(k) || !labels[k].is_string()) return std::nullopt;
      return labels[k].get<std::string>();
    };
    if (ne != std::string::npos) {
      auto v = value_of(t.substr(0, ne));
      if (v && *v == t.substr(ne + 2)) return false;
    } else if (eq != std::string::npos) {
      std::string k = t.substr(0, eq);
      std::string want = t.substr(eq + (t.compare(eq, 2, "==") == 0 ? 2 : 1));
      auto v = value_of(k);
      if (!v || *v != want) return false;
    } else if (!value_of(t)) {
      return false;
    }
  }
  return true;
}

// One open watch stream: where it is in the event log and what it selects.
struct FakeKubeApiserver::Watch {
  std::string kind, ns, selector;
  bool bookmarks = false;
  int64_t cursor = 0;      // the last resourceVersion it has been sent (or skipped)
  int64_t generation = 0;  // watch_generation_ when it opened
  int64_t bookmark_generation = 0;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  std::string initial;  // synthetic ADDED events, sent first
  bool gone = false;    // opened from an expired resourceVersion
};

FakeKubeApiserver::FakeKubeApiserver() : server_(std::make_unique<httplib::Server>()) {
  // Each watch, followed log and idle keep-alive connection holds a worker.
  server_->new_task_queue = [] { return new httplib::ThreadPool(32); };
  auto handler = [this](const httplib::Request& req, httplib::Response& res) { Serve(req, res); };
  server_->Get(".*", handler);
  server_->Post(".*", handler);
  server_->Put(".*", handler);
  server_->Delete(".*", handler);
  server_->Patch(".*", handler);
  port_ = server_->bind_to_any_port("127.0.0.1");
  if (port_ <= 0) {
    std::fprintf(stderr, "FakeKubeApiserver: cannot bind a port on 127.0.0.1\n");
    std::abort();
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  for (int i = 0; i < 5000 && !server_->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!server_->is_running()) {
    std::fprintf(stderr, "FakeKubeApiserver: the server did not start within 5 s\n");
    std::abort();
  }
}

FakeKubeApiserver::~FakeKubeApiserver() {
  {
    std::lock_guard<std::mutex> l(mu_);
    shutting_down_ = true;
  }
  changed_.notify_all();
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

std::string FakeKubeApiserver::url() const { return absl::StrCat("http://127.0.0.1:", port_); }

KubeConfig FakeKubeApiserver::Config(const std::string& ns) const {
  KubeConfig c;
  c.server = url();
  c.namespace_ = ns;
  return c;
}

std::string FakeKubeApiserver::KubeconfigYaml(const std::string& ns) const {
  return absl::StrCat("apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: ", url(),
                      "\nusers:\n- name: fake\n  user: {}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n"
                      "    user: fake\n    namespace: ",
                      ns, "\ncurrent-context: fake\n");
}

// --- faults -----------------------------------------------------------------------------------------------

void FakeKubeApiserver::AddFault(Fault f) {
  std::lock_guard<std::mutex> l(mu_);
  faults_.push_back(std::move(f));
}

void FakeKubeApiserver::FailNext(int n, int status) {
  Fault f;
  f.status = status;
  f.reason = status == 503 ? "ServiceUnavailable" : status == 500 ? "InternalError" : "";
  f.count = n;
  AddFault(f);
}

void FakeKubeApiserver::ClearFaults() {
  std::lock_guard<std::mutex> l(mu_);
  faults_.clear();
}

void FakeKubeApiserver::CloseWatches() {
  {
    std::lock_guard<std::mutex> l(mu_);
    ++watch_generation_;
  }
  changed_.notify_all();
}

void FakeKubeApiserver::ExpireResourceVersions() {
  {
    std::lock_guard<std::mutex> l(mu_);
    oldest_valid_rv_ = ++rv_;
    events_.clear();  // nothing before oldest_valid_rv_ can be replayed any more
  }
  changed_.notify_all();
}

void FakeKubeApiserver::set_gone_as_http_status(bool v) {
  std::lock_guard<std::mutex> l(mu_);
  gone_as_http_ = v;
}

void FakeKubeApiserver::SendBookmarks() {
  {
    std::lock_guard<std::mutex> l(mu_);
    ++bookmark_generation_;
  }
  changed_.notify_all();
}

void FakeKubeApiserver::set_graceful_pod_deletion(bool v) {
  std::lock_guard<std::mutex> l(mu_);
  graceful_delete_ = v;
}

// --- the kubelet ------------------------------------------------------------------------------------------

bool FakeKubeApiserver::SetPodStatus(const std::string& ns, const std::string& name, const json& status) {
  {
    std::lock_guard<std::mutex> l(mu_);
    auto& pods = objects_[kPods];
    auto it = pods.find(Key(ns, name));
    if (it == pods.end()) return false;
    json o = it->second;
    o["status"] = status;
    it->second = Stamp(kPods, ns, std::move(o), "MODIFIED");
  }
  changed_.notify_all();
  return true;
}

bool FakeKubeApiserver::SetPodRunning(const std::string& ns, const std::string& name, const std::string& container) {
  json status = {{"phase", "Running"},
                 {"startTime", NowRfc3339()},
                 {"containerStatuses",
                  json::array({{{"name", container}, {"state", {{"running", {{"startedAt", NowRfc3339()}}}}}}})}};
  return SetPodStatus(ns, name, status);
}

bool FakeKubeApiserver::SetPodTerminated(const std::string& ns, const std::string& name, int exit_code,
                                         const std::string& reason, const std::string& container) {
  json terminated = {{"exitCode", exit_code}, {"reason", reason}, {"finishedAt", NowRfc3339()}};
  json status = {{"phase", exit_code == 0 ? "Succeeded" : "Failed"},
                 {"startTime", NowRfc3339()},
                 {"containerStatuses",
                  json::array({{{"name", container}, {"state", {{"terminated", terminated}}}}})}};
  return SetPodStatus(ns, name, status);
}

void FakeKubeApiserver::AppendPodLog(const std::string& ns, const std::string& name, const std::string& data) {
  {
    std::lock_guard<std::mutex> l(mu_);
    logs_[Key(ns, name)] += data;
  }
  changed_.notify_all();
}

bool FakeKubeApiserver::FinishDeletion(const std::string& ns, const std::string& name) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!objects_[kPods].count(Key(ns, name))) return false;
    Remove(kPods, ns, name);
  }
  changed_.notify_all();
  return true;
}

// --- direct access ----------------------------------------------------------------------------------------

json FakeKubeApiserver::Put(const std::string& kind, const std::string& ns, const json& object) {
  json out;
  {
    std::lock_guard<std::mutex> l(mu_);
    const bool existed = objects_[kind].count(Key(ns, NameOf(object))) > 0;
    out = Stamp(kind, ns, object, existed ? "MODIFIED" : "ADDED");
    objects_[kind][Key(ns, NameOf(object))] = out;
  }
  changed_.notify_all();
  return out;
}

std::optional<json> FakeKubeApiserver::Object(const std::string& kind, const std::string& ns,
                                              const std::string& name) const {
  std::lock_guard<std::mutex> l(mu_);
  auto k = objects_.find(kind);
  if (k == objects_.end()) return std::nullopt;
  auto it = k->second.find(Key(ns, name));
  if (it == k->second.end()) return std::nullopt;
  return it->second;
}

std::vector<json> FakeKubeApiserver::Objects(const std::string& kind, const std::string& ns) const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<json> out;
  auto k = objects_.find(kind);
  if (k == objects_.end()) return out;
  for (const auto& [key, o] : k->second) {
    if (key.rfind(ns + "/", 0) == 0) out.push_back(o);
  }
  return out;
}

int64_t FakeKubeApiserver::resource_version() const {
  std::lock_guard<std::mutex> l(mu_);
  return rv_;
}

std::vector<std::string> FakeKubeApiserver::Requests() const {
  std::lock_guard<std::mutex> l(mu_);
  return requests_;
}

int FakeKubeApiserver::CountRequests(const std::string& method, const std::string& path_contains) const {
  std::lock_guard<std::mutex> l(mu_);
  int n = 0;
  for (const auto& r : requests_) {
    if (r.rfind(method + " ", 0) == 0 && r.find(path_contains) != std::string::npos) ++n;
  }
  return n;
}

int FakeKubeApiserver::OpenWatches() const {
  std::lock_guard<std::mutex> l(mu_);
  return open_watches_;
}

// --- state changes (mu_ held) -----------------------------------------------------------------------------

json FakeKubeApiserver::Stamp(const std::string& kind, const std::string& ns, json object, const char* event_type) {
  json& meta = object["metadata"];
  if (!meta.is_object()) meta = json::object();
  meta["namespace"] = ns;
  meta["resourceVersion"] = std::to_string(++rv_);
  if (!meta.contains("uid")) meta["uid"] = absl::StrCat("fake-uid-", ++uid_counter_);
  if (!meta.contains("creationTimestamp")) meta["creationTimestamp"] = NowRfc3339();
  object["apiVersion"] = ApiVersionOf(kind);
  object["kind"] = KindName(kind);
  Record(kind, ns, event_type, object);
  return object;
}

void FakeKubeApiserver::Record(const std::string& kind, const std::string& ns, const std::string& type,
                               const json& object) {
  events_.push_back(Event{rv_, kind, ns, type, object});
}

json FakeKubeApiserver::Remove(const std::string& kind, const std::string& ns, const std::string& name) {
  auto& objs = objects_[kind];
  auto it = objs.find(Key(ns, name));
  json o = it->second;
  objs.erase(it);
  o["metadata"]["resourceVersion"] = std::to_string(++rv_);
  Record(kind, ns, "DELETED", o);
  logs_.erase(Key(ns, name));
  return o;
}

FakeKubeApiserver::Response FakeKubeApiserver::StatusBody(int code, const std::string& reason,
                                                          const std::string& message) {
  return Response{code, json{{"kind", "Status"},
                             {"apiVersion", "v1"},
                             {"metadata", json::object()},
                             {"status", "Failure"},
                             {"message", message},
                             {"reason", reason},
                             {"code", code}}};
}

// --- serving ----------------------------------------------------------------------------------------------

std::optional<FakeKubeApiserver::Response> FakeKubeApiserver::InjectedFault(const httplib::Request& req) {
  const bool watch = req.get_param_value("watch") == "1" || req.get_param_value("watch") == "true";
  for (auto it = faults_.begin(); it != faults_.end(); ++it) {
    if (!it->method.empty() && it->method != req.method) continue;
    if (!it->path_contains.empty() && req.path.find(it->path_contains) == std::string::npos) continue;
    if (!it->user_agent.empty() && req.get_header_value("User-Agent") != it->user_agent) continue;
    if (it->watch_only && !watch) continue;
    Response r = StatusBody(it->status, it->reason, absl::StrCat("injected fault: HTTP ", it->status));
    if (it->count > 0 && --it->count == 0) faults_.erase(it);
    return r;
  }
  return std::nullopt;
}

void FakeKubeApiserver::Serve(const httplib::Request& req, httplib::Response& res) {
  auto reply = [&res](const Response& r) {
    res.status = r.status;
    res.set_content(r.body.dump(), "application/json");
  };
  std::vector<std::string> seg = absl::StrSplit(req.path, '/', absl::SkipEmpty());
  // /api/v1/namespaces/NS/pods[/NAME[/log]] or /apis/coordination.k8s.io/v1/namespaces/NS/leases[/NAME]
  std::string kind, ns, name, sub;
  size_t base = 0;
  if (seg.size() >= 5 && seg[0] == "api" && seg[1] == "v1" && seg[2] == "namespaces" && seg[4] == kPods) {
    base = 4;
  } else if (seg.size() >= 6 && seg[0] == "apis" && seg[1] == "coordination.k8s.io" && seg[2] == "v1" &&
             seg[3] == "namespaces" && seg[5] == kLeases) {
    base = 5;
  }
  if (base > 0 && seg.size() <= base + 3) {
    kind = seg[base];
    ns = seg[base - 1];
    if (seg.size() > base + 1) name = seg[base + 1];
    if (seg.size() > base + 2) sub = seg[base + 2];
  }
  std::string target = req.target.empty() ? req.path : req.target;
  std::unique_lock<std::mutex> l(mu_);
  requests_.push_back(req.method + " " + target);
  if (auto f = InjectedFault(req)) {
    reply(*f);
    return;
  }
  if (kind.empty() || (!sub.empty() && !(kind == kPods && sub == "log"))) {
    reply(StatusBody(404, "NotFound", absl::StrCat("the server could not find the requested resource (",
                                                   req.method, " ", req.path, ")")));
    return;
  }
  const bool watch = req.get_param_value("watch") == "1" || req.get_param_value("watch") == "true";
  if (sub == "log") {
    if (req.method != "GET") {
      reply(StatusBody(405, "MethodNotAllowed", "only GET of a Pod's log is served"));
      return;
    }
    l.unlock();
    StartLog(ns, name, req, res);
    return;
  }
  if (name.empty() && watch && req.method == "GET") {
    l.unlock();
    StartWatch(kind, ns, req, res);
    return;
  }
  Response r = name.empty() ? HandleCollection(kind, ns, req) : HandleObject(kind, ns, name, req);
  l.unlock();
  changed_.notify_all();
  reply(r);
}

FakeKubeApiserver::Response FakeKubeApiserver::HandleCollection(const std::string& kind, const std::string& ns,
                                                                const httplib::Request& req) {
  auto& objs = objects_[kind];
  if (req.method == "POST") {
    json o = json::parse(req.body, nullptr, false);
    if (!o.is_object()) return StatusBody(400, "BadRequest", "the request body is not a JSON object");
    std::string name = NameOf(o);
    if (name.empty()) {
      return StatusBody(422, "Invalid", absl::StrCat(KindName(kind), " \"\" is invalid: metadata.name: Required value"));
    }
    const json meta = o.value("metadata", json::object());
    if (meta.contains("namespace") && meta["namespace"].is_string() && meta["namespace"] != ns) {
      return StatusBody(400, "BadRequest", "the namespace of the provided object does not match the namespace sent on the request");
    }
    if (objs.count(Key(ns, name))) {
      Response r = StatusBody(409, "AlreadyExists",
                              absl::StrCat(GroupResource(kind), " \"", name, "\" already exists"));
      r.body["details"] = {{"name", name}, {"kind", kind}};
      return r;
    }
    o["metadata"].erase("resourceVersion");
    o["metadata"].erase("deletionTimestamp");
    if (kind == kPods && !o.contains("status")) o["status"] = {{"phase", "Pending"}};
    json stored = Stamp(kind, ns, std::move(o), "ADDED");
    objs[Key(ns, name)] = stored;
    return Response{201, stored};
  }
  if (req.method != "GET") return StatusBody(405, "MethodNotAllowed", req.method + " of a collection is not served");
  // A list: sorted by name, `limit` per page, `continue` is the last name of the previous page.
  const std::string selector = req.get_param_value("labelSelector");
  const std::string after = req.get_param_value("continue");
  size_t limit = 0;
  if (req.has_param("limit")) limit = static_cast<size_t>(std::max(0, std::atoi(req.get_param_value("limit").c_str())));
  json items = json::array();
  std::string next;
  for (const auto& [key, o] : objs) {
    if (key.rfind(ns + "/", 0) != 0 || !MatchesLabelSelector(LabelsOf(o), selector)) continue;
    if (!after.empty() && NameOf(o) <= after) continue;
    if (limit > 0 && items.size() == limit) {
      next = NameOf(items.back());
      break;
    }
    items.push_back(o);
  }
  json meta = {{"resourceVersion", std::to_string(rv_)}};
  if (!next.empty()) meta["continue"] = next;
  return Response{200, json{{"apiVersion", ApiVersionOf(kind)},
                            {"kind", KindName(kind) + "List"},
                            {"metadata", meta},
                            {"items", items}}};
}

FakeKubeApiserver::Response FakeKubeApiserver::HandleObject(const std::string& kind, const std::string& ns,
                                                            const std::string& name, const httplib::Request& req) {
  auto& objs = objects_[kind];
  auto it = objs.find(Key(ns, name));
  auto not_found = [&] {
    return StatusBody(404, "NotFound", absl::StrCat(GroupResource(kind), " \"", name, "\" not found"));
  };
  if (req.method == "GET") {
    if (it == objs.end()) return not_found();
    return Response{200, it->second};
  }
  if (req.method == "PUT") {
    if (it == objs.end()) return not_found();
    json o = json::parse(req.body, nullptr, false);
    if (!o.is_object()) return StatusBody(400, "BadRequest", "the request body is not a JSON object");
    if (NameOf(o) != name) return StatusBody(400, "BadRequest", "the name of the object does not match the URL");
    const std::string rv = o.value("metadata", json::object()).value("resourceVersion", "");
    if (rv.empty()) {
      return StatusBody(422, "Invalid",
                        absl::StrCat(KindName(kind), " \"", name,
                                     "\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified "
                                     "for an update"));
    }
    if (rv != it->second["metadata"]["resourceVersion"]) {
      return StatusBody(409, "Conflict",
                        absl::StrCat("Operation cannot be fulfilled on ", GroupResource(kind), " \"", name,
                                     "\": the object has been modified; please apply your changes to the latest "
                                     "version and try again"));
    }
    // Identity fields stay the server's.
    o["metadata"]["uid"] = it->second["metadata"]["uid"];
    o["metadata"]["creationTimestamp"] = it->second["metadata"]["creationTimestamp"];
    it->second = Stamp(kind, ns, std::move(o), "MODIFIED");
    return Response{200, it->second};
  }
  if (req.method == "DELETE") {
    if (it == objs.end()) return not_found();
    if (kind == kPods && graceful_delete_) {
      if (!it->second["metadata"].contains("deletionTimestamp")) {
        json o = it->second;
        o["metadata"]["deletionTimestamp"] = NowRfc3339();
        it->second = Stamp(kind, ns, std::move(o), "MODIFIED");
      }
      return Response{200, it->second};
    }
    return Response{200, Remove(kind, ns, name)};
  }
  return StatusBody(405, "MethodNotAllowed", req.method + " is not served by the fake");
}

void FakeKubeApiserver::StartWatch(const std::string& kind, const std::string& ns, const httplib::Request& req,
                                   httplib::Response& res) {
  auto w = std::make_shared<Watch>();
  w->kind = kind;
  w->ns = ns;
  w->selector = req.get_param_value("labelSelector");
  w->bookmarks = req.get_param_value("allowWatchBookmarks") == "true";
  if (req.has_param("timeoutSeconds")) {
    w->deadline = std::chrono::steady_clock::now() +
                  std::chrono::seconds(std::atoi(req.get_param_value("timeoutSeconds").c_str()));
  }
  const std::string rv_param = req.get_param_value("resourceVersion");
  {
    std::lock_guard<std::mutex> l(mu_);
    w->generation = watch_generation_;
    w->bookmark_generation = bookmark_generation_;
    if (rv_param.empty() || rv_param == "0") {
      // "Any version": the current objects as ADDED, then what follows.
      for (const auto& [key, o] : objects_[kind]) {
        if (key.rfind(ns + "/", 0) == 0 && MatchesLabelSelector(LabelsOf(o), w->selector)) {
          w->initial += Line("ADDED", o);
        }
      }
      w->cursor = rv_;
    } else {
      w->cursor = std::atoll(rv_param.c_str());
      if (w->cursor < oldest_valid_rv_) {
        if (gone_as_http_) {
          Response r = StatusBody(410, "Expired", absl::StrCat("too old resource version: ", rv_param, " (",
                                                                oldest_valid_rv_, ")"));
          res.status = r.status;
          res.set_content(r.body.dump(), "application/json");
          return;
        }
        w->gone = true;
      }
    }
    ++open_watches_;
  }
  res.status = 200;
  res.set_chunked_content_provider(
      "application/json",
      [this, w](size_t, httplib::DataSink& sink) -> bool {
        if (!w->initial.empty()) {
          std::string first;
          first.swap(w->initial);
          return sink.write(first.data(), first.size());
        }
        std::unique_lock<std::mutex> l(mu_);
        for (;;) {
          if (shutting_down_ || w->generation != watch_generation_ || std::chrono::steady_clock::now() >= w->deadline) {
            l.unlock();
            sink.done();
            return true;
          }
          if (w->gone || w->cursor < oldest_valid_rv_) {
            json status = StatusBody(410, "Expired", absl::StrCat("too old resource version: ", w->cursor, " (",
                                                                  oldest_valid_rv_, ")"))
                              .body;
            std::string line = Line("ERROR", status);
            l.unlock();
            sink.write(line.data(), line.size());
            sink.done();
            return true;
          }
          std::string out;
          auto first = std::upper_bound(events_.begin(), events_.end(), w->cursor,
                                        [](int64_t rv, const Event& e) { return rv < e.rv; });
          for (auto e = first; e != events_.end(); ++e) {
            if (e->kind == w->kind && e->ns == w->ns && MatchesLabelSelector(LabelsOf(e->object), w->selector)) {
              out += Line(e->type, e->object);
            }
          }
          w->cursor = std::max(w->cursor, rv_);
          if (w->bookmarks && w->bookmark_generation != bookmark_generation_) {
            w->bookmark_generation = bookmark_generation_;
            out += Line("BOOKMARK", {{"kind", KindName(w->kind)},
                                     {"apiVersion", ApiVersionOf(w->kind)},
                                     {"metadata", {{"resourceVersion", std::to_string(rv_)}}}});
          }
          if (!out.empty()) {
            l.unlock();
            return sink.write(out.data(), out.size());
          }
          if (changed_.wait_for(l, std::chrono::milliseconds(500)) == std::cv_status::timeout) {
            // Idle: a blank line (clients skip it) so that a client that went away is noticed by a failed
            // write and its worker freed.
            l.unlock();
            return sink.write("\n", 1);
          }
        }
      },
      [this](bool) {
        std::lock_guard<std::mutex> l(mu_);
        --open_watches_;
      });
}

void FakeKubeApiserver::StartLog(const std::string& ns, const std::string& name, const httplib::Request& req,
                                 httplib::Response& res) {
  std::string key = Key(ns, name);
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = objects_[kPods].find(key);
    Response err;
    if (it == objects_[kPods].end()) {
      err = StatusBody(404, "NotFound", absl::StrCat("pods \"", name, "\" not found"));
    } else if (it->second.value("status", json::object()).value("phase", "Pending") == "Pending") {
      err = StatusBody(400, "BadRequest",
                       absl::StrCat("container \"runner\" in pod \"", name, "\" is waiting to start: ContainerCreating"));
    }
    if (err.status != 200) {
      res.status = err.status;
      res.set_content(err.body.dump(), "application/json");
      return;
    }
    if (req.get_param_value("follow") != "true") {
      res.status = 200;
      res.set_content(logs_[key], "text/plain");
      return;
    }
  }
  auto sent = std::make_shared<size_t>(0);
  res.status = 200;
  res.set_chunked_content_provider("text/plain", [this, key, sent](size_t, httplib::DataSink& sink) -> bool {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      const std::string& log = logs_[key];
      if (log.size() > *sent) {
        std::string out = log.substr(*sent);
        *sent = log.size();
        l.unlock();
        return sink.write(out.data(), out.size());
      }
      auto it = objects_[kPods].find(key);
      if (shutting_down_ || it == objects_[kPods].end() || IsTerminalPhase(it->second)) {
        l.unlock();
        sink.done();
        return true;
      }
      changed_.wait_for(l, std::chrono::milliseconds(200));
    }
  });
}

}  // namespace falcon::kube::testing
