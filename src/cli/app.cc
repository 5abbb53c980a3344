#include "cli/app.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <set>

#include "cli/completion.h"
#include "cli/model.h"
#include "cli/output.h"
#include "common/quantity.h"
#include "common/status.h"

namespace falcon::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int64_t kMaxScriptBytes = 1 << 20;  // 1 MiB, the API's limit on script_content
constexpr int kListPageSize = 100;
// Consecutive failed polls --wait/--follow tolerate (a restarting server or controller) before giving up.
constexpr int kMaxPollFailures = 30;

const std::vector<std::string> kAnalysisStates = {"pending", "running", "succeeded", "failed", "cancelled"};
const std::vector<std::string> kExpStates = {"pending", "running", "completed", "failed"};
const std::vector<std::string> kOutputFormats = {"table", "wide", "json"};

// Every flag value of every command; CLI11 binds into it.
struct Options {
  // global
  std::string server;
  std::string config;
  // shared
  std::string output = "table";
  std::string id;
  int limit = 0;
  std::string status;
  std::string exp_id;
  // analysis create
  std::string name, plugin, command, script;
  std::string cpu_request, cpu_limit, memory_request, memory_limit;
  bool wait = false, follow = false;
  std::string timeout;
  // analysis delete / logs / results
  bool purge = false;
  std::string download;
  // exp
  std::string artifact_type, uri, file, file_name;
  bool failed = false;
  // completion
  std::string shell;
};

std::string Join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

// "90", "90s", "15m", "2h", "1h30m" -> seconds; nullopt otherwise.
std::optional<std::chrono::seconds> ParseDuration(const std::string& s) {
  if (s.empty()) return std::nullopt;
  int64_t total = 0, cur = 0;
  bool digits = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      cur = cur * 10 + (c - '0');
      digits = true;
      if (cur > 100'000'000) return std::nullopt;
      continue;
    }
    if (!digits) return std::nullopt;
    int64_t mul = c == 's' ? 1 : c == 'm' ? 60 : c == 'h' ? 3600 : c == 'd' ? 86400 : 0;
    if (mul == 0) return std::nullopt;
    total += cur * mul;
    cur = 0;
    digits = false;
  }
  if (digits) total += cur;  // a trailing bare number counts as seconds
  return std::chrono::seconds(total);
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

bool ValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = s[i];
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

class Cli {
 public:
  explicit Cli(const Io& io) : io_(io), out_(*io.out), err_(*io.err) {}

  int Main(const std::vector<std::string>& args);

 private:
  // --- plumbing
  void Build(CLI::App& app);
  absl::StatusOr<ApiClient*> Client();
  int Fail(const absl::Status& s);
  int Usage(const std::string& msg);
  std::string Age(const json& obj, const char* key);
  void PrintJson(const ordered_json& j) { out_ << j.dump(2) << "\n"; }
  // Adds the id context to a NOT_FOUND answer.
  absl::Status Explain(const absl::Status& s, const std::string& what, const std::string& hint);

  // --- analysis
  int AnalysisCreate();
  int AnalysisGet();
  int AnalysisList();
  int AnalysisCancel();
  int AnalysisDelete();
  int AnalysisLogs();
  int AnalysisResults();
  int AnalysisWait();
  // Polls until the analysis is terminal, showing state changes on stderr; returns the exit code.
  int WaitUntilTerminal(const std::string& id, Time start, std::optional<std::chrono::seconds> timeout);
  // Streams the log to stdout until it is complete; returns the final record or an error.
  absl::StatusOr<json> FollowLogs(const std::string& id, Time start, std::optional<std::chrono::seconds> timeout,
                                  bool* timed_out);
  int ExitForFinal(const json& record, Time start);
  absl::StatusOr<json> GetAnalysis(const std::string& id);
  bool Sleep();  // sleeps one poll interval

  // --- plugins
  int PluginList();
  int PluginGet();

  // --- exps
  int ExpCreate();
  int ExpGet();
  int ExpList();
  int ExpComplete();
  int ExpAddArtifact();

  int Completion(CLI::App& app);

  const Io& io_;
  std::ostream& out_;
  std::ostream& err_;
  Options o_;
  std::function<int()> action_;
  std::unique_ptr<ApiClient> client_;
  CLI::App* root_ = nullptr;
};

// ------------------------------------------------------------------------------------------------
// Command tree

void AddOutput(CLI::App* cmd, std::string* output) {
  cmd->add_option("-o,--output", *output, "Output format: table, wide or json (json is stable for scripts)")
      ->check(CLI::IsMember(kOutputFormats))
      ->default_str("table");
}

