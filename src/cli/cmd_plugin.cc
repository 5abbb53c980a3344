// `falcon plugin ...`: list and get the built-in plugins of the catalog.
#include <CLI/CLI.hpp>

#include <memory>

#include "cli/commands.h"
#include "cli/helpers.h"
#include "cli/output.h"

namespace falcon::cli {
namespace {

using nlohmann::json;

struct PluginOptions {
  std::string output = "table";
  std::string name;  // get
};

std::vector<std::string> ArtifactTypes(const ordered_json& plugin) {
  std::vector<std::string> types;
  for (const auto& x : plugin["artifact_types"]) types.push_back(x.get<std::string>());
  return types;
}

int List(Context& ctx, const PluginOptions& o) {
  auto client = ctx.Client();
  if (!client.ok()) return ctx.Fail(client.status());
  auto r = (*client)->Get("/v1/plugins");
  if (!r.ok()) return ctx.Fail(r.status());
  std::vector<ordered_json> plugins;
  for (const auto& p : ListField(*r, "plugins")) plugins.push_back(PluginJson(p));
  if (o.output == "json") {
    ordered_json j;
    j["plugins"] = plugins;
    ctx.PrintJson(j);
    return kExitOk;
  }
  bool wide = o.output == "wide";
  std::vector<Column> columns = {{"NAME"}, {"ARTIFACT TYPES", true}, {"TIMEOUT"}, {"DESCRIPTION", true}};
  if (wide) columns.insert(columns.end(), {{"COMMAND", true}, {"CPU REQ/LIMIT"}, {"MEMORY REQ/LIMIT"}});
  Table t = MakeTable(columns);
  for (auto& p : plugins) {
    std::vector<std::string> types = ArtifactTypes(p);
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
  ctx.PrintTable(t);
  return kExitOk;
}

int Get(Context& ctx, const PluginOptions& o) {
  auto client = ctx.Client();
  if (!client.ok()) return ctx.Fail(client.status());
  auto r = (*client)->Get("/v1/plugins/" + ApiClient::EscapeSegment(o.name));
  if (!r.ok()) {
    return ctx.Fail(ExplainNotFound(r.status(), "plugin " + o.name, "list the plugins with `falcon plugin list`"));
  }
  ordered_json p = PluginJson(*r);
  if (o.output == "json") {
    ctx.PrintJson(p);
    return kExitOk;
  }
  auto& res = p["default_resources"];
  int64_t to = p["timeout_seconds"].get<int64_t>();
  ctx.PrintDetails({
      {"Name", p["name"]},
      {"Description", p["description"]},
      {"Artifact types", Join(ArtifactTypes(p), ", ")},
      {"Command", p["command"]},
      {"CPU request", res["cpu_request"]},
      {"CPU limit", res["cpu_limit"]},
      {"Memory request", res["memory_request"]},
      {"Memory limit", res["memory_limit"]},
      {"Timeout", to > 0 ? HumanDuration(std::chrono::seconds(to)) : ""},
  });
  return kExitOk;
}

}  // namespace

void RegisterPluginCommands(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<PluginOptions>();
  CLI::App* pl = AddGroup(app, "plugin", "plugins", "Inspect the built-in plugins of the catalog");
  {
    auto* c = AddCommand(pl, ctx, "list", "List the plugins", o, List);
    c->alias("ls");
    AddOutputFlag(c, &o->output);
    c->footer("Examples:\n  falcon plugin list\n  falcon plugin list -o wide");
  }
  {
    auto* c = AddCommand(pl, ctx, "get", "Show one plugin", o, Get);
    c->add_option("NAME", o->name, "Plugin name")->required();
    AddOutputFlag(c, &o->output);
    c->footer("Examples:\n  falcon plugin get hlo-stats");
  }
}

}  // namespace falcon::cli
