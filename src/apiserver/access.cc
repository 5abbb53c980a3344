#include "apiserver/access.h"

#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "api/errors.h"

namespace falcon::apiserver {

const char* NeedName(Need n) {
  switch (n) {
    case Need::kOpen: return "none";
    case Need::kAuthenticated: return "any";
    case Need::kViewer: return kRoleViewer;
    case Need::kSubmitter: return kRoleSubmitter;
    case Need::kAdmin: return kRoleAdmin;
    case Need::kController: return kRoleController;
  }
  return "?";
}

const std::vector<AccessRule>& AccessTable() {
  static const std::vector<AccessRule>* const kTable = new std::vector<AccessRule>{
      // health, the API document, the benchmark ceiling: open (metrics: see AccessOptions)
      {"Healthz", Need::kOpen},
      {"Readyz", Need::kOpen},
      {"Metrics", Need::kOpen},
      {"OpenApi", Need::kOpen},
      {"Hello", Need::kOpen},
      {"Whoami", Need::kAuthenticated},
      // Exps and artifacts
      {"CreateExp", Need::kSubmitter, false, true},
      {"UpdateExpStatus", Need::kSubmitter, true, true},
      {"ListExps", Need::kViewer},
      {"GetExp", Need::kViewer},
      {"CreateArtifact", Need::kSubmitter, false, true},
      {"Upload", Need::kSubmitter, false, true},
      // analyses
      {"CreateAnalysis", Need::kSubmitter, false, true},
      {"RerunAnalysis", Need::kSubmitter, false, true},
      {"ListAnalyses", Need::kViewer},
      {"GetAnalysis", Need::kViewer},
      {"CancelAnalysis", Need::kSubmitter, true, true},
      {"DeleteAnalysis", Need::kSubmitter, true, true},
      {"GetAnalysisLogs", Need::kViewer},
      {"ListResults", Need::kViewer},
      {"GetResult", Need::kViewer},
      // the plugin catalog
      {"ListPlugins", Need::kViewer},
      {"GetPlugin", Need::kViewer},
      // tokens and audit
      {"CreateToken", Need::kAdmin, false, true},
      {"ListTokens", Need::kAdmin},
      {"RevokeToken", Need::kAdmin, false, true},
      {"ListAudit", Need::kAdmin},
      // gRPC FalconAPIService: the controller's calls. Reads are open to viewers too; every write and the
      // leader epoch are the controller's alone.
      {"ListExpsAwaitingAnalysis", Need::kViewer},
      {"GetAnalysisRecord", Need::kViewer},
      {"ListAnalysisRecords", Need::kViewer},
      {"ListRunningAnalyses", Need::kViewer},
      {"ListPurgeableAnalyses", Need::kViewer},
      {"CreateAnalysisRecord", Need::kController, false, true},
      {"UpdateAnalysisRecord", Need::kController, false, true},
      {"DeleteAnalysisRecord", Need::kController, false, true},
      {"AcquireLeaderEpoch", Need::kController, false, true},
  };
  return *kTable;
}

const AccessRule* FindAccessRule(std::string_view action) {
  for (const AccessRule& r : AccessTable()) {
    if (action == r.action) return &r;
  }
  return nullptr;
}

namespace {

int Rank(const std::string& role) {
  if (role == kRoleViewer) return 1;
  if (role == kRoleSubmitter) return 2;
  if (role == kRoleAdmin) return 3;
  return 0;
}

bool Has(const Caller& c, const char* role) {
  return std::find(c.roles.begin(), c.roles.end(), role) != c.roles.end();
}

bool KnownRole(const std::string& r) { return Rank(r) > 0 || r == kRoleController; }

}  // namespace

bool HasRole(const Caller& caller, Need need) {
  if (caller.unrestricted) return true;
  switch (need) {
    case Need::kOpen: return true;
    case Need::kAuthenticated: return caller.authenticated;
    case Need::kController: return caller.authenticated && Has(caller, kRoleController);
    default: break;
  }
  if (!caller.authenticated) return false;
  const int want = need == Need::kViewer ? 1 : need == Need::kSubmitter ? 2 : 3;
  int best = 0;
  for (const auto& r : caller.roles) best = std::max(best, Rank(r));
  // The controller reads what it drives.
  if (want == 1 && Has(caller, kRoleController)) return true;
  return best >= want;
}

absl::Status AuthorizeOwner(const Caller& caller, const std::string& owner, const std::string& what) {
  if (caller.unrestricted || HasRole(caller, Need::kAdmin)) return absl::OkStatus();
  if (caller.authenticated && !owner.empty() && owner == caller.principal.username &&
      HasRole(caller, Need::kSubmitter)) {
    return absl::OkStatus();
  }
  return api::WithRequiredRole(
      absl::PermissionDeniedError(absl::StrCat(
          what, ": it was created by ", owner.empty() ? "an unknown principal" : owner,
          "; only its creator (with role submitter) or an admin may; needs role admin")),
      kRoleAdmin);
}

namespace {
absl::StatusOr<Policy> ParsePolicyNode(const YAML::Node& root, const std::string& file);
}  // namespace

absl::StatusOr<Policy> ParsePolicy(const std::string& text, const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(file, ":", e.mark.line + 1, ": ", e.msg));
  }
  try {
    return ParsePolicyNode(root, file);
  } catch (const YAML::Exception& e) {  // a list or map where a name belongs, e.g. `users: [[a]]`
    return absl::InvalidArgumentError(absl::StrCat(file, ":", e.mark.line + 1, ": ", e.msg,
                                                   " (role is a name; users and groups are lists of names)"));
  }
}