void Cli::Build(CLI::App& app) {
  root_ = &app;
  app.description(
      "falcon: run and inspect Falcon data analyses through falcon-apiserver.\n"
      "The server address comes from --server, then $FALCON_SERVER, then `server:` in\n"
      "~/.config/falcon/config.yaml, then http://127.0.0.1:8080.");
  app.add_option("--server", o_.server, "falcon-apiserver address, e.g. http://127.0.0.1:8080")
      ->type_name("URL");
  app.add_option("--config", o_.config, "Config file (default ~/.config/falcon/config.yaml)")->type_name("FILE");
  app.require_subcommand(1);
  app.fallthrough();
  app.footer(
      "Examples:\n"
      "  falcon plugin list\n"
      "  falcon analysis create --exp-id exp-1 --plugin file-stats --wait\n"
      "  falcon analysis list --status running -o wide\n"
      "  source <(falcon completion bash)\n"
      "Run `falcon COMMAND --help` for the flags of each command.");

  auto leaf = [&](CLI::App* parent, const std::string& name, const std::string& desc, std::function<int()> fn) {
    CLI::App* c = parent->add_subcommand(name, desc);
    c->fallthrough();
    c->callback([this, fn] { action_ = fn; });
    return c;
  };

  // analysis
  CLI::App* an = app.add_subcommand("analysis", "Create, inspect, follow and cancel analyses");
  an->alias("analyses");
  an->require_subcommand(1);
  an->fallthrough();
  an->footer("Examples:\n  falcon analysis list\n  falcon analysis create --exp-id exp-1 --plugin hlo-stats --wait");

  {
    auto* c = leaf(an, "create", "Create an online analysis and print its id", [this] { return AnalysisCreate(); });
    c->add_option("--exp-id", o_.exp_id, "Experiment whose artifacts are analysed")->required()->type_name("EXP");
    c->add_option("--plugin", o_.plugin, "Built-in plugin to run (see `falcon plugin list`)")->type_name("NAME");
    c->add_option("--command", o_.command, "Shell command to run in the analysis Pod")->type_name("CMD");
    c->add_option("--script", o_.script,
                  "Local script (at most 1 MiB) staged next to the command; without --command it is run with "
                  "python3 (*.py) or sh")
        ->type_name("FILE");
    c->add_option("--name", o_.name, "Name of the analysis (default: the plugin or script name)");
    c->add_option("--cpu-request", o_.cpu_request, "CPU request, a Kubernetes quantity (250m, 1)")->type_name("Q");
    c->add_option("--cpu-limit", o_.cpu_limit, "CPU limit, a Kubernetes quantity")->type_name("Q");
    c->add_option("--memory-request", o_.memory_request, "Memory request (512Mi, 2Gi)")->type_name("Q");
    c->add_option("--memory-limit", o_.memory_limit, "Memory limit (512Mi, 2Gi)")->type_name("Q");
    c->add_flag("--wait", o_.wait, "Show state changes until the analysis ends; exit 0 only if it succeeded");
    c->add_flag("--follow", o_.follow, "Stream the log live until the analysis ends; exit 0 only if it succeeded");
    c->add_option("--timeout", o_.timeout, "With --wait/--follow: give up after this long (90s, 15m, 2h)")
        ->type_name("DURATION");
    AddOutput(c, &o_.output);
    c->footer(
        "Examples:\n"
        "  falcon analysis create --exp-id exp-1 --plugin file-stats\n"
        "  falcon analysis create --exp-id exp-1 --script analyze.py --wait --follow\n"
        "  falcon analysis create --exp-id exp-1 --command 'hlo-stats' --memory-limit 2Gi --wait\n"
        "  ID=$(falcon analysis create --exp-id exp-1 --plugin trace-summary)\n"
        "Exit codes with --wait/--follow: 0 succeeded, 3 failed, 4 cancelled, 5 timeout, 1 error.");
  }
  {
    auto* c = leaf(an, "get", "Show one analysis", [this] { return AnalysisGet(); });
    c->add_option("ID", o_.id, "Analysis id")->required();
    AddOutput(c, &o_.output);
    c->footer("Examples:\n  falcon analysis get 0193a5c2-...\n  falcon analysis get 0193a5c2-... -o json | jq -r .status");
  }
  {
    auto* c = leaf(an, "list", "List analyses, newest first (pages through all of them)", [this] { return AnalysisList(); });
    c->alias("ls");
    c->add_option("--exp-id", o_.exp_id, "Only analyses of this experiment")->type_name("EXP");
    c->add_option("--status", o_.status, "Only analyses in this state")
        ->check(CLI::IsMember(kAnalysisStates))
        ->type_name("STATE");
    c->add_option("--limit", o_.limit, "Show at most N analyses (0: all)")->check(CLI::NonNegativeNumber);
    AddOutput(c, &o_.output);
    c->footer(
        "Examples:\n  falcon analysis list\n  falcon analysis list --exp-id exp-1 --status failed -o wide\n"
        "  falcon analysis list --limit 20 -o json");
  }
  {
    auto* c = leaf(an, "cancel", "Cancel an analysis (its logs and partial results stay)", [this] { return AnalysisCancel(); });
    c->add_option("ID", o_.id, "Analysis id")->required();
    c->footer("Examples:\n  falcon analysis cancel 0193a5c2-...");
  }
  {
    auto* c = leaf(an, "delete", "Delete an analysis record (and with --purge its logs and results)",
                   [this] { return AnalysisDelete(); });
    c->alias("rm");
    c->add_option("ID", o_.id, "Analysis id")->required();
    c->add_flag("--purge", o_.purge, "Also delete its logs and result files from the object store");
    c->footer("Examples:\n  falcon analysis delete 0193a5c2-...\n  falcon analysis delete 0193a5c2-... --purge");
  }
  {
    auto* c = leaf(an, "logs", "Print the log of an analysis", [this] { return AnalysisLogs(); });
    c->add_option("ID", o_.id, "Analysis id")->required();
    c->add_flag("-f,--follow", o_.follow, "Stream the log until the analysis ends (no gap, no duplicate)");
    c->add_option("--timeout", o_.timeout, "With --follow: give up after this long")->type_name("DURATION");
    c->footer("Examples:\n  falcon analysis logs 0193a5c2-...\n  falcon analysis logs -f 0193a5c2-...");
  }
  {
    auto* c = leaf(an, "results", "List the result files of an analysis, or download them",
                   [this] { return AnalysisResults(); });
    c->add_option("ID", o_.id, "Analysis id")->required();
    c->add_option("--download", o_.download, "Download every result file into DIR (created if missing)")
        ->type_name("DIR");
    AddOutput(c, &o_.output);
    c->footer("Examples:\n  falcon analysis results 0193a5c2-...\n  falcon analysis results 0193a5c2-... --download ./out");
  }
  {
    auto* c = leaf(an, "wait", "Wait until an analysis ends; exit 0 only if it succeeded", [this] { return AnalysisWait(); });
    c->add_option("ID", o_.id, "Analysis id")->required();
    c->add_option("--timeout", o_.timeout, "Give up after this long (90s, 15m, 2h)")->type_name("DURATION");
    c->footer("Examples:\n  falcon analysis wait 0193a5c2-... --timeout 30m");
  }

  // plugin
  CLI::App* pl = app.add_subcommand("plugin", "Inspect the built-in plugins of the catalog");
  pl->alias("plugins");
  pl->require_subcommand(1);
  pl->fallthrough();
  {
    auto* c = leaf(pl, "list", "List the plugins", [this] { return PluginList(); });
    c->alias("ls");
    AddOutput(c, &o_.output);
    c->footer("Examples:\n  falcon plugin list\n  falcon plugin list -o wide");
  }
  {
    auto* c = leaf(pl, "get", "Show one plugin", [this] { return PluginGet(); });
    c->add_option("NAME", o_.id, "Plugin name")->required();
    AddOutput(c, &o_.output);
    c->footer("Examples:\n  falcon plugin get hlo-stats");
  }

  // exp
  CLI::App* ex = app.add_subcommand("exp", "Register experiments and their artifacts");
  ex->alias("exps");
  ex->require_subcommand(1);
  ex->fallthrough();
  {
    auto* c = leaf(ex, "create", "Register an experiment and print its id", [this] { return ExpCreate(); });
    c->add_option("--id", o_.id, "Experiment id (default: generated by the server)")->type_name("EXP");
    c->add_option("--name", o_.name, "Experiment name (default: the id)");
    c->add_option("--status", o_.status, "Initial state (default pending)")->check(CLI::IsMember(kExpStates));
    AddOutput(c, &o_.output);
    c->footer("Examples:\n  falcon exp create --id exp-1 --name 'llama profile'\n  EXP=$(falcon exp create --name nightly)");
  }
  {
    auto* c = leaf(ex, "get", "Show one experiment", [this] { return ExpGet(); });
    c->add_option("EXP", o_.id, "Experiment id")->required();
    AddOutput(c, &o_.output);
    c->footer("Examples:\n  falcon exp get exp-1");
  }
  {
    auto* c = leaf(ex, "add-artifact", "Add an artifact to an experiment (a URI, or a local file to upload)",
                   [this] { return ExpAddArtifact(); });
    c->add_option("EXP", o_.id, "Experiment id")->required();
    c->add_option("--uri", o_.uri, "Where the artifact already is (gs://..., file:///...)")->type_name("URI");
    c->add_option("--file", o_.file, "Local file to upload into the object store")->type_name("PATH");
    c->add_option("--type", o_.artifact_type,
                  "Artifact type: hlo, xplane, trace, file (default: from the name: *.xplane.pb -> xplane, "
                  "*.trace.json[.gz] -> trace, *hlo* -> hlo, else file)")
        ->type_name("TYPE");
    c->add_option("--as", o_.file_name, "With --file: the name to store it under (default: its base name)")
        ->type_name("NAME");
    AddOutput(c, &o_.output);
    c->footer(
        "Examples:\n"
        "  falcon exp add-artifact exp-1 --file ./host.xplane.pb\n"
        "  falcon exp add-artifact exp-1 --uri gs://bucket/exps/exp-1/hlo/ --type hlo");
  }
  {
    auto* c = leaf(ex, "complete", "Mark an experiment completed (offline analyses then start by themselves)",
                   [this] { return ExpComplete(); });
    c->add_option("EXP", o_.id, "Experiment id")->required();
    c->add_flag("--failed", o_.failed, "Mark it failed instead");
    c->footer("Examples:\n  falcon exp complete exp-1");
  }
  {
    auto* c = leaf(ex, "list", "List experiments", [this] { return ExpList(); });
    c->alias("ls");
    c->add_option("--status", o_.status, "Only experiments in this state")->check(CLI::IsMember(kExpStates));
    c->add_option("--limit", o_.limit, "Show at most N experiments (0: all)")->check(CLI::NonNegativeNumber);
    AddOutput(c, &o_.output);
    c->footer("Examples:\n  falcon exp list\n  falcon exp list --status completed -o json");
  }

  // completion
  {
    auto* c = app.add_subcommand("completion", "Print a shell completion script");
    c->add_option("SHELL", o_.shell, "Shell (bash)")->required()->check(CLI::IsMember({"bash"}));
    c->callback([this, &app] { action_ = [this, &app] { return Completion(app); }; });
    c->footer("Examples:\n  source <(falcon completion bash)\n  falcon completion bash > /etc/bash_completion.d/falcon");
  }
}

