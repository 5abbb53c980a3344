// `falcon exp ...`: create, get, add-artifact, complete and list experiments.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "cli/helpers.h"
#include "cli/output.h"
#include "common/status.h"

namespace falcon::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::vector<std::string> kExpStates = {"pending", "running", "completed", "failed"};

// The flags of the exp commands; each command reads only its own.
struct ExpOptions {
  std::string output = "table";
  std::string id;  // --id of create, the EXP argument of the others
  // create
  std::string name;
  // create, list
  std::string status;
  // list
  int limit = 0;
  // add-artifact
  std::string artifact_type, uri, file, file_name;
  // complete
  bool failed = false;
};

const char kExpListHint[] = "list the experiments with `falcon exp list`";
const char kExpCheckHint[] = "check the id with `falcon exp list` (create it with `falcon exp create`)";

absl::Status ExplainExp(const absl::Status& s, const std::string& id, const char* hint) {
  return ExplainNotFound(s, "exp " + id, hint);
}

// The artifact type implied by a file name or URI, as the built-in plugins' catalog names them.
std::string InferArtifactType(const std::string& name) {
  auto ends = [&](const std::string& suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends(".xplane.pb")) return "xplane";
  if (ends(".trace.json") || ends(".trace.json.gz")) return "trace";
  std::string base = name.substr(name.find_last_of('/') + 1);
  if (ends(".hlo") || ends(".hlo.txt") || ends(".hlo.pb") || base.find("hlo") != std::string::npos) return "hlo";
  return "file";
}

int Create(Context& ctx, const ExpOptions& o) {
  if (o.id.empty() && o.name.empty()) {
    return ctx.Usage("give the experiment a --name (and optionally an --id; the server generates one otherwise)");
  }
  auto client = ctx.Client();
  if (!client.ok()) return ctx.Fail(client.status());
  json body = json::object();
  if (!o.id.empty()) body["exp_id"] = o.id;
  body["name"] = o.name.empty() ? o.id : o.name;
  if (!o.status.empty()) body["status"] = o.status;
  auto r = (*client)->Send("POST", "/v1/exps", body);
  if (!r.ok()) return ctx.Fail(r.status());
  if (o.output == "json") {
    ctx.PrintJson(ExpJson(*r));
  } else {
    ctx.out() << Str(*r, "exp_id") << "\n";
  }
  return kExitOk;
}

int Get(Context& ctx, const ExpOptions& o) {
  auto client = ctx.Client();
  if (!client.ok()) return ctx.Fail(client.status());
  auto r = (*client)->Get("/v1/exps/" + ApiClient::EscapeSegment(o.id));
  if (!r.ok()) return ctx.Fail(ExplainExp(r.status(), o.id, kExpListHint));
  // The answer is the Exp, possibly with its artifacts ({"exp": {...}, "artifacts": [...]} or flat).
  const json& e = r->contains("exp") && (*r)["exp"].is_object() ? (*r)["exp"] : *r;
  ordered_json out = ExpJson(e);
  ordered_json arts = ordered_json::array();
  if (r->contains("artifacts") && (*r)["artifacts"].is_array()) {
    for (const auto& a : (*r)["artifacts"]) arts.push_back(ArtifactJson(a));
  }
  out["artifacts"] = arts;
  if (o.output == "json") {
    ctx.PrintJson(out);
    return kExitOk;
  }
  auto s = [&](const char* k) { return StringField(out, k); };
  ctx.PrintDetails({{"ID", s("exp_id")},
                    {"Name", s("name")},
                    {"Status", s("status")},
                    {"Created", s("created_at")},
                    {"Completed", s("completed_at")}});
  if (!arts.empty()) {
    ctx.out() << "\n";
    // A NOTE column only when the server noted something (e.g. "no plugin for type X").
    bool notes = false;
    for (auto& a : arts) notes = notes || !a.value("note", std::string()).empty();
    Table t(notes ? std::vector<std::string>{"ARTIFACT ID", "TYPE", "URI", "NOTE"}
                  : std::vector<std::string>{"ARTIFACT ID", "TYPE", "URI"},
            notes ? std::vector<bool>{false, false, true, true} : std::vector<bool>{false, false, true});
    for (auto& a : arts) {
      std::vector<std::string> row{a["artifact_id"], a["artifact_type"], a["uri"]};
      if (notes) row.push_back(a.value("note", std::string()));
      t.AddRow(std::move(row));
    }
    ctx.PrintTable(t);
  }
  return kExitOk;
}