namespace {
absl::StatusOr<Policy> ParsePolicyNode(const YAML::Node& root, const std::string& file) {
  Policy p;
  if (!root || root.IsNull()) return p;
  auto at = [&](const YAML::Node& n) { return absl::StrCat(file, ":", n.Mark().line + 1, ": "); };
  if (!root.IsMap()) return absl::InvalidArgumentError(at(root) + "expected a map with `bindings:`");
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    if (key != "bindings") return absl::InvalidArgumentError(at(kv.first) + "unknown key `" + key + "` (expected bindings)");
  }
  const YAML::Node bindings = root["bindings"];
  if (!bindings) return p;
  if (!bindings.IsSequence()) return absl::InvalidArgumentError(at(bindings) + "expected `bindings:` as a list");
  for (const YAML::Node& b : bindings) {
    if (!b.IsMap()) return absl::InvalidArgumentError(at(b) + "a binding is a map of role, users, groups");
    PolicyBinding pb;
    for (const auto& kv : b) {
      const std::string key = kv.first.as<std::string>();
      if (key == "role") {
        pb.role = kv.second.as<std::string>("");
      } else if (key == "users" || key == "groups") {
        if (!kv.second.IsSequence()) return absl::InvalidArgumentError(at(kv.second) + "`" + key + "` is a list");
        for (const auto& v : kv.second) (key == "users" ? pb.users : pb.groups).push_back(v.as<std::string>());
      } else {
        return absl::InvalidArgumentError(at(kv.first) + "unknown key `" + key + "` in a binding (role, users, groups)");
      }
    }
    if (!KnownRole(pb.role)) {
      return absl::InvalidArgumentError(at(b) + "role `" + pb.role + "` is not one of viewer, submitter, admin, controller");
    }
    p.bindings.push_back(std::move(pb));
  }
  return p;
}
}  // namespace

absl::StatusOr<std::unique_ptr<AccessControl>> AccessControl::Create(auth::StaticTokenAuthenticator& tokens,
                                                                     std::unique_ptr<auth::Authenticator> oidc,
                                                                     Clock& clock, AccessOptions options) {
  std::unique_ptr<AccessControl> ac(new AccessControl(tokens, std::move(oidc), clock, std::move(options)));
  if (!ac->options_.policy_file.empty()) {
    std::lock_guard<std::mutex> l(ac->mu_);
    if (auto s = ac->LoadPolicy(); !s.ok()) return s;
  }
  return ac;
}