int Cli::Main(const std::vector<std::string>& args) {
  CLI::App app{"falcon", "falcon"};
  app.set_help_all_flag("--help-all", "Show the help of every command");
  Build(app);
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e, out_, err_);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e, out_, err_);
  } catch (const CLI::ParseError& e) {
    // An unknown word where a command was expected: name it and the commands that exist.
    CLI::App* cur = &app;
    while (true) {
      auto parsed = cur->get_subcommands();
      if (parsed.empty()) break;
      cur = parsed.front();
    }
    if (!cur->get_subcommands([](const CLI::App*) { return true; }).empty()) {
      for (const auto& word : app.remaining()) {
        if (word.empty() || word[0] == '-') continue;
        std::vector<std::string> names;
        for (const CLI::App* sub : cur->get_subcommands([](const CLI::App*) { return true; })) names.push_back(sub->get_name());
        std::string path = cur == &app ? "falcon" : "falcon " + cur->get_name();
        if (cur->get_parent() != nullptr && cur->get_parent() != &app) {
          path = "falcon " + cur->get_parent()->get_name() + " " + cur->get_name();
        }
        return Usage("unknown command `" + word + "` for `" + path + "`: use one of " + Join(names, ", ") +
                     " (see `" + path + " --help`)");
      }
    }
    if (app.remaining().empty() && std::string(e.what()).find("subcommand is required") != std::string::npos) {
      // A command group alone (`falcon analysis`): show what it offers.
      err_ << cur->help();
      return kExitUsage;
    }
    app.exit(e, out_, err_);
    return kExitUsage;
  }
  if (!action_) return Usage("no command given");
  try {
    return action_();
  } catch (const std::exception& e) {
    err_ << "error: " << e.what() << "\n";
    return kExitError;
  }
}

// ------------------------------------------------------------------------------------------------
// Plumbing

absl::StatusOr<ApiClient*> Cli::Client() {
  if (client_) return client_.get();
  std::string config = o_.config.empty() ? DefaultConfigPath(io_.env) : o_.config;
  FALCON_ASSIGN_OR_RETURN(ServerChoice choice, ResolveServer(o_.server, io_.env, config, !o_.config.empty()));
  const std::string& a = choice.address;
  if (a.find("://") != std::string::npos && a.rfind("http://", 0) != 0 && a.rfind("https://", 0) != 0) {
    return absl::InvalidArgumentError("server address " + a + " (from " + choice.source +
                                      ") must start with http:// or https://");
  }
  client_ = std::make_unique<ApiClient>(a, io_.client_options);
  return client_.get();
}

int Cli::Fail(const absl::Status& s) {
  err_ << "error: " << s.message() << "\n";
  return kExitError;
}

int Cli::Usage(const std::string& msg) {
  err_ << "error: " << msg << "\n";
  return kExitUsage;
}

absl::Status Cli::Explain(const absl::Status& s, const std::string& what, const std::string& hint) {
  if (s.code() != absl::StatusCode::kNotFound) return s;
  return absl::NotFoundError(what + " not found (" + std::string(s.message()) + "); " + hint);
}

std::string Cli::Age(const json& obj, const char* key) {
  auto t = Timestamp(obj, key);
  if (!t) return "-";
  return HumanDuration(std::chrono::duration_cast<std::chrono::seconds>(io_.clock->Now() - *t));
}

