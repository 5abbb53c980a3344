// `falcon whoami`, `falcon token create|list|revoke` and `falcon audit list`: who the server sees, the
// static API tokens an admin hands out, and the audit trail.
#include <CLI/CLI.hpp>

#include <memory>

#include "cli/commands.h"
#include "cli/helpers.h"
#include "cli/output.h"
#include "common/rfc3339.h"

namespace falcon::cli {
namespace {

using nlohmann::json;

constexpr int kAuditPageSize = 100;
const std::vector<std::string> kRoles = {"viewer", "submitter", "admin"};

struct AuthOptions {
  std::string output = "table";
  std::string name;        // token create/revoke
  std::string role;        // token create
  std::string expires_in = "720h";
  std::string since;       // audit list
  std::string user;
  int limit = 0;
};

// A string field ("" when absent or not a string).
std::string S(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

std::vector<std::string> Strings(const json& j, const char* key) {
  std::vector<std::string> v;
  if (j.is_object() && j.contains(key) && j[key].is_array()) {
    for (const auto& x : j[key]) {
      if (x.is_string()) v.push_back(x.get<std::string>());
    }
  }
  return v;
}

// The object of an answer, MalformedAnswer naming `what` otherwise.
const json& Object(const json& j, const char* what) {
  if (!j.is_object()) throw MalformedAnswer(std::string(what) + " is a JSON " + j.type_name() + ", not an object");
  return j;
}

ordered_json TokenJson(const json& t) {
  Object(t, "token");
  ordered_json o;
  o["name"] = S(t, "name");
  o["role"] = S(t, "role");
  if (t.contains("token")) o["token"] = S(t, "token");
  o["created_by"] = S(t, "created_by");
  o["created_at"] = TimeJson(t, "created_at");
  o["expires_at"] = TimeJson(t, "expires_at");
  o["revoked_at"] = TimeJson(t, "revoked_at");
  o["last_used_at"] = TimeJson(t, "last_used_at");
  return o;
}

ordered_json AuditJson(const json& e) {
  Object(e, "audit event");
  ordered_json o;
  o["time"] = TimeJson(e, "time");
  o["user"] = S(e, "user");
  o["action"] = S(e, "action");
  o["target"] = S(e, "target");
  o["result"] = S(e, "result");
  o["code"] = e.contains("code") && (e["code"].is_string() || e["code"].is_number()) ? e["code"] : json("");
  o["source"] = S(e, "source");
  return o;
}

std::string CodeText(const ordered_json& c) { return c.is_string() ? c.get<std::string>() : c.dump(); }

int Whoami(Context& ctx, const AuthOptions& o) {
  auto client = ctx.Client();
  if (!client.ok()) return ctx.Fail(client.status());
  auto r = (*client)->Get("/v1/whoami");
  if (absl::IsNotFound(r.status())) {
    return ctx.Fail(absl::NotFoundError("falcon-apiserver at " + (*client)->server() +
                                        " has no /v1/whoami: it is a version without authentication, where "
                                        "every caller is anonymous (" + std::string(r.status().message()) + ")"));
  }
  if (!r.ok()) return ctx.Fail(r.status());
  const json& w = Object(*r, "whoami answer");
  ordered_json j;
  j["username"] = S(w, "username");
  j["groups"] = Strings(w, "groups");
  j["roles"] = Strings(w, "roles");
  j["authenticator"] = S(w, "authenticator");
  if (o.output == "json") {
    ctx.PrintJson(j);
    return kExitOk;
  }
  ctx.PrintDetails({{"Username", j["username"]},
                    {"Groups", Join(Strings(w, "groups"), ", ")},
                    {"Roles", Join(Strings(w, "roles"), ", ")},
                    {"Authenticator", j["authenticator"]},
                    {"Server", (*client)->server()}});
  return kExitOk;
}

int TokenCreate(Context& ctx, const AuthOptions& o) {
  if (!ParseDuration(o.expires_in)) {
    return ctx.Usage("--expires-in " + o.expires_in + " is not a duration: write e.g. 720h, 24h or 90m");
  }
  auto client = ctx.Client();
  if (!client.ok()) return ctx.Fail(client.status());
  auto r = (*client)->Send("POST", "/v1/tokens", json{{"name", o.name}, {"role", o.role}, {"expires_in", o.expires_in}});
  if (!r.ok()) return ctx.Fail(r.status());
  ordered_json t = TokenJson(*r);
  if (S(*r, "token").empty()) return ctx.Fail(absl::InternalError("the server created token " + o.name + " but sent no token value"));
  ctx.err() << "Token " << t["name"].get<std::string>() << " (role " << t["role"].get<std::string>()
            << ") is shown only now: store it safely, the server keeps only its hash.\n";
  if (o.output == "json") {
    ctx.PrintJson(t);
  } else {
    ctx.out() << t["token"].get<std::string>() << "\n";
  }
  return kExitOk;
}

int TokenList(Context& ctx, const AuthOptions& o) {
  auto client = ctx.Client();
  if (!client.ok()) return ctx.Fail(client.status());
  auto r = (*client)->Get("/v1/tokens");
  if (!r.ok()) return ctx.Fail(r.status());
  std::vector<json> items;
  for (const auto& t : ListField(*r, "tokens")) items.push_back(t);
  if (o.output == "json") {
    PrintJsonList(ctx, "tokens", items, TokenJson);
    return kExitOk;
  }
  if (items.empty()) {
    ctx.err() << "No tokens found.\n";
    return kExitOk;
  }
  bool wide = o.output == "wide";
  std::vector<Column> columns = {{"NAME", true}, {"ROLE"}, {"CREATED BY", true, 2}, {"AGE", false, 1},
                                 {"EXPIRES"}, {"STATUS"}};
  if (wide) columns.insert(columns.end(), {{"LAST USED"}, {"REVOKED"}});
  Table table = MakeTable(columns);
  for (const auto& raw : items) {
    ordered_json t = TokenJson(raw);
    auto exp = Timestamp(raw, "expires_at");
    std::string status = "active";
    if (Timestamp(raw, "revoked_at")) {
      status = "revoked";
    } else if (exp && *exp <= ctx.clock().Now()) {
      status = "expired";
    }
    std::string expires = "-";
    if (exp) {
      auto left = std::chrono::duration_cast<std::chrono::seconds>(*exp - ctx.clock().Now());
      expires = left.count() > 0 ? "in " + HumanDuration(left) : HumanDuration(-left) + " ago";
    }
    std::vector<std::string> row = {t["name"], t["role"], t["created_by"], ctx.Age(raw, "created_at"), expires, status};
    if (wide) {
      row.push_back(t["last_used_at"].is_string() ? ctx.Age(raw, "last_used_at") + " ago" : "never");
      row.push_back(t["revoked_at"].is_string() ? t["revoked_at"].get<std::string>() : "");
    }
    table.AddRow(DashEmpty(std::move(row)));
  }
  ctx.PrintTable(table);
  return kExitOk;
}

int TokenRevoke(Context& ctx, const AuthOptions& o) {
  auto client = ctx.Client();
  if (!client.ok()) return ctx.Fail(client.status());
  auto r = (*client)->Send("DELETE", "/v1/tokens/" + ApiClient::EscapeSegment(o.name), nullptr);
  if (!r.ok()) return ctx.Fail(ExplainNotFound(r.status(), "token " + o.name, "list the tokens with `falcon token list`"));
  if (o.output == "json") {
    ctx.PrintJson(TokenJson(*r));
  } else {
    ctx.out() << "token " << o.name << " revoked\n";
  }
  return kExitOk;
}

// --since: a duration back from now ("24h") or an RFC 3339 time.
absl::StatusOr<std::string> SinceValue(Context& ctx, const std::string& since) {
  if (since.empty()) return std::string();
  if (auto d = ParseDuration(since)) return FormatRfc3339Seconds(ctx.clock().Now() - *d);
  if (auto t = ParseRfc3339(since)) return FormatRfc3339(*t);
  return absl::InvalidArgumentError("--since " + since +
                                    " is neither a duration (24h, 90m) nor an RFC 3339 time (2026-12-01T00:00:00Z)");
}

int AuditList(Context& ctx, const AuthOptions& o) {
  auto since = SinceValue(ctx, o.since);
  if (!since.ok()) return ctx.Usage(std::string(since.status().message()));
  auto client = ctx.Client();
  if (!client.ok()) return ctx.Fail(client.status());
  ListRequest req;
  req.path = "/v1/audit";
  if (!since->empty()) req.filters.push_back({"since", *since});
  if (!o.user.empty()) req.filters.push_back({"user", o.user});
  req.limit = o.limit;
  req.page_size = kAuditPageSize;
  req.items = [](const json& r) -> const json& { return ListField(r, "events"); };
  auto events = ListAll(**client, req);
  if (!events.ok()) return ctx.Fail(events.status());
  if (o.output == "json") {
    PrintJsonList(ctx, "events", *events, AuditJson);
    return kExitOk;
  }
  if (events->empty()) {
    ctx.err() << "No audit events found.\n";
    return kExitOk;
  }
  bool wide = o.output == "wide";
  std::vector<Column> columns = {{"TIME"}, {"USER", true}, {"ACTION", true}, {"TARGET", true}, {"RESULT"}};
  if (wide) columns.insert(columns.end(), {{"CODE"}, {"SOURCE"}});
  Table table = MakeTable(columns);
  for (const auto& raw : *events) {
    ordered_json e = AuditJson(raw);
    std::vector<std::string> row = {e["time"].is_string() ? e["time"].get<std::string>() : "", e["user"], e["action"],
                                    e["target"], e["result"]};
    if (wide) row.insert(row.end(), {CodeText(e["code"]), e["source"]});
    table.AddRow(DashEmpty(std::move(row)));
  }
  ctx.PrintTable(table);
  return kExitOk;
}

}  // namespace

void RegisterAuthCommands(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<AuthOptions>();
  {
    auto* c = AddCommand(&app, ctx, "whoami", "Show the identity and roles falcon-apiserver sees for your credential", o,
                         Whoami);
    AddOutputFlag(c, &o->output);
    c->footer("Examples:\n  falcon whoami\n  falcon whoami -o json | jq -r '.roles[]'");
  }
  CLI::App* tk = AddGroup(app, "token", "tokens", "Create, list and revoke static API tokens (admin)");
  tk->footer("Examples:\n  falcon token create ci-bot --role submitter --expires-in 720h\n  falcon token list");
  {
    auto* c = AddCommand(tk, ctx, "create", "Create a token; it is printed once, only now", o, TokenCreate);
    c->add_option("NAME", o->name, "Token name (unique)")->required();
    c->add_option("--role", o->role, "Role of the token: viewer, submitter or admin")
        ->required()
        ->check(CLI::IsMember(kRoles))
        ->type_name("ROLE");
    c->add_option("--expires-in", o->expires_in, "Lifetime, e.g. 720h (30 days)")->type_name("DURATION")->default_str("720h");
    AddOutputFlag(c, &o->output);
    c->footer(
        "Examples:\n  falcon token create ci-bot --role submitter --expires-in 720h > ci-bot.token\n"
        "  falcon token create reader --role viewer -o json | jq -r .token");
  }
  {
    auto* c = AddCommand(tk, ctx, "list", "List tokens (never their values)", o, TokenList);
    c->alias("ls");
    AddOutputFlag(c, &o->output);
    c->footer("Examples:\n  falcon token list\n  falcon token list -o json");
  }
  {
    auto* c = AddCommand(tk, ctx, "revoke", "Revoke a token; requests with it are refused from now on", o, TokenRevoke);
    c->add_option("NAME", o->name, "Token name")->required();
    AddOutputFlag(c, &o->output);
    c->footer("Examples:\n  falcon token revoke ci-bot");
  }
  CLI::App* au = AddGroup(app, "audit", "", "Read the audit trail (admin)");
  au->footer("Examples:\n  falcon audit list --since 24h --user alice@example.com");
  {
    auto* c = AddCommand(au, ctx, "list", "List audit events in the server's order (pages through all of them)", o, AuditList);
    c->alias("ls");
    c->add_option("--since", o->since, "Only events after this: a duration back (24h) or an RFC 3339 time")
        ->type_name("WHEN");
    c->add_option("--user", o->user, "Only events of this user")->type_name("USER");
    c->add_option("--limit", o->limit, "Show at most N events (0: all)")->check(CLI::NonNegativeNumber);
    AddOutputFlag(c, &o->output);
    c->footer(
        "Examples:\n  falcon audit list --since 24h\n  falcon audit list --since 2026-12-01T00:00:00Z --user alice -o wide\n"
        "  falcon audit list --limit 50 -o json");
  }
}

}  // namespace falcon::cli
