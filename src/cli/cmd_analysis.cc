// `falcon analysis ...`: create, rerun, get, list, cancel, delete, logs, results, wait.
#include <CLI/CLI.hpp>

#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/helpers.h"
#include "cli/output.h"
#include "absl/strings/str_cat.h"
#include "common/quantity.h"

namespace falcon::cli {
namespace {

using nlohmann::json;

constexpr int kListPageSize = 100;

const std::vector<std::string> kAnalysisStates = {"pending", "running", "succeeded", "failed", "cancelled"};

// The flags of the analysis commands; each command reads only its own.
struct AnalysisOptions {
  std::string output = "table";
  std::string id;  // the ID argument of get, cancel, delete, logs, results, wait
  // create, list
  std::string exp_id;
  // list
  std::string status;
  int limit = 0;
  bool mine = false;
  // create
  std::string name, plugin, command, script;
  std::string cpu_request, cpu_limit, memory_request, memory_limit;
  std::string image, run_timeout;  // the analysis' image and time limit (its --timeout)
  bool wait = false;
  // create, logs
  bool follow = false;
  // create, logs, wait
  std::string timeout;
  // logs
  int64_t tail = -1;
  int64_t limit_bytes = 0;
  // delete
  bool purge = false;
  // results
  std::string download;
};

absl::Status ExplainAnalysis(const absl::Status& s, const std::string& id) {
  return ExplainNotFound(s, "analysis " + id, "list the ids with `falcon analysis list`");
}

// The run-option flags shared by create and rerun (--wait-timeout, --timeout, the resource flags, --image),
// checked locally and added to `body`. Returns the exit code of a usage error, or nullopt.
std::optional<int> AddRunOptions(Context& ctx, const AnalysisOptions& o, json* body,
                                 std::optional<std::chrono::seconds>* wait_timeout) {
  if (!o.timeout.empty() && !o.wait && !o.follow) {
    return ctx.Usage("--wait-timeout only applies with --wait or --follow");
  }
  auto timeout = ParseTimeoutFlag(o.timeout, "--wait-timeout");
  if (!timeout.ok()) return ctx.Usage(std::string(timeout.status().message()));
  *wait_timeout = *timeout;
  auto run_timeout = ParseTimeoutFlag(o.run_timeout);
  if (!run_timeout.ok()) return ctx.Usage(std::string(run_timeout.status().message()));
  if (*run_timeout && (*run_timeout)->count() <= 0) {
    return ctx.Usage("--timeout " + o.run_timeout + " must be longer than 0s (leave it out for the default)");
  }
  json resources = json::object();
  std::optional<int64_t> cpu_req, cpu_lim, mem_req, mem_lim;
  struct Q {
    const char* flag;
    const char* field;
    const std::string* value;
    bool cpu;
    std::optional<int64_t>* parsed;
  };
  for (const Q& q : {Q{"--cpu-request", "cpu_request", &o.cpu_request, true, &cpu_req},
                     Q{"--cpu-limit", "cpu_limit", &o.cpu_limit, true, &cpu_lim},
                     Q{"--memory-request", "memory_request", &o.memory_request, false, &mem_req},
                     Q{"--memory-limit", "memory_limit", &o.memory_limit, false, &mem_lim}}) {
    if (q.value->empty()) continue;
    auto v = q.cpu ? ParseCpuMillis(*q.value) : ParseMemoryBytes(*q.value);
    if (!v.ok()) {
      return ctx.Usage(std::string("invalid quantity for ") + q.flag + ": " + std::string(v.status().message()));
    }
    *q.parsed = *v;
    resources[q.field] = *q.value;
  }
  if (cpu_req && cpu_lim && *cpu_req > *cpu_lim) {
    return ctx.Usage("--cpu-request " + o.cpu_request + " is more than --cpu-limit " + o.cpu_limit +
                     ": the request must not exceed the limit");
  }
  if (mem_req && mem_lim && *mem_req > *mem_lim) {
    return ctx.Usage("--memory-request " + o.memory_request + " is more than --memory-limit " + o.memory_limit +
                     ": the request must not exceed the limit");
  }
  if (!resources.empty()) (*body)["resource_override"] = resources;
  if (!o.image.empty()) (*body)["image"] = o.image;
  if (*run_timeout) (*body)["timeout_seconds"] = (*run_timeout)->count();
  return std::nullopt;
}

// After a create or rerun: prints the new id, then follows or waits as asked.
int PrintAndWait(Context& ctx, const AnalysisOptions& o, const std::string& id, MonoTime start,
                 std::optional<std::chrono::seconds> timeout) {
  if (o.output == "json") {
    ordered_json j;
    j["analysis_id"] = id;
    ctx.PrintJson(j);
  } else {
    ctx.out() << id << "\n";
  }
  ctx.out().flush();
  if (o.follow) {
    bool timed_out = false;
    auto final_record = FollowLogs(ctx, id, start, timeout, &timed_out);
    if (!final_record.ok()) return ctx.Fail(final_record.status());
    if (timed_out) {
      ctx.err() << "analysis " << id << " did not end within " << o.timeout
                << "; it keeps running: `falcon analysis logs -f " << id << "` or `falcon analysis cancel " << id
                << "`\n";
      return kExitTimeout;
    }
    return ExitForFinal(ctx, *final_record, start);
  }
  if (o.wait) return WaitUntilTerminal(ctx, id, start, timeout, o.timeout);
  return kExitOk;
}

int Create(Context& ctx, const AnalysisOptions& o) {
  // Everything that can be checked locally is checked before anything is sent.
  if (!o.plugin.empty() && !o.command.empty()) {
    return ctx.Usage("conflicting flags: --plugin and --command cannot be used together; a plugin runs the "
                     "catalog's command, so give one or the other");
  }
  if (!o.plugin.empty() && !o.script.empty()) {
    return ctx.Usage("conflicting flags: --plugin and --script cannot be used together; run the script with "
                     "--script FILE [--command CMD]");
  }
  if (o.plugin.empty() && o.command.empty() && o.script.empty()) {
    return ctx.Usage(
        "nothing to run: give --plugin NAME (see `falcon plugin list`), --command CMD or --script FILE");
  }
  json body = {{"exp_id", o.exp_id}, {"analysis_type", "online"}};
  std::optional<std::chrono::seconds> timeout;
  if (auto code = AddRunOptions(ctx, o, &body, &timeout)) return *code;
  std::string command = o.command;
  std::string name = o.name;
  if (!o.script.empty()) {
    auto script = ReadScript(o.script);
    if (!script.ok()) return ctx.Usage(std::string(script.status().message()));
    body["script_content"] = script->content;
    body["script_name"] = script->name;
    if (command.empty()) {
      const std::string& n = script->name;
      bool py = n.size() > 3 && n.substr(n.size() - 3) == ".py";
      command = std::string(py ? "python3" : "sh") + " \"$FALCON_SCRIPT\"";
    }
    if (name.empty()) name = script->name;
  }
  if (!o.plugin.empty()) body["plugin_name"] = o.plugin;
  if (!command.empty()) body["command"] = command;
  if (name.empty()) name = !o.plugin.empty() ? o.plugin : OneLine(command).substr(0, 40);
  body["name"] = name;

  auto client = ctx.Client();
  if (!client.ok()) return ctx.Fail(client.status());
  MonoTime start = ctx.MonotonicNow();
  auto r = (*client)->Send("POST", "/v1/analyses", body);
  if (!r.ok()) {
    absl::Status s = r.status();
    if (s.code() == absl::StatusCode::kNotFound) {
      s = absl::NotFoundError(std::string(s.message()) +
                              "; check the experiment id (`falcon exp list`) and the plugin name (`falcon plugin list`)");
    }
    return ctx.Fail(s);
  }
  std::string id = Str(*r, "analysis_id");
  if (id.empty()) return ctx.Fail(absl::InternalError("the server's answer has no analysis_id: " + r->dump()));
  return PrintAndWait(ctx, o, id, start, timeout);
}

int Rerun(Context& ctx, const AnalysisOptions& o) {
  json body = json::object();
  std::optional<std::chrono::seconds> timeout;
  if (auto code = AddRunOptions(ctx, o, &body, &timeout)) return *code;
  if (!o.name.empty()) body["name"] = o.name;
  auto client = ctx.Client();
  if (!client.ok()) return ctx.Fail(client.status());
  MonoTime start = ctx.MonotonicNow();
  auto r = (*client)->Send("POST", "/v1/analyses/" + ApiClient::EscapeSegment(o.id) + ":rerun", body);
  if (!r.ok()) return ctx.Fail(ExplainAnalysis(r.status(), o.id));
  std::string id = Str(*r, "analysis_id");
  if (id.empty()) return ctx.Fail(absl::InternalError("the server's answer has no analysis_id: " + r->dump()));
  if (o.output != "json") ctx.err() << "analysis " << id << " re-runs " << o.id << "\n";
  return PrintAndWait(ctx, o, id, start, timeout);
}

int Get(Context& ctx, const AnalysisOptions& o) {
  auto rec = GetAnalysis(ctx, o.id);
  if (!rec.ok()) return ctx.Fail(rec.status());
  ordered_json a = AnalysisJson(*rec);
  if (o.output == "json") {
    ctx.PrintJson(a);
    return kExitOk;
  }
  auto s = [&](const char* k) { return StringField(a, k); };
  const int64_t timeout = a["timeout_seconds"].get<int64_t>();
  const int64_t retries = a["infra_retries"].get<int64_t>();
  std::string resources;
  for (const auto& [k, v] : a["resource_override"].items()) {
    absl::StrAppend(&resources, resources.empty() ? "" : " ", k, "=", v.get<std::string>());
  }
  ctx.PrintDetails({
      {"ID", s("analysis_id")},          {"Name", s("name")},
      {"Exp", s("exp_id")},              {"Type", s("analysis_type")},
      {"Artifact", s("artifact_id")},    {"Plugin", s("plugin_name")},
      {"Status", s("status")},           {"Command", Str(*rec, "command")},
      {"Script", s("script_name")},      {"Results", s("result_gcs_path")},
      {"Image", s("image")},
      {"Timeout", timeout > 0 ? HumanDuration(std::chrono::seconds(timeout)) : ""},
      {"Resources", resources},
      {"Rerun of", s("rerun_of")},
      {"Retries", retries > 0 ? absl::StrCat(retries, " (after infrastructure failures)") : ""},
      {"Error", Str(*rec, "error_message")},
      {"Created", a["created_at"].is_string() ? s("created_at") + " (" + ctx.Age(*rec, "created_at") + " ago)" : ""},
      {"Updated", a["updated_at"].is_string() ? s("updated_at") : ""},
      {"Purge after", a["purge_after"].is_string() ? s("purge_after") + " (" + ctx.Until(*rec, "purge_after") +
                                                          "; record, logs and results are deleted then)"
                                                    : ""},
  });
  return kExitOk;
}

int List(Context& ctx, const AnalysisOptions& o) {
  auto client = ctx.Client();
  if (!client.ok()) return ctx.Fail(client.status());
  ListRequest req;
  req.path = "/v1/analyses";
  if (!o.exp_id.empty()) req.filters.push_back({"exp_id", o.exp_id});
  if (!o.status.empty()) req.filters.push_back({"status", o.status});
  if (o.mine) req.filters.push_back({"mine", "true"});
  req.limit = o.limit;
  req.page_size = kListPageSize;
  req.items = [](const json& r) -> const json& {
    static const json kNone = json::array();
    return r.contains("analyses") && r["analyses"].is_array() ? r["analyses"] : kNone;
  };
  auto records = ListAll(**client, req);
  if (!records.ok()) return ctx.Fail(records.status());
  if (o.output == "json") {
    PrintJsonList(ctx, "analyses", *records, AnalysisJson);
    return kExitOk;
  }
  if (records->empty()) {
    ctx.err() << "No analyses found.\n";
    return kExitOk;
  }
  bool wide = o.output == "wide";
  // On a narrow terminal TYPE goes first, then PLUGIN, then AGE.
  std::vector<Column> columns = {{"ANALYSIS ID"},   {"NAME", true},   {"EXP", true}, {"TYPE", false, 3},
                                 {"PLUGIN", true, 2}, {"STATUS"},       {"AGE", false, 1}};
  if (wide) columns.insert(columns.end(), {{"ARTIFACT", true}, {"COMMAND", true}, {"ERROR", true}});
  // A server with authentication records the creator: -o wide shows it.
  bool owners = false;
  for (const auto& r : *records) owners = owners || (r.contains("created_by") && r["created_by"].is_string());
  if (wide && owners) columns.push_back({"CREATED BY", true});
  Table t = MakeTable(columns);
  for (const auto& r : *records) {
    ordered_json a = AnalysisJson(r);
    std::vector<std::string> row = {a["analysis_id"], a["name"],   a["exp_id"],          a["analysis_type"],
                                    a["plugin_name"], a["status"], ctx.Age(r, "created_at")};
    if (wide) row.insert(row.end(), {a["artifact_id"], a["command"], a["error_message"]});
    if (wide && owners) row.push_back(StringField(a, "created_by"));
    t.AddRow(DashEmpty(std::move(row)));
  }
  ctx.PrintTable(t);
  return kExitOk;
}

int Cancel(Context& ctx, const AnalysisOptions& o) {
  auto client = ctx.Client();
  if (!client.ok()) return ctx.Fail(client.status());
  auto r = (*client)->Send("POST", "/v1/analyses/" + ApiClient::EscapeSegment(o.id) + ":cancel", json::object());
  if (!r.ok()) return ctx.Fail(ExplainAnalysis(r.status(), o.id));
  auto rec = GetAnalysis(ctx, o.id);
  if (rec.ok()) {
    std::string state = AnalysisStatus(*rec);
    if (state != "cancelled" && IsTerminalStatus(state)) {
      ctx.out() << "analysis " << o.id << " had already " << (state == "succeeded" ? "succeeded" : "failed")
                << "; nothing to cancel\n";
      return kExitOk;
    }
  }
  ctx.out() << "analysis " << o.id << " cancelled (its logs and partial results are kept)\n";
  return kExitOk;
}

int Delete(Context& ctx, const AnalysisOptions& o) {
  auto client = ctx.Client();
  if (!client.ok()) return ctx.Fail(client.status());
  Query q;
  if (o.purge) q.push_back({"purge", "true"});
  auto r = (*client)->Send("DELETE", "/v1/analyses/" + ApiClient::EscapeSegment(o.id), nullptr, q);
  if (!r.ok()) return ctx.Fail(ExplainAnalysis(r.status(), o.id));
  ctx.out() << "analysis " << o.id << " deleted" << (o.purge ? ", with its logs and results" : "") << "\n";
  return kExitOk;
}

int Logs(Context& ctx, const AnalysisOptions& o) {
  auto client = ctx.Client();
  if (!client.ok()) return ctx.Fail(client.status());
  if (!o.timeout.empty() && !o.follow) return ctx.Usage("--timeout only applies with --follow");
  auto timeout = ParseTimeoutFlag(o.timeout);
  if (!timeout.ok()) return ctx.Usage(std::string(timeout.status().message()));
  if (o.tail < -1) return ctx.Usage("--tail must be 0 or more lines (-1: the whole log)");
  if (o.limit_bytes < 0) return ctx.Usage("--limit-bytes must be 1 or more");
  if (o.follow) {
    if (o.limit_bytes > 0) return ctx.Usage("--limit-bytes does not apply with --follow");
    bool timed_out = false;
    auto rec = FollowLogs(ctx, o.id, ctx.MonotonicNow(), *timeout, &timed_out, o.tail);
    if (!rec.ok()) return ctx.Fail(rec.status());
    if (timed_out) {
      ctx.err() << "stopped following after " << o.timeout << "; analysis " << o.id << " is still running\n";
      return kExitTimeout;
    }
    return kExitOk;
  }
  // Chunk by chunk (the server sends at most 4 MiB at a time), up to what the log holds now, or
  // --limit-bytes.
  int64_t offset = 0, written = 0;
  for (bool first = true;; first = false) {
    const int64_t want = o.limit_bytes > 0 ? o.limit_bytes - written : 0;
    auto chunk = (*client)->GetLogs(o.id, offset, want, first ? o.tail : -1);
    if (!chunk.ok()) {
      return ctx.Fail(ExplainNotFound(chunk.status(), "log of analysis " + o.id,
                                      "check the id with `falcon analysis get " + o.id +
                                          "`; a pending analysis has no log yet"));
    }
    ctx.out().write(chunk->content.data(), static_cast<std::streamsize>(chunk->content.size()));
    written += static_cast<int64_t>(chunk->content.size());
    if (chunk->content.empty() || chunk->complete) break;
    if (o.limit_bytes > 0 && written >= o.limit_bytes) break;
    offset = chunk->next_offset;
  }
  ctx.out().flush();
  return kExitOk;
}

int Wait(Context& ctx, const AnalysisOptions& o) {
  auto timeout = ParseTimeoutFlag(o.timeout);
  if (!timeout.ok()) return ctx.Usage(std::string(timeout.status().message()));
  return WaitUntilTerminal(ctx, o.id, ctx.MonotonicNow(), *timeout, o.timeout);
}

int Results(Context& ctx, const AnalysisOptions& o) {
  auto client = ctx.Client();
  if (!client.ok()) return ctx.Fail(client.status());
  std::string base = "/v1/analyses/" + ApiClient::EscapeSegment(o.id) + "/results";
  auto r = (*client)->Get(base);
  if (!r.ok()) return ctx.Fail(ExplainAnalysis(r.status(), o.id));
  std::vector<ResultFile> files = ParseResults(*r);
  if (!o.download.empty()) return DownloadResults(ctx, **client, base, files, o.download);
  if (o.output == "json") {
    ctx.PrintJson(ResultsJson(o.id, files));
    return kExitOk;
  }
  if (files.empty()) {
    ctx.err() << "analysis " << o.id << " has no result files yet\n";
    return kExitOk;
  }
  bool wide = o.output == "wide";
  std::vector<std::string> headers = {"NAME", "SIZE"};
  if (wide) headers.push_back("URI");
  Table t(headers, {true, false, true});
  for (const auto& f : files) {
    std::vector<std::string> row = {f.name, f.size >= 0 ? HumanBytes(f.size) : "-"};
    if (wide) row.push_back(f.uri.empty() ? "-" : f.uri);
    t.AddRow(row);
  }
  ctx.PrintTable(t);
  return kExitOk;
}

// The flags create and rerun share: resources, image, time limit, waiting.
void AddRunFlags(CLI::App* c, AnalysisOptions* o) {
  c->add_option("--cpu-request", o->cpu_request, "CPU request, a Kubernetes quantity (250m, 1)")->type_name("Q");
  c->add_option("--cpu-limit", o->cpu_limit, "CPU limit, a Kubernetes quantity")->type_name("Q");
  c->add_option("--memory-request", o->memory_request, "Memory request (512Mi, 2Gi)")->type_name("Q");
  c->add_option("--memory-limit", o->memory_limit, "Memory limit (512Mi, 2Gi)")->type_name("Q");
  c->add_flag("--wait", o->wait, "Show state changes until the analysis ends; exit 0 only if it succeeded");
  c->add_flag("--follow", o->follow, "Stream the log live until the analysis ends; exit 0 only if it succeeded");
  c->add_option("--image", o->image,
                "Image to run in (Kubernetes), one this deployment allows; default: the plugin's or the "
                "deployment's")
      ->type_name("IMAGE");
  c->add_option("--timeout", o->run_timeout,
                "Time limit of the analysis (90s, 15m, 2h): it fails when it runs longer; default: the "
                "plugin's or the deployment's")
      ->type_name("DURATION");
  c->add_option("--wait-timeout", o->timeout, "With --wait/--follow: stop waiting after this long")
      ->type_name("DURATION");
}

}  // namespace

void RegisterAnalysisCommands(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<AnalysisOptions>();

  CLI::App* an = AddGroup(app, "analysis", "analyses", "Create, inspect, follow and cancel analyses");
  an->footer("Examples:\n  falcon analysis list\n  falcon analysis create --exp-id exp-1 --plugin hlo-stats --wait");

  {
    auto* c = AddCommand(an, ctx, "create", "Create an online analysis and print its id", o, Create);
    c->add_option("--exp-id", o->exp_id, "Experiment whose artifacts are analysed")->required()->type_name("EXP");
    c->add_option("--plugin", o->plugin, "Built-in plugin to run (see `falcon plugin list`)")->type_name("NAME");
    c->add_option("--command", o->command, "Shell command to run in the analysis Pod")->type_name("CMD");
    c->add_option("--script", o->script,
                  "Local script (at most 1 MiB) staged next to the command; without --command it is run with "
                  "python3 (*.py) or sh")
        ->type_name("FILE");
    c->add_option("--name", o->name, "Name of the analysis (default: the plugin or script name)");
    AddRunFlags(c, o.get());
    AddOutputFlag(c, &o->output);
    c->footer(
        "Examples:\n"
        "  falcon analysis create --exp-id exp-1 --plugin file-stats\n"
        "  falcon analysis create --exp-id exp-1 --script big.py --timeout 2h --image falcon-analysis:gpu\n"
        "  falcon analysis create --exp-id exp-1 --script analyze.py --wait --follow\n"
        "  falcon analysis create --exp-id exp-1 --command 'hlo-stats' --memory-limit 2Gi --wait\n"
        "  ID=$(falcon analysis create --exp-id exp-1 --plugin trace-summary)\n"
        "Exit codes with --wait/--follow: 0 succeeded, 3 failed, 4 cancelled, 5 timeout, 1 error.");
  }
  {
    auto* c = AddCommand(an, ctx, "rerun",
                         "Run an analysis again: a new analysis with the same inputs and run options, linked to "
                         "the old one; print its id",
                         o, Rerun);
    c->add_option("ID", o->id, "Analysis to run again")->required();
    c->add_option("--name", o->name, "Name of the new analysis (default: the old one's)");
    AddRunFlags(c, o.get());
    AddOutputFlag(c, &o->output);
    c->footer(
        "The new analysis is online and runs as you. Each flag replaces the old value; the rest is kept.\n"
        "Examples:\n"
        "  falcon analysis rerun 0193a5c2-8f00-7c2d-a1b0-5e4f3d2c1b0a --wait\n"
        "  falcon analysis rerun ID --memory-limit 8Gi --timeout 2h --follow\n"
        "Exit codes with --wait/--follow: 0 succeeded, 3 failed, 4 cancelled, 5 timeout, 1 error.");
  }
  {
    auto* c = AddCommand(an, ctx, "get", "Show one analysis", o, Get);
    c->add_option("ID", o->id, "Analysis id")->required();
    AddOutputFlag(c, &o->output);
    c->footer("Examples:\n  falcon analysis get 0193a5c2-...\n  falcon analysis get 0193a5c2-... -o json | jq -r .status");
  }
  {
    auto* c = AddCommand(an, ctx, "list", "List analyses, newest first (pages through all of them)", o, List);
    c->alias("ls");
    c->add_option("--exp-id", o->exp_id, "Only analyses of this experiment")->type_name("EXP");
    c->add_option("--status", o->status, "Only analyses in this state")
        ->check(CLI::IsMember(kAnalysisStates))
        ->type_name("STATE");
    c->add_option("--limit", o->limit, "Show at most N analyses (0: all)")->check(CLI::NonNegativeNumber);
    c->add_flag("--mine", o->mine, "Only analyses you created (the server knows you by your credential)");
    AddOutputFlag(c, &o->output);
    c->footer(
        "Examples:\n  falcon analysis list\n  falcon analysis list --exp-id exp-1 --status failed -o wide\n"
        "  falcon analysis list --mine --limit 20 -o json");
  }
  {
    auto* c = AddCommand(an, ctx, "cancel", "Cancel an analysis (its logs and partial results stay)", o, Cancel);
    c->add_option("ID", o->id, "Analysis id")->required();
    c->footer("Examples:\n  falcon analysis cancel 0193a5c2-...");
  }
  {
    auto* c = AddCommand(an, ctx, "delete",
                         "Delete an analysis record (and with --purge its logs and results)", o, Delete);
    c->alias("rm");
    c->add_option("ID", o->id, "Analysis id")->required();
    c->add_flag("--purge", o->purge, "Also delete its logs and result files from the object store");
    c->footer("Examples:\n  falcon analysis delete 0193a5c2-...\n  falcon analysis delete 0193a5c2-... --purge");
  }
  {
    auto* c = AddCommand(an, ctx, "logs", "Print the log of an analysis", o, Logs);
    c->add_option("ID", o->id, "Analysis id")->required();
    c->add_flag("-f,--follow", o->follow, "Stream the log until the analysis ends (no gap, no duplicate)");
    c->add_option("--tail", o->tail, "Only the last N lines (looked for in the last 4 MiB), then follow on with -f")
        ->type_name("N");
    c->add_option("--limit-bytes", o->limit_bytes, "Print at most N bytes of the log")->type_name("N");
    c->add_option("--timeout", o->timeout, "With --follow: give up after this long")->type_name("DURATION");
    c->footer(
        "Examples:\n  falcon analysis logs 0193a5c2-...\n  falcon analysis logs -f 0193a5c2-...\n"
        "  falcon analysis logs --tail 20 -f 0193a5c2-...\n  falcon analysis logs --limit-bytes 65536 0193a5c2-...");
  }
  {
    auto* c = AddCommand(an, ctx, "results", "List the result files of an analysis, or download them", o, Results);
    c->add_option("ID", o->id, "Analysis id")->required();
    c->add_option("--download", o->download, "Download every result file into DIR (created if missing)")
        ->type_name("DIR");
    AddOutputFlag(c, &o->output);
    c->footer("Examples:\n  falcon analysis results 0193a5c2-...\n  falcon analysis results 0193a5c2-... --download ./out");
  }
  {
    auto* c = AddCommand(an, ctx, "wait", "Wait until an analysis ends; exit 0 only if it succeeded", o, Wait);
    c->add_option("ID", o->id, "Analysis id")->required();
    c->add_option("--timeout", o->timeout, "Give up after this long (90s, 15m, 2h)")->type_name("DURATION");
    c->footer("Examples:\n  falcon analysis wait 0193a5c2-... --timeout 30m");
  }
}

}  // namespace falcon::cli