bool Cli::Sleep() {
  io_.clock->SleepFor(io_.poll_interval, [] { return false; });
  return true;
}

absl::StatusOr<json> Cli::GetAnalysis(const std::string& id) {
  FALCON_ASSIGN_OR_RETURN(ApiClient * c, Client());
  auto r = c->Get("/v1/analyses/" + ApiClient::EscapeSegment(id));
  if (!r.ok()) {
    return Explain(r.status(), "analysis " + id, "list the ids with `falcon analysis list`");
  }
  return *r;
}

// ------------------------------------------------------------------------------------------------
// analysis

int Cli::AnalysisCreate() {
  // Everything that can be checked locally is checked before anything is sent.
  if (!o_.plugin.empty() && !o_.command.empty()) {
    return Usage("conflicting flags: --plugin and --command cannot be used together; a plugin runs the "
                 "catalog's command, so give one or the other");
  }
  if (!o_.plugin.empty() && !o_.script.empty()) {
    return Usage("conflicting flags: --plugin and --script cannot be used together; run the script with "
                 "--script FILE [--command CMD]");
  }
  if (o_.plugin.empty() && o_.command.empty() && o_.script.empty()) {
    return Usage("nothing to run: give --plugin NAME (see `falcon plugin list`), --command CMD or --script FILE");
  }
  std::optional<std::chrono::seconds> timeout;
  if (!o_.timeout.empty()) {
    if (!o_.wait && !o_.follow) return Usage("--timeout only applies with --wait or --follow");
    timeout = ParseDuration(o_.timeout);
    if (!timeout) return Usage("invalid --timeout " + o_.timeout + ": use a duration like 90s, 15m or 2h");
  }
  json resources = json::object();
  std::optional<int64_t> cpu_req, cpu_lim, mem_req, mem_lim;
  struct Q {
    const char* flag;
    const char* field;
    std::string* value;
    bool cpu;
    std::optional<int64_t>* parsed;
  };
  for (const Q& q : {Q{"--cpu-request", "cpu_request", &o_.cpu_request, true, &cpu_req},
                     Q{"--cpu-limit", "cpu_limit", &o_.cpu_limit, true, &cpu_lim},
                     Q{"--memory-request", "memory_request", &o_.memory_request, false, &mem_req},
                     Q{"--memory-limit", "memory_limit", &o_.memory_limit, false, &mem_lim}}) {
    if (q.value->empty()) continue;
    auto v = q.cpu ? ParseCpuMillis(*q.value) : ParseMemoryBytes(*q.value);
    if (!v.ok()) {
      return Usage(std::string("invalid quantity for ") + q.flag + ": " + std::string(v.status().message()));
    }
    *q.parsed = *v;
    resources[q.field] = *q.value;
  }
  if (cpu_req && cpu_lim && *cpu_req > *cpu_lim) {
    return Usage("--cpu-request " + o_.cpu_request + " is more than --cpu-limit " + o_.cpu_limit +
                 ": the request must not exceed the limit");
  }
  if (mem_req && mem_lim && *mem_req > *mem_lim) {
    return Usage("--memory-request " + o_.memory_request + " is more than --memory-limit " + o_.memory_limit +
                 ": the request must not exceed the limit");
  }

  json body = {{"exp_id", o_.exp_id}, {"analysis_type", "online"}};
  std::string command = o_.command;
  std::string name = o_.name;
  if (!o_.script.empty()) {
    std::error_code ec;
    if (!fs::is_regular_file(o_.script, ec)) {
      return Usage("script " + o_.script + " is not a readable file: check the path");
    }
    auto size = static_cast<int64_t>(fs::file_size(o_.script, ec));
    if (ec) return Usage("cannot read script " + o_.script + ": " + ec.message());
    if (size > kMaxScriptBytes) {
      return Usage("script " + o_.script + " is " + std::to_string(size) + " bytes (" + HumanBytes(size) +
                   "), over the limit of 1 MiB (1048576 bytes): make it smaller, or upload large data with "
                   "`falcon exp add-artifact` and read it from $FALCON_INPUT_DIR");
    }
    std::ifstream in(o_.script, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) return Usage("cannot read script " + o_.script);
    if (!ValidUtf8(text)) {
      return Usage("script " + o_.script + " is not UTF-8 text: only text scripts can be submitted");
    }
    std::string script_name = fs::path(o_.script).filename().string();
    body["script_content"] = text;
    body["script_name"] = script_name;
    if (command.empty()) {
      bool py = script_name.size() > 3 && script_name.substr(script_name.size() - 3) == ".py";
      command = std::string(py ? "python3" : "sh") + " \"$FALCON_SCRIPT\"";
    }
    if (name.empty()) name = script_name;
  }
  if (!o_.plugin.empty()) body["plugin_name"] = o_.plugin;
  if (!command.empty()) body["command"] = command;
  if (name.empty()) name = !o_.plugin.empty() ? o_.plugin : OneLine(command).substr(0, 40);
  body["name"] = name;
  if (!resources.empty()) body["resource_override"] = resources;

  auto client = Client();
  if (!client.ok()) return Fail(client.status());
  Time start = io_.clock->Now();
  auto r = (*client)->Send("POST", "/v1/analyses", body);
  if (!r.ok()) {
    absl::Status s = r.status();
    if (s.code() == absl::StatusCode::kNotFound) {
      s = absl::NotFoundError(std::string(s.message()) +
                              "; check the experiment id (`falcon exp list`) and the plugin name (`falcon plugin list`)");
    }
    return Fail(s);
  }
  std::string id = Str(*r, "analysis_id");
  if (id.empty()) return Fail(absl::InternalError("the server's answer has no analysis_id: " + r->dump()));
  if (o_.output == "json") {
    ordered_json j;
    j["analysis_id"] = id;
    PrintJson(j);
  } else {
    out_ << id << "\n";
  }
  out_.flush();
  if (o_.follow) {
    bool timed_out = false;
    auto final_record = FollowLogs(id, start, timeout, &timed_out);
    if (!final_record.ok()) return Fail(final_record.status());
    if (timed_out) {
      err_ << "analysis " << id << " did not end within " << o_.timeout
           << "; it keeps running: `falcon analysis logs -f " << id << "` or `falcon analysis cancel " << id
           << "`\n";
      return kExitTimeout;
    }
    return ExitForFinal(*final_record, start);
  }
  if (o_.wait) return WaitUntilTerminal(id, start, timeout);
  return kExitOk;
}