absl::Status AccessControl::LoadPolicy() {
  namespace fs = std::filesystem;
  std::error_code ec;
  auto mtime = fs::last_write_time(options_.policy_file, ec);
  if (ec) return absl::InvalidArgumentError("--policy-file " + options_.policy_file + ": " + ec.message());
  const int64_t ns = mtime.time_since_epoch().count();
  if (policy_mtime_ && *policy_mtime_ == ns) return absl::OkStatus();
  std::ifstream in(options_.policy_file, std::ios::binary);
  if (!in) return absl::InvalidArgumentError("--policy-file " + options_.policy_file + " cannot be opened");
  // Read under the lock on a request's thread: bounded, so a runaway file cannot stall authentication.
  std::string text(kMaxPolicyBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxPolicyBytes) {
    return absl::InvalidArgumentError(absl::StrCat("--policy-file ", options_.policy_file, " is larger than ",
                                                   kMaxPolicyBytes, " bytes"));
  }
  auto p = ParsePolicy(text, options_.policy_file);
  if (!p.ok()) return p.status();
  policy_ = std::move(*p);
  policy_mtime_ = ns;
  spdlog::info("policy loaded file={} bindings={}", options_.policy_file, policy_.bindings.size());
  return absl::OkStatus();
}

void AccessControl::MaybeReloadPolicy() {
  if (options_.policy_file.empty()) return;
  std::lock_guard<std::mutex> l(mu_);
  const MonoTime now = clock_.MonotonicNow();
  if (last_check_ && now - *last_check_ < options_.policy_check_interval) return;
  last_check_ = now;
  if (auto s = LoadPolicy(); !s.ok()) {
    spdlog::error("policy not reloaded, keeping the previous one: {}", std::string(s.message()));
  }
}

std::vector<std::string> AccessControl::PolicyRoles(const auth::Principal& p) {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::string> out;
  for (const PolicyBinding& b : policy_.bindings) {
    bool match = std::find(b.users.begin(), b.users.end(), p.username) != b.users.end();
    for (const auto& g : p.groups) match = match || std::find(b.groups.begin(), b.groups.end(), g) != b.groups.end();
    if (match && std::find(out.begin(), out.end(), b.role) == out.end()) out.push_back(b.role);
  }
  return out;
}

absl::StatusOr<Caller> AccessControl::Authenticate(const std::optional<std::string>& bearer,
                                                   const std::string& source,
                                                   const absl::StatusOr<auth::Principal>* client_cert) {
  MaybeReloadPolicy();
  Caller c;
  c.source = source;
  c.principal.username = "anonymous";
  if (!bearer && client_cert != nullptr) {
    if (!client_cert->ok()) return client_cert->status();
    c.authenticated = true;
    c.principal = **client_cert;
    c.roles = PolicyRoles(c.principal);
    return c;
  }
  if (!bearer) return c;
  if (bearer->empty()) return absl::UnauthenticatedError("the Authorization header holds no bearer token");
  auto tok = tokens_.AuthenticateWithRole(*bearer);
  if (tok.ok()) {
    c.authenticated = true;
    c.principal = tok->principal;
    c.roles.push_back(tok->role);
  } else if (!absl::IsNotFound(tok.status())) {
    return tok.status();
  } else if (oidc_ != nullptr) {
    auto p = oidc_->Authenticate(*bearer);
    if (!p.ok()) {
      if (absl::IsNotFound(p.status())) return absl::UnauthenticatedError("the token is unknown or expired");
      return p.status();
    }
    c.authenticated = true;
    c.principal = *p;
  } else {
    return absl::UnauthenticatedError("the token is unknown or expired");
  }
  for (auto& r : PolicyRoles(c.principal)) {
    if (std::find(c.roles.begin(), c.roles.end(), r) == c.roles.end()) c.roles.push_back(r);
  }
  return c;
}

absl::Status AccessControl::Authorize(const Caller& caller, std::string_view action, const std::string& what) const {
  const AccessRule* rule = FindAccessRule(action);
  if (rule == nullptr) {
    // Fails closed: a route or method added without a rule is refused (and the table test fails).
    return absl::PermissionDeniedError(absl::StrCat(what, " has no access rule; refused"));
  }
  Need need = rule->need;
  if (action == "Metrics" && options_.metrics_require_auth) need = Need::kViewer;
  if (HasRole(caller, need)) return absl::OkStatus();
  if (!caller.authenticated) return absl::UnauthenticatedError("no credential given");
  return api::WithRequiredRole(absl::PermissionDeniedError(absl::StrCat(what, " needs role ", NeedName(need))),
                               NeedName(need));
}

}  // namespace falcon::apiserver