int List(Context& ctx, const ExpOptions& o) {
  auto client = ctx.Client();
  if (!client.ok()) return ctx.Fail(client.status());
  ListRequest req;
  req.path = "/v1/exps";
  if (!o.status.empty()) req.filters.push_back({"status", o.status});
  req.limit = o.limit;
  req.items = [](const json& r) -> const json& { return ListField(r, "exps"); };
  auto exps = ListAll(**client, req);
  if (!exps.ok()) return ctx.Fail(exps.status());
  if (o.output == "json") {
    PrintJsonList(ctx, "exps", *exps, ExpJson);
    return kExitOk;
  }
  if (exps->empty()) {
    ctx.err() << "No experiments found.\n";
    return kExitOk;
  }
  std::vector<Column> columns = {{"EXP ID"}, {"NAME", true}, {"STATUS"}, {"AGE"}};
  bool wide = o.output == "wide";
  if (wide) columns.insert(columns.end(), {{"CREATED"}, {"COMPLETED"}});
  Table t = MakeTable(columns);
  for (const auto& e : *exps) {
    ordered_json x = ExpJson(e);
    std::vector<std::string> row = {x["exp_id"], x["name"], x["status"], ctx.Age(e, "created_at")};
    if (wide) row.insert(row.end(), {StringField(x, "created_at"), StringField(x, "completed_at")});
    t.AddRow(DashEmpty(std::move(row)));
  }
  ctx.PrintTable(t);
  return kExitOk;
}

int Complete(Context& ctx, const ExpOptions& o) {
  auto client = ctx.Client();
  if (!client.ok()) return ctx.Fail(client.status());
  std::string status = o.failed ? "failed" : "completed";
  auto r = (*client)->Send("PATCH", "/v1/exps/" + ApiClient::EscapeSegment(o.id), {{"status", status}});
  if (!r.ok()) return ctx.Fail(ExplainExp(r.status(), o.id, kExpListHint));
  ctx.out() << "exp " << o.id << " " << status << "\n";
  return kExitOk;
}

int AddArtifact(Context& ctx, const ExpOptions& o) {
  if (!o.uri.empty() && !o.file.empty()) {
    return ctx.Usage("conflicting flags: --uri and --file cannot be used together; --uri registers an artifact "
                     "that is already stored, --file uploads a local one");
  }
  if (o.uri.empty() && o.file.empty()) {
    return ctx.Usage("give the artifact with --uri URI (already stored) or --file PATH (uploaded now)");
  }
  if (!o.file_name.empty() && o.file.empty()) return ctx.Usage("--as only applies with --file");
  std::error_code ec;
  if (!o.file.empty() && !fs::is_regular_file(o.file, ec)) {
    return ctx.Usage("--file " + o.file + " is not a readable file: check the path");
  }
  auto client = ctx.Client();
  if (!client.ok()) return ctx.Fail(client.status());
  std::string exp_path = "/v1/exps/" + ApiClient::EscapeSegment(o.id);
  std::string uri = o.uri;
  std::string source = !o.file.empty() ? o.file : o.uri;
  if (!o.file.empty()) {
    std::string name = o.file_name.empty() ? fs::path(o.file).filename().string() : o.file_name;
    auto up = (*client)->UploadFile(exp_path + "/files/" + ApiClient::EscapePath(name), o.file);
    if (!up.ok()) {
      absl::Status s = ExplainExp(up.status(), o.id, kExpCheckHint);
      if (s.code() == absl::StatusCode::kResourceExhausted) {
        s = absl::ResourceExhaustedError(std::string(s.message()) +
                                         "; copy a file this large into the object store yourself and "
                                         "register it with --uri");
      }
      return ctx.Fail(Annotate(s, "uploading " + o.file));
    }
    uri = Str(*up, "uri");
    if (uri.empty()) return ctx.Fail(absl::InternalError("the upload answer has no uri: " + up->dump()));
    source = name;
  }
  std::string type = o.artifact_type.empty() ? InferArtifactType(source) : o.artifact_type;
  auto r = (*client)->Send("POST", exp_path + "/artifacts", {{"artifact_type", type}, {"uri", uri}});
  if (!r.ok()) return ctx.Fail(ExplainExp(r.status(), o.id, kExpCheckHint));
  if (o.output == "json") {
    ctx.PrintJson(ArtifactJson(*r));
  } else {
    ctx.out() << Str(*r, "artifact_id") << "\n";
    ctx.err() << "added " << type << " artifact " << uri << " to exp " << o.id << "\n";
  }
  return kExitOk;
}

}  // namespace