int Cli::ExitForFinal(const json& record, Time start) {
  std::string state = AnalysisStatus(record);
  auto elapsed = std::chrono::duration_cast<std::chrono::seconds>(io_.clock->Now() - start);
  err_ << "analysis " << Str(record, "analysis_id") << ": " << state << " after " << HumanDuration(elapsed);
  std::string msg = Str(record, "error_message");
  if (!msg.empty() && state != "succeeded") err_ << ": " << OneLine(msg);
  err_ << "\n";
  if (state == "succeeded") return kExitOk;
  if (state == "cancelled") return kExitAnalysisCancelled;
  return kExitAnalysisFailed;
}

int Cli::WaitUntilTerminal(const std::string& id, Time start, std::optional<std::chrono::seconds> timeout) {
  std::string last_state;
  int failures = 0;
  bool line_open = false;
  while (true) {
    auto rec = GetAnalysis(id);
    auto elapsed = std::chrono::duration_cast<std::chrono::seconds>(io_.clock->Now() - start);
    if (!rec.ok()) {
      if (rec.status().code() == absl::StatusCode::kUnavailable && ++failures <= kMaxPollFailures) {
        Sleep();
        continue;
      }
      if (line_open) err_ << "\n";
      return Fail(rec.status());
    }
    failures = 0;
    std::string state = AnalysisStatus(*rec);
    if (IsTerminalStatus(state)) {
      if (line_open) err_ << "\r\033[K";
      return ExitForFinal(*rec, start);
    }
    if (io_.err_is_tty) {
      // One line, rewritten in place.
      err_ << "\r\033[K" << "analysis " << id << ": " << state << " (" << HumanDuration(elapsed) << ")";
      err_.flush();
      line_open = true;
    } else if (state != last_state) {
      err_ << "analysis " << id << ": " << state << " (" << HumanDuration(elapsed) << ")\n";
      err_.flush();
    }
    last_state = state;
    if (timeout && elapsed >= *timeout) {
      if (line_open) err_ << "\n";
      err_ << "analysis " << id << " is still " << state << " after " << o_.timeout
           << "; it keeps running: `falcon analysis wait " << id << "` or `falcon analysis cancel " << id << "`\n";
      return kExitTimeout;
    }
    Sleep();
  }
}

absl::StatusOr<json> Cli::FollowLogs(const std::string& id, Time start, std::optional<std::chrono::seconds> timeout,
                                     bool* timed_out) {
  FALCON_ASSIGN_OR_RETURN(ApiClient * c, Client());
  int64_t offset = 0;
  int failures = 0;
  *timed_out = false;
  while (true) {
    auto chunk = c->GetLogs(id, offset);
    if (!chunk.ok()) {
      absl::Status s = chunk.status();
      if (s.code() == absl::StatusCode::kNotFound) {
        // No log yet, or an unknown id: the record tells which.
        FALCON_ASSIGN_OR_RETURN(json rec, GetAnalysis(id));
        if (IsTerminalStatus(AnalysisStatus(rec))) return rec;
      } else if (s.code() != absl::StatusCode::kUnavailable || ++failures > kMaxPollFailures) {
        return s;
      }
    } else {
      failures = 0;
      if (!chunk->content.empty()) {
        out_.write(chunk->content.data(), static_cast<std::streamsize>(chunk->content.size()));
        out_.flush();
      }
      if (chunk->next_offset >= offset) offset = chunk->next_offset;
      if (chunk->complete) return GetAnalysis(id);
      if (!chunk->has_complete_header && chunk->content.empty()) {
        // A server without X-Falcon-Complete: stop once the record is terminal and the log is drained.
        FALCON_ASSIGN_OR_RETURN(json rec, GetAnalysis(id));
        if (IsTerminalStatus(AnalysisStatus(rec))) {
          auto last = c->GetLogs(id, offset);
          if (last.ok()) {
            out_ << last->content;
            out_.flush();
          }
          return rec;
        }
      }
      if (!chunk->content.empty()) continue;  // more may be waiting: read again at once
    }
    if (timeout && io_.clock->Now() - start >= *timeout) {
      *timed_out = true;
      return json::object();
    }
    Sleep();
  }
}

int Cli::AnalysisGet() {
  auto rec = GetAnalysis(o_.id);
  if (!rec.ok()) return Fail(rec.status());
  ordered_json a = AnalysisJson(*rec);
  if (o_.output == "json") {
    PrintJson(a);
    return kExitOk;
  }
  auto s = [&](const char* k) { return a[k].is_string() ? a[k].get<std::string>() : std::string(); };
  std::vector<std::pair<std::string, std::string>> kv = {
      {"ID", s("analysis_id")},          {"Name", s("name")},
      {"Exp", s("exp_id")},              {"Type", s("analysis_type")},
      {"Artifact", s("artifact_id")},    {"Plugin", s("plugin_name")},
      {"Status", s("status")},           {"Command", Str(*rec, "command")},
      {"Script", s("script_name")},      {"Results", s("result_gcs_path")},
      {"Error", Str(*rec, "error_message")},
      {"Created", a["created_at"].is_string() ? s("created_at") + " (" + Age(*rec, "created_at") + " ago)" : ""},
      {"Updated", a["updated_at"].is_string() ? s("updated_at") : ""},
  };
  out_ << RenderDetails(kv, io_.terminal_width);
  return kExitOk;
}

