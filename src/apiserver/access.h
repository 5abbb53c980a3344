// Access control of falcon-apiserver (docs/security.md): who is calling (authentication) and what they may
// do (authorization), decided once for the HTTP routes and the gRPC methods alike.
//
//   - The access table (AccessTable()) names, for every action (an HTTP route's or a gRPC method's name),
//     the role it needs and whether it is an own-check (a submitter may cancel/delete what it created;
//     admin may for anyone). A route or method without a rule is refused (and fails the table test).
//   - Roles: viewer (read) < submitter (create Exps, artifacts, analyses; cancel/delete own) < admin
//     (everything a person may do: tokens, audit, others' analyses). controller is apart: the analyzer
//     controller's identity, the only one that may acquire a leader epoch and write analysis records; it
//     may also read.
//   - A principal's roles: a static token's own role, plus every binding of the policy file (its user name
//     or one of its groups) — reloaded when the file's mtime changes, checked at most every
//     policy_check_interval by the injected clock; a file that fails to parse keeps the previous policy.
//
// Thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "auth/authenticator.h"
#include "auth/static_tokens.h"
#include "common/clock.h"

namespace falcon::apiserver {

inline constexpr char kRoleViewer[] = "viewer";
inline constexpr char kRoleSubmitter[] = "submitter";
inline constexpr char kRoleAdmin[] = "admin";
inline constexpr char kRoleController[] = "controller";

// What an action needs.
enum class Need {
  kOpen,           // anyone, also without a credential (health, the API document)
  kAuthenticated,  // any verified principal, whatever its roles (whoami)
  kViewer,
  kSubmitter,
  kAdmin,
  kController,
};
const char* NeedName(Need n);

struct AccessRule {
  const char* action;
  Need need;
  bool own = false;       // a submitter only for its own records; admin for all
  bool mutating = false;  // audited when it succeeds (denials are always audited)
};

// Every action of the server: the HTTP routes' and the gRPC methods' names.
const std::vector<AccessRule>& AccessTable();
// The rule of `action`, or null.
const AccessRule* FindAccessRule(std::string_view action);

// Who is calling, as the transport saw it and access control decided.
struct Caller {
  bool authenticated = false;  // a credential was verified
  auth::Principal principal;   // username "anonymous" when not authenticated
  std::vector<std::string> roles;
  std::string source;          // the peer address
  bool unrestricted = false;   // access control is off (--auth=off): every action is allowed
};

// The roles file (--policy-file):
//   bindings:
//   - role: admin
//     users: [root@example.com]
//     groups: [falcon-admins]
//   - role: submitter
//     groups: [ml-team]
struct PolicyBinding {
  std::string role;
  std::vector<std::string> users;
  std::vector<std::string> groups;
};
struct Policy {
  std::vector<PolicyBinding> bindings;
};
// INVALID_ARGUMENT naming the line of an unknown key, role or a malformed file (never throws).
absl::StatusOr<Policy> ParsePolicy(const std::string& yaml_text, const std::string& file_name);

// The largest --policy-file read (bytes); a larger one keeps the previous policy.
inline constexpr size_t kMaxPolicyBytes = 1 << 20;

struct AccessOptions {
  std::string policy_file;  // empty: none (only static tokens' own roles)
  std::chrono::milliseconds policy_check_interval{2000};
  bool metrics_require_auth = false;  // GET /metrics needs viewer
};

class AccessControl {
 public:
  // `tokens` (static API tokens) must outlive this object; `oidc` (the IssuerRouter, may be null) is owned.
  // INVALID_ARGUMENT when the policy file is given but cannot be read or parsed.
  static absl::StatusOr<std::unique_ptr<AccessControl>> Create(auth::StaticTokenAuthenticator& tokens,
                                                               std::unique_ptr<auth::Authenticator> oidc,
                                                               Clock& clock, AccessOptions options);

  // The caller behind `bearer` (nullopt: no Authorization sent). An absent credential is an anonymous
  // caller (which only kOpen actions allow); a credential nobody knows, or a revoked or expired one, is
  // UNAUTHENTICATED saying why; UNAVAILABLE when it cannot be checked now.
  // `client_cert`: a TLS client certificate the transport verified against --client-ca-file (null: none);
  // without a bearer token it is the caller (CN the user, O the groups, authenticator "x509"; roles from the
  // policy file), and an error in it (no CN) is UNAUTHENTICATED. A bearer token, when sent, decides alone.
  absl::StatusOr<Caller> Authenticate(const std::optional<std::string>& bearer, const std::string& source,
                                      const absl::StatusOr<auth::Principal>* client_cert = nullptr);
  // OK if `caller` may do `action`. `what` names the call in the message ("GET /v1/tokens",
  // "AcquireLeaderEpoch"). An anonymous caller is UNAUTHENTICATED ("no credential given"), a known one
  // without the role PERMISSION_DENIED "<what> needs role R" with the role as required_role. An own-check
  // action passes here for a submitter; the service then calls AuthorizeOwner with the record's owner.
  absl::Status Authorize(const Caller& caller, std::string_view action, const std::string& what) const;
  bool metrics_require_auth() const { return options_.metrics_require_auth; }

  // Reads the policy file now if its mtime changed (also called by Authenticate every check interval).
  void MaybeReloadPolicy();

 private:
  AccessControl(auth::StaticTokenAuthenticator& tokens, std::unique_ptr<auth::Authenticator> oidc, Clock& clock,
                AccessOptions options)
      : tokens_(tokens), oidc_(std::move(oidc)), clock_(clock), options_(std::move(options)) {}
  absl::Status LoadPolicy();
  std::vector<std::string> PolicyRoles(const auth::Principal& p);

  auth::StaticTokenAuthenticator& tokens_;
  std::unique_ptr<auth::Authenticator> oidc_;
  Clock& clock_;
  const AccessOptions options_;
  std::mutex mu_;
  Policy policy_;                          // guarded by mu_
  std::optional<int64_t> policy_mtime_;    // guarded by mu_ (ns since epoch of the file's mtime)
  std::optional<MonoTime> last_check_;     // guarded by mu_
};

// OK if `caller` may act on a record `owner` created, for an own-check action: admin, unrestricted, or a
// submitter that is its owner. PERMISSION_DENIED "<what>: ... was created by OWNER; only they or an admin
// may" otherwise (with required_role admin).
absl::Status AuthorizeOwner(const Caller& caller, const std::string& owner, const std::string& what);
// True if `caller` has `role` (viewer < submitter < admin; controller apart) or is unrestricted.
bool HasRole(const Caller& caller, Need need);

}  // namespace falcon::apiserver
