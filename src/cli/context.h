// What every falcon command shares while one command line runs: the global flags, the terminal (Io), the
// lazily made API client, the way results and errors are written, and the slot for the action the parsed
// command chose. One Context per Run; it lives on Run's stack and outlives the CLI11 tree it is bound into.
// Not thread-safe (a command runs on the calling thread only).
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli/api_client.h"
#include "cli/app.h"
#include "cli/model.h"

namespace CLI {
class App;
}

namespace falcon::cli {

class Table;

// The flags of `falcon` itself, given before or after the command (fallthrough).
struct GlobalOptions {
  std::string server;
  std::string config;
  std::string token;
  std::string token_file;
  std::string certificate_authority;
  std::string client_certificate;
  std::string client_key;
  std::string context;
};

class Context {
 public:
  // `io` is not owned and must outlive the Context.
  explicit Context(const Io& io);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Io& io() const { return io_; }
  std::ostream& out() { return *io_.out; }
  std::ostream& err() { return *io_.err; }
  GlobalOptions& globals() { return globals_; }
  // Monotonic now, for what --wait/--follow measure (elapsed time, timeouts): a wall-clock step moves neither.
  MonoTime MonotonicNow() const { return io_.clock->MonotonicNow(); }

  // The client of the server chosen by --server, $FALCON_SERVER, the context, the config file or the
  // default, presenting the credential of the flags, the environment or the context (config.h), made on
  // first use. INVALID_ARGUMENT for an address that is not http(s); the config file's, the CA file's and the
  // credential's errors otherwise.
  absl::StatusOr<ApiClient*> Client();
  // The config file path (--config or the default) and whether --config named it.
  std::string ConfigPath() const;
  bool ConfigExplicit() const { return !globals_.config.empty(); }
  // The resolved connection (no credential obtained yet).
  absl::StatusOr<Connection> ResolveConnection() const;
  // The cache directory for tokens ("" when HOME and XDG_CACHE_HOME are unset).
  std::string CacheDir() const;
  Clock& clock() const { return *io_.clock; }

  // Error -> exit code: prints "error: ..." on stderr and returns kExitError (the request failed) or
  // kExitUsage (bad flags or arguments; nothing was sent).
  int Fail(const absl::Status& s);
  int Usage(const std::string& msg);

  // Output on stdout: pretty JSON (-o json), a table or a detail view fitted to the terminal.
  void PrintJson(const ordered_json& j);
  void PrintTable(const Table& t);
  void PrintDetails(const std::vector<std::pair<std::string, std::string>>& kv);

  // How long ago the timestamp field `key` of `obj` was ("3m12s"); "-" when it has none.
  std::string Age(const nlohmann::json& obj, const char* key) const;
  // How long until it ("in 29d23h"), "due now" once passed; "-" when it has none.
  std::string Until(const nlohmann::json& obj, const char* key) const;
  // Sleeps one poll interval (--wait/--follow).
  void Sleep();

  // The command chosen by the parser; Run calls it once parsing succeeded.
  void SetAction(std::function<int()> action) { action_ = std::move(action); }
  const std::function<int()>& action() const { return action_; }

 private:
  const Io& io_;
  GlobalOptions globals_;
  std::unique_ptr<ApiClient> client_;
  std::unique_ptr<CommandRunner> own_runner_;
  std::function<int()> action_;
};

// Adds the leaf command `name` under `parent`; when the parser picks it, `fn` becomes the context's action.
CLI::App* AddCommand(CLI::App* parent, Context& ctx, const std::string& name, const std::string& desc,
                     std::function<int()> fn);
// The same for a command of a group whose flags bind into `options`: it runs fn(ctx, *options). The
// callback shares `options`, so they live as long as the tree that binds into them.
template <typename Options>
CLI::App* AddCommand(CLI::App* parent, Context& ctx, const std::string& name, const std::string& desc,
                     std::shared_ptr<Options> options, int (*fn)(Context&, const Options&)) {
  return AddCommand(parent, ctx, name, desc, [&ctx, options, fn] { return fn(ctx, *options); });
}
// Adds a command group (`falcon analysis`): needs one subcommand, takes the global flags.
CLI::App* AddGroup(CLI::App& app, const std::string& name, const std::string& alias, const std::string& desc);
// Adds -o/--output (table, wide, json) bound to `output`.
void AddOutputFlag(CLI::App* cmd, std::string* output);

}  // namespace falcon::cli