int Cli::AnalysisList() {
  auto client = Client();
  if (!client.ok()) return Fail(client.status());
  std::vector<json> records;
  std::string token;
  std::set<std::string> seen_tokens;
  while (true) {
    Query q;
    if (!o_.exp_id.empty()) q.push_back({"exp_id", o_.exp_id});
    if (!o_.status.empty()) q.push_back({"status", o_.status});
    int page = kListPageSize;
    if (o_.limit > 0) page = std::min<int>(page, o_.limit - static_cast<int>(records.size()));
    q.push_back({"page_size", std::to_string(page)});
    if (!token.empty()) q.push_back({"page_token", token});
    auto r = (*client)->Get("/v1/analyses", q);
    if (!r.ok()) return Fail(r.status());
    if (r->contains("analyses") && (*r)["analyses"].is_array()) {
      for (auto& a : (*r)["analyses"]) records.push_back(a);
    }
    token = Str(*r, "next_page_token");
    if (o_.limit > 0 && static_cast<int>(records.size()) >= o_.limit) {
      records.resize(static_cast<size_t>(o_.limit));
      break;
    }
    if (token.empty() || !seen_tokens.insert(token).second) break;
  }
  if (o_.output == "json") {
    ordered_json j;
    j["analyses"] = ordered_json::array();
    for (const auto& r : records) j["analyses"].push_back(AnalysisJson(r));
    PrintJson(j);
    return kExitOk;
  }
  if (records.empty()) {
    err_ << "No analyses found.\n";
    return kExitOk;
  }
  bool wide = o_.output == "wide";
  std::vector<std::string> headers = {"ANALYSIS ID", "NAME", "EXP", "TYPE", "PLUGIN", "STATUS", "AGE"};
  std::vector<bool> shrink = {false, true, true, false, true, false, false};
  std::vector<int> drop = {0, 0, 0, 3, 2, 0, 1};
  if (wide) {
    headers.insert(headers.end(), {"ARTIFACT", "COMMAND", "ERROR"});
    shrink.insert(shrink.end(), {true, true, true});
  }
  Table t(headers, shrink, drop);
  for (const auto& r : records) {
    ordered_json a = AnalysisJson(r);
    std::vector<std::string> row = {a["analysis_id"], a["name"], a["exp_id"], a["analysis_type"],
                                    a["plugin_name"], a["status"], Age(r, "created_at")};
    if (wide) row.insert(row.end(), {a["artifact_id"], a["command"], a["error_message"]});
    for (auto& c : row) {
      if (c.empty()) c = "-";
    }
    t.AddRow(row);
  }
  out_ << t.Render(io_.terminal_width);
  return kExitOk;
}

int Cli::AnalysisCancel() {
  auto client = Client();
  if (!client.ok()) return Fail(client.status());
  auto r = (*client)->Send("POST", "/v1/analyses/" + ApiClient::EscapeSegment(o_.id) + ":cancel", json::object());
  if (!r.ok()) {
    return Fail(Explain(r.status(), "analysis " + o_.id, "list the ids with `falcon analysis list`"));
  }
  auto rec = GetAnalysis(o_.id);
  if (rec.ok()) {
    std::string state = AnalysisStatus(*rec);
    if (state != "cancelled" && IsTerminalStatus(state)) {
      out_ << "analysis " << o_.id << " had already " << (state == "succeeded" ? "succeeded" : "failed")
           << "; nothing to cancel\n";
      return kExitOk;
    }
  }
  out_ << "analysis " << o_.id << " cancelled (its logs and partial results are kept)\n";
  return kExitOk;
}

int Cli::AnalysisDelete() {
  auto client = Client();
  if (!client.ok()) return Fail(client.status());
  Query q;
  if (o_.purge) q.push_back({"purge", "true"});
  auto r = (*client)->Send("DELETE", "/v1/analyses/" + ApiClient::EscapeSegment(o_.id), nullptr, q);
  if (!r.ok()) {
    return Fail(Explain(r.status(), "analysis " + o_.id, "list the ids with `falcon analysis list`"));
  }
  out_ << "analysis " << o_.id << " deleted" << (o_.purge ? ", with its logs and results" : "") << "\n";
  return kExitOk;
}

int Cli::AnalysisLogs() {
  auto client = Client();
  if (!client.ok()) return Fail(client.status());
  std::optional<std::chrono::seconds> timeout;
  if (!o_.timeout.empty()) {
    if (!o_.follow) return Usage("--timeout only applies with --follow");
    timeout = ParseDuration(o_.timeout);
    if (!timeout) return Usage("invalid --timeout " + o_.timeout + ": use a duration like 90s, 15m or 2h");
  }
  if (o_.follow) {
    bool timed_out = false;
    auto rec = FollowLogs(o_.id, io_.clock->Now(), timeout, &timed_out);
    if (!rec.ok()) return Fail(rec.status());
    if (timed_out) {
      err_ << "stopped following after " << o_.timeout << "; analysis " << o_.id << " is still running\n";
      return kExitTimeout;
    }
    return kExitOk;
  }
  auto chunk = (*client)->GetLogs(o_.id, 0);
  if (!chunk.ok()) {
    return Fail(Explain(chunk.status(), "log of analysis " + o_.id,
                        "check the id with `falcon analysis get " + o_.id + "`; a pending analysis has no log yet"));
  }
  out_ << chunk->content;
  return kExitOk;
}

int Cli::AnalysisWait() {
  std::optional<std::chrono::seconds> timeout;
  if (!o_.timeout.empty()) {
    timeout = ParseDuration(o_.timeout);
    if (!timeout) return Usage("invalid --timeout " + o_.timeout + ": use a duration like 90s, 15m or 2h");
  }
  return WaitUntilTerminal(o_.id, io_.clock->Now(), timeout);
}

int Cli::AnalysisResults() {
  auto client = Client();
  if (!client.ok()) return Fail(client.status());
  std::string base = "/v1/analyses/" + ApiClient::EscapeSegment(o_.id) + "/results";
  auto r = (*client)->Get(base);
  if (!r.ok()) return Fail(Explain(r.status(), "analysis " + o_.id, "list the ids with `falcon analysis list`"));
  std::vector<ResultFile> files = ParseResults(*r);
  if (o_.download.empty()) {
    if (o_.output == "json") {
      PrintJson(ResultsJson(o_.id, files));
      return kExitOk;
    }
    if (files.empty()) {
      err_ << "analysis " << o_.id << " has no result files yet\n";
      return kExitOk;
    }
    bool wide = o_.output == "wide";
    std::vector<std::string> headers = {"NAME", "SIZE"};
    if (wide) headers.push_back("URI");
    Table t(headers, {true, false, true});
    int64_t total = 0;
    for (const auto& f : files) {
      std::vector<std::string> row = {f.name, f.size >= 0 ? HumanBytes(f.size) : "-"};
      if (wide) row.push_back(f.uri.empty() ? "-" : f.uri);
      t.AddRow(row);
      total += std::max<int64_t>(f.size, 0);
    }
    out_ << t.Render(io_.terminal_width);
    return kExitOk;
  }
  // Download: each file streams into DIR/NAME.part, renamed when complete.
  std::error_code ec;
  fs::create_directories(o_.download, ec);
  if (ec) return Fail(absl::PermissionDeniedError("cannot create " + o_.download + ": " + ec.message()));
  int64_t total = 0;
  for (const auto& f : files) {
    fs::path rel(f.name);
    bool safe = !rel.is_absolute();
    for (const auto& part : rel) safe = safe && part != "..";
    if (!safe) {
      err_ << "warning: skipping result " << f.name << ": its name leaves the download directory\n";
      continue;
    }
    fs::path dest = fs::path(o_.download) / rel;
    fs::create_directories(dest.parent_path(), ec);
    fs::path part = dest;
    part += ".part";
    std::ofstream file(part, std::ios::binary | std::ios::trunc);
    if (!file) return Fail(absl::PermissionDeniedError("cannot write " + part.string()));
    auto n = (*client)->Download(base + "/" + ApiClient::EscapePath(f.name), [&](const char* d, size_t len) {
      file.write(d, static_cast<std::streamsize>(len));
      return static_cast<bool>(file);
    });
    file.close();
    if (!n.ok() || !file) {
      fs::remove(part, ec);
      if (!n.ok()) return Fail(Annotate(n.status(), "downloading " + f.name));
      return Fail(absl::DataLossError("writing " + dest.string() + " failed (disk full?)"));
    }
    if (f.size >= 0 && *n != f.size) {
      fs::remove(part, ec);
      return Fail(absl::DataLossError("download of " + f.name + " stopped at " + std::to_string(*n) + " of " +
                                      std::to_string(f.size) + " bytes; run the command again"));
    }
    fs::rename(part, dest, ec);
    if (ec) return Fail(absl::PermissionDeniedError("cannot rename " + part.string() + ": " + ec.message()));
    total += *n;
    out_ << dest.string() << "  " << HumanBytes(*n) << "\n";
  }
  err_ << "downloaded " << files.size() << " file" << (files.size() == 1 ? "" : "s") << " (" << HumanBytes(total)
       << ") to " << o_.download << "\n";
  return kExitOk;
}

