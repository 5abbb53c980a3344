// ApiService, access control (service.h "access control", "tokens and audit"; docs/security.md): the
// caller's identity, the access table check every route and method makes first, the audit log, and the
// admin's token and audit calls.
#include <spdlog/spdlog.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/errors.h"
#include "api/validation.h"
#include "apiserver/service.h"
#include "auth/static_tokens.h"
#include "common/status.h"

namespace falcon::apiserver {
namespace {

constexpr size_t kMaxTokenName = 128;
constexpr std::chrono::hours kMaxTokenLifetime{8760};

// "720h", "30m", "90s", "7d" -> seconds. INVALID_ARGUMENT naming the forms and the bound.
absl::StatusOr<std::chrono::seconds> ParseLifetime(const std::string& text) {
  auto bad = [&] {
    return absl::InvalidArgumentError("expires_in \"" + text +
                                      "\" is not a duration: use a number with s, m, h or d (e.g. 720h), at most 8760h");
  };
  if (text.size() < 2) return bad();
  int64_t n = 0;
  if (!absl::SimpleAtoi(text.substr(0, text.size() - 1), &n) || n <= 0) return bad();
  int64_t unit = 0;
  switch (text.back()) {
    case 's': unit = 1; break;
    case 'm': unit = 60; break;
    case 'h': unit = 3600; break;
    case 'd': unit = 86400; break;
    default: return bad();
  }
  if (n > std::chrono::duration_cast<std::chrono::seconds>(kMaxTokenLifetime).count() / unit) return bad();
  return std::chrono::seconds(n * unit);
}

bool ValidTokenName(const std::string& name) {
  if (name.empty() || name.size() > kMaxTokenName) return false;
  for (char ch : name) {
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.')) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<Caller> ApiService::Authenticate(const std::optional<std::string>& bearer, const std::string& source,
                                                const absl::StatusOr<auth::Principal>* client_cert) {
  if (options_.access == nullptr) {
    Caller c;
    c.unrestricted = true;
    c.principal.username = "anonymous";
    c.source = source;
    return c;
  }
  auto c = options_.access->Authenticate(bearer, source, client_cert);
  if (!c.ok() && absl::IsUnauthenticated(c.status())) {
    RequestContext denied;
    denied.caller.principal.username = "anonymous";
    denied.caller.source = source;
    Audit(denied, "Authenticate", "", 401);
  }
  return c;
}

absl::Status ApiService::Authorize(const RequestContext& ctx, std::string_view action, const std::string& what) {
  if (ctx.caller.unrestricted) return absl::OkStatus();
  if (options_.access == nullptr) return absl::PermissionDeniedError(what + ": the caller was not authenticated");
  absl::Status s = options_.access->Authorize(ctx.caller, action, what);
  if (!s.ok()) Audit(ctx, action, what, api::HttpStatusOf(s));
  return s;
}

void ApiService::Audit(const RequestContext& ctx, std::string_view action, const std::string& target, int code) {
  store::AuditEvent e;
  e.time = clock_.Now();
  e.user = ctx.caller.principal.username.empty() ? "anonymous" : ctx.caller.principal.username;
  e.action = std::string(action);
  e.target = target;
  e.result = code < 400 ? "ok" : (code == 401 || code == 403) ? "denied" : "error";
  e.code = code;
  e.source = ctx.caller.source;
  spdlog::info("audit user=\"{}\" action={} target=\"{}\" result={} code={} source={}", e.user, e.action, e.target,
               e.result, e.code, e.source);
  if (auto s = store_.AppendAuditEvent(e); !s.ok()) {
    spdlog::error("audit event not stored: {}", std::string(s.message()));
  }
}

absl::StatusOr<int64_t> ApiService::PurgeAudit() {
  if (options_.audit_retention.count() <= 0) return 0;
  return store_.DeleteAuditEventsBefore(clock_.Now() - options_.audit_retention);
}

absl::StatusOr<CreatedToken> ApiService::CreateToken(const RequestContext& ctx, const std::string& name,
                                                     const std::string& role, const std::string& expires_in) {
  if (!ValidTokenName(name)) {
    return absl::InvalidArgumentError(absl::StrCat("token name \"", name, "\" must be 1 to ", kMaxTokenName,
                                                   " characters of letters, digits, '-', '_' and '.'"));
  }
  if (role != kRoleViewer && role != kRoleSubmitter && role != kRoleAdmin && role != kRoleController) {
    return absl::InvalidArgumentError("role \"" + role + "\" is not one of viewer, submitter, admin, controller");
  }
  CreatedToken out;
  FALCON_ASSIGN_OR_RETURN(out.secret, auth::NewTokenSecret());
  out.token.name = name;
  out.token.role = role;
  out.token.token_hash = auth::HashToken(out.secret);
  out.token.created_by = ctx.caller.principal.username;
  out.token.created_at = clock_.Now();
  if (!expires_in.empty()) {
    FALCON_ASSIGN_OR_RETURN(auto life, ParseLifetime(expires_in));
    out.token.expires_at = out.token.created_at + life;
  }
  FALCON_RETURN_IF_ERROR(store_.CreateApiToken(out.token));
  return out;
}

absl::StatusOr<std::vector<store::ApiToken>> ApiService::ListTokens(const RequestContext&) {
  return store_.ListApiTokens();
}

absl::StatusOr<store::ApiToken> ApiService::RevokeToken(const RequestContext&, const std::string& name) {
  return store_.RevokeApiToken(name, clock_.Now());
}

absl::StatusOr<store::AuditPage> ApiService::ListAudit(const RequestContext&, const store::AuditQuery& q) {
  FALCON_RETURN_IF_ERROR(api::ValidatePageToken(q.page_token));  // the same bound as every list
  return store_.ListAuditEvents(q);
}

}  // namespace falcon::apiserver