void RegisterExpCommands(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<ExpOptions>();

  CLI::App* ex = AddGroup(app, "exp", "exps", "Register experiments and their artifacts");
  {
    auto* c = AddCommand(ex, ctx, "create", "Register an experiment and print its id", o, Create);
    c->add_option("--id", o->id, "Experiment id (default: generated by the server)")->type_name("EXP");
    c->add_option("--name", o->name, "Experiment name (default: the id)");
    c->add_option("--status", o->status, "Initial state (default pending)")->check(CLI::IsMember(kExpStates));
    AddOutputFlag(c, &o->output);
    c->footer("Examples:\n  falcon exp create --id exp-1 --name 'llama profile'\n  EXP=$(falcon exp create --name nightly)");
  }
  {
    auto* c = AddCommand(ex, ctx, "get", "Show one experiment", o, Get);
    c->add_option("EXP", o->id, "Experiment id")->required();
    AddOutputFlag(c, &o->output);
    c->footer("Examples:\n  falcon exp get exp-1");
  }
  {
    auto* c = AddCommand(ex, ctx, "add-artifact",
                         "Add an artifact to an experiment (a URI, or a local file to upload)", o, AddArtifact);
    c->add_option("EXP", o->id, "Experiment id")->required();
    c->add_option("--uri", o->uri, "Where the artifact already is (gs://..., file:///...)")->type_name("URI");
    c->add_option("--file", o->file, "Local file to upload into the object store")->type_name("PATH");
    c->add_option("--type", o->artifact_type,
                  "Artifact type: hlo, xplane, trace, file (default: from the name: *.xplane.pb -> xplane, "
                  "*.trace.json[.gz] -> trace, *hlo* -> hlo, else file)")
        ->type_name("TYPE");
    c->add_option("--as", o->file_name, "With --file: the name to store it under (default: its base name)")
        ->type_name("NAME");
    AddOutputFlag(c, &o->output);
    c->footer(
        "Examples:\n"
        "  falcon exp add-artifact exp-1 --file ./host.xplane.pb\n"
        "  falcon exp add-artifact exp-1 --uri gs://bucket/exps/exp-1/hlo/ --type hlo");
  }
  {
    auto* c = AddCommand(ex, ctx, "complete",
                         "Mark an experiment completed (offline analyses then start by themselves)", o, Complete);
    c->add_option("EXP", o->id, "Experiment id")->required();
    c->add_flag("--failed", o->failed, "Mark it failed instead");
    c->footer("Examples:\n  falcon exp complete exp-1");
  }
  {
    auto* c = AddCommand(ex, ctx, "list", "List experiments", o, List);
    c->alias("ls");
    c->add_option("--status", o->status, "Only experiments in this state")->check(CLI::IsMember(kExpStates));
    c->add_option("--limit", o->limit, "Show at most N experiments (0: all)")->check(CLI::NonNegativeNumber);
    AddOutputFlag(c, &o->output);
    c->footer("Examples:\n  falcon exp list\n  falcon exp list --status completed -o json");
  }
}

}  // namespace falcon::cli