// ------------------------------------------------------------------------------------------------
// plugins

int Cli::PluginList() {
  auto client = Client();
  if (!client.ok()) return Fail(client.status());
  auto r = (*client)->Get("/v1/plugins");
  if (!r.ok()) return Fail(r.status());
  std::vector<ordered_json> plugins;
  const json& list = r->is_array() ? *r : (r->contains("plugins") ? (*r)["plugins"] : json::array());
  for (const auto& p : list) plugins.push_back(PluginJson(p));
  if (o_.output == "json") {
    ordered_json j;
    j["plugins"] = plugins;
    PrintJson(j);
    return kExitOk;
  }
  bool wide = o_.output == "wide";
  std::vector<std::string> headers = {"NAME", "ARTIFACT TYPES", "TIMEOUT", "DESCRIPTION"};
  std::vector<bool> shrink = {false, true, false, true};
  if (wide) {
    headers.insert(headers.end(), {"COMMAND", "CPU REQ/LIMIT", "MEMORY REQ/LIMIT"});
    shrink.insert(shrink.end(), {true, false, false});
  }
  Table t(headers, shrink);
  for (auto& p : plugins) {
    std::vector<std::string> types;
    for (auto& x : p["artifact_types"]) types.push_back(x.get<std::string>());
    int64_t to = p["timeout_seconds"].get<int64_t>();
    std::vector<std::string> row = {p["name"], types.empty() ? "-" : Join(types, ","),
                                    to > 0 ? HumanDuration(std::chrono::seconds(to)) : "-", p["description"]};
    if (wide) {
      auto& res = p["default_resources"];
      auto pair = [&](const char* a, const char* b) {
        std::string x = res[a], y = res[b];
        return (x.empty() ? "-" : x) + "/" + (y.empty() ? "-" : y);
      };
      row.insert(row.end(), {p["command"], pair("cpu_request", "cpu_limit"), pair("memory_request", "memory_limit")});
    }
    t.AddRow(row);
  }
  out_ << t.Render(io_.terminal_width);
  return kExitOk;
}

int Cli::PluginGet() {
  auto client = Client();
  if (!client.ok()) return Fail(client.status());
  auto r = (*client)->Get("/v1/plugins/" + ApiClient::EscapeSegment(o_.id));
  if (!r.ok()) return Fail(Explain(r.status(), "plugin " + o_.id, "list the plugins with `falcon plugin list`"));
  ordered_json p = PluginJson(*r);
  if (o_.output == "json") {
    PrintJson(p);
    return kExitOk;
  }
  std::vector<std::string> types;
  for (auto& x : p["artifact_types"]) types.push_back(x.get<std::string>());
  auto& res = p["default_resources"];
  int64_t to = p["timeout_seconds"].get<int64_t>();
  std::vector<std::pair<std::string, std::string>> kv = {
      {"Name", p["name"]},
      {"Description", p["description"]},
      {"Artifact types", Join(types, ", ")},
      {"Command", p["command"]},
      {"CPU request", res["cpu_request"]},
      {"CPU limit", res["cpu_limit"]},
      {"Memory request", res["memory_request"]},
      {"Memory limit", res["memory_limit"]},
      {"Timeout", to > 0 ? HumanDuration(std::chrono::seconds(to)) : ""},
  };
  out_ << RenderDetails(kv, io_.terminal_width);
  return kExitOk;
}

// ------------------------------------------------------------------------------------------------
// exps

int Cli::ExpCreate() {
  if (o_.id.empty() && o_.name.empty()) {
    return Usage("give the experiment a --name (and optionally an --id; the server generates one otherwise)");
  }
  auto client = Client();
  if (!client.ok()) return Fail(client.status());
  json body = json::object();
  if (!o_.id.empty()) body["exp_id"] = o_.id;
  body["name"] = o_.name.empty() ? o_.id : o_.name;
  if (!o_.status.empty()) body["status"] = o_.status;
  auto r = (*client)->Send("POST", "/v1/exps", body);
  if (!r.ok()) return Fail(r.status());
  if (o_.output == "json") {
    PrintJson(ExpJson(*r));
  } else {
    out_ << Str(*r, "exp_id") << "\n";
  }
  return kExitOk;
}

int Cli::ExpGet() {
  auto client = Client();
  if (!client.ok()) return Fail(client.status());
  auto r = (*client)->Get("/v1/exps/" + ApiClient::EscapeSegment(o_.id));
  if (!r.ok()) return Fail(Explain(r.status(), "exp " + o_.id, "list the experiments with `falcon exp list`"));
  // The answer is the Exp, possibly with its artifacts ({"exp": {...}, "artifacts": [...]} or flat).
  const json& e = r->contains("exp") && (*r)["exp"].is_object() ? (*r)["exp"] : *r;
  ordered_json out = ExpJson(e);
  ordered_json arts = ordered_json::array();
  if (r->contains("artifacts") && (*r)["artifacts"].is_array()) {
    for (const auto& a : (*r)["artifacts"]) arts.push_back(ArtifactJson(a));
  }
  out["artifacts"] = arts;
  if (o_.output == "json") {
    PrintJson(out);
    return kExitOk;
  }
  auto s = [&](const char* k) { return out[k].is_string() ? out[k].get<std::string>() : std::string(); };
  out_ << RenderDetails({{"ID", s("exp_id")},
                         {"Name", s("name")},
                         {"Status", s("status")},
                         {"Created", s("created_at")},
                         {"Completed", s("completed_at")}},
                        io_.terminal_width);
  if (!arts.empty()) {
    out_ << "\n";
    Table t({"ARTIFACT ID", "TYPE", "URI"}, {false, false, true});
    for (auto& a : arts) t.AddRow({a["artifact_id"], a["artifact_type"], a["uri"]});
    out_ << t.Render(io_.terminal_width);
  }
  return kExitOk;
}

int Cli::ExpList() {
  auto client = Client();
  if (!client.ok()) return Fail(client.status());
  std::vector<json> exps;
  std::string token;
  std::set<std::string> seen;
  while (true) {
    Query q;
    if (!o_.status.empty()) q.push_back({"status", o_.status});
    if (!token.empty()) q.push_back({"page_token", token});
    auto r = (*client)->Get("/v1/exps", q);
    if (!r.ok()) return Fail(r.status());
    const json& list = r->is_array() ? *r : (r->contains("exps") ? (*r)["exps"] : json::array());
    for (const auto& e : list) exps.push_back(e);
    token = r->is_object() ? Str(*r, "next_page_token") : "";
    if (o_.limit > 0 && static_cast<int>(exps.size()) >= o_.limit) {
      exps.resize(static_cast<size_t>(o_.limit));
      break;
    }
    if (token.empty() || !seen.insert(token).second) break;
  }
  if (o_.output == "json") {
    ordered_json j;
    j["exps"] = ordered_json::array();
    for (const auto& e : exps) j["exps"].push_back(ExpJson(e));
    PrintJson(j);
    return kExitOk;
  }
  if (exps.empty()) {
    err_ << "No experiments found.\n";
    return kExitOk;
  }
  bool wide = o_.output == "wide";
  std::vector<std::string> headers = {"EXP ID", "NAME", "STATUS", "AGE"};
  std::vector<bool> shrink = {false, true, false, false};
  if (wide) {
    headers.insert(headers.end(), {"CREATED", "COMPLETED"});
    shrink.insert(shrink.end(), {false, false});
  }
  Table t(headers, shrink);
  for (const auto& e : exps) {
    ordered_json x = ExpJson(e);
    std::vector<std::string> row = {x["exp_id"], x["name"], x["status"], Age(e, "created_at")};
    if (wide) {
      row.push_back(x["created_at"].is_string() ? x["created_at"].get<std::string>() : "-");
      row.push_back(x["completed_at"].is_string() ? x["completed_at"].get<std::string>() : "-");
    }
    for (auto& c : row) {
      if (c.empty()) c = "-";
    }
    t.AddRow(row);
  }
  out_ << t.Render(io_.terminal_width);
  return kExitOk;
}

int Cli::ExpComplete() {
  auto client = Client();
  if (!client.ok()) return Fail(client.status());
  std::string status = o_.failed ? "failed" : "completed";
  auto r = (*client)->Send("PATCH", "/v1/exps/" + ApiClient::EscapeSegment(o_.id), {{"status", status}});
  if (!r.ok()) return Fail(Explain(r.status(), "exp " + o_.id, "list the experiments with `falcon exp list`"));
  out_ << "exp " << o_.id << " " << status << "\n";
  return kExitOk;
}

int Cli::ExpAddArtifact() {
  if (!o_.uri.empty() && !o_.file.empty()) {
    return Usage("conflicting flags: --uri and --file cannot be used together; --uri registers an artifact "
                 "that is already stored, --file uploads a local one");
  }
  if (o_.uri.empty() && o_.file.empty()) {
    return Usage("give the artifact with --uri URI (already stored) or --file PATH (uploaded now)");
  }
  if (!o_.file_name.empty() && o_.file.empty()) return Usage("--as only applies with --file");
  std::error_code ec;
  if (!o_.file.empty() && !fs::is_regular_file(o_.file, ec)) {
    return Usage("--file " + o_.file + " is not a readable file: check the path");
  }
  auto client = Client();
  if (!client.ok()) return Fail(client.status());
  std::string exp_path = "/v1/exps/" + ApiClient::EscapeSegment(o_.id);
  std::string uri = o_.uri;
  std::string source = !o_.file.empty() ? o_.file : o_.uri;
  if (!o_.file.empty()) {
    std::string name = o_.file_name.empty() ? fs::path(o_.file).filename().string() : o_.file_name;
    auto up = (*client)->UploadFile(exp_path + "/files/" + ApiClient::EscapePath(name), o_.file);
    if (!up.ok()) {
      absl::Status s = up.status();
      if (s.code() == absl::StatusCode::kNotFound) {
        s = Explain(s, "exp " + o_.id, "check the id with `falcon exp list` (create it with `falcon exp create`)");
      } else if (s.code() == absl::StatusCode::kResourceExhausted) {
        s = absl::ResourceExhaustedError(std::string(s.message()) +
                                         "; copy a file this large into the object store yourself and "
                                         "register it with --uri");
      }
      return Fail(Annotate(s, "uploading " + o_.file));
    }
    uri = Str(*up, "uri");
    if (uri.empty()) return Fail(absl::InternalError("the upload answer has no uri: " + up->dump()));
    source = name;
  }
  std::string type = o_.artifact_type.empty() ? InferArtifactType(source) : o_.artifact_type;
  auto r = (*client)->Send("POST", exp_path + "/artifacts", {{"artifact_type", type}, {"uri", uri}});
  if (!r.ok()) {
    return Fail(Explain(r.status(), "exp " + o_.id, "check the id with `falcon exp list` (create it with `falcon exp create`)"));
  }
  if (o_.output == "json") {
    PrintJson(ArtifactJson(*r));
  } else {
    out_ << Str(*r, "artifact_id") << "\n";
    err_ << "added " << type << " artifact " << uri << " to exp " << o_.id << "\n";
  }
  return kExitOk;
}

int Cli::Completion(CLI::App& app) {
  out_ << BashCompletion(app);
  return kExitOk;
}

}  // namespace

int Run(const std::vector<std::string>& args, const Io& io) {
  Cli cli(io);
  return cli.Main(args);
}

}  // namespace falcon::cli
