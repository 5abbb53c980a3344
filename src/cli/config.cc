#include "cli/config.h"

#include "common/listen_address.h"
#include "common/local_paths.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/status.h"

namespace falcon::cli {
namespace {

namespace fs = std::filesystem;

constexpr char kContextShape[] =
    "expected `contexts:` as a list of `- name: NAME` entries with server, certificate-authority, "
    "client-certificate and client-key, and one of token, token-file, exec or login";

std::string At(const std::string& path, const YAML::Node& n) {
  int line = n.Mark().line;
  return line >= 0 ? path + ":" + std::to_string(line + 1) : path;
}

absl::Status Bad(const std::string& path, const YAML::Node& n, const std::string& what) {
  return absl::InvalidArgumentError("config file " + At(path, n) + ": " + what);
}

absl::StatusOr<std::string> Scalar(const std::string& path, const YAML::Node& map, const char* key) {
  YAML::Node v = map[key];
  if (!v || v.IsNull()) return std::string();
  if (!v.IsScalar()) return Bad(path, v, std::string("`") + key + "` must be a string");
  return v.as<std::string>();
}

absl::StatusOr<ExecConfig> ParseExec(const std::string& path, const YAML::Node& n) {
  if (!n.IsMap()) return Bad(path, n, "`exec` must be a mapping: {command: PROGRAM, args: [...], env: [...]}");
  ExecConfig e;
  FALCON_ASSIGN_OR_RETURN(e.command, Scalar(path, n, "command"));
  if (e.command.empty()) return Bad(path, n, "`exec` needs `command:` (the program that prints a token)");
  if (YAML::Node a = n["args"]; a && !a.IsNull()) {
    if (!a.IsSequence()) return Bad(path, a, "`exec.args` must be a list of strings");
    for (const auto& x : a) {
      if (!x.IsScalar()) return Bad(path, x, "`exec.args` must be a list of strings");
      e.args.push_back(x.as<std::string>());
    }
  }
  if (YAML::Node env = n["env"]; env && !env.IsNull()) {
    // Both kubectl's list form ([{name, value}]) and a plain mapping are accepted.
    if (env.IsMap()) {
      for (const auto& kv : env) e.env.emplace_back(kv.first.as<std::string>(), kv.second.as<std::string>());
    } else if (env.IsSequence()) {
      for (const auto& x : env) {
        if (!x.IsMap() || !x["name"]) return Bad(path, x, "`exec.env` entries are `{name: VAR, value: VALUE}`");
        e.env.emplace_back(x["name"].as<std::string>(), x["value"] ? x["value"].as<std::string>() : "");
      }
    } else {
      return Bad(path, env, "`exec.env` must be a list of `{name, value}` or a mapping");
    }
  }
  return e;
}

absl::StatusOr<ContextConfig> ParseContext(const std::string& path, const YAML::Node& n) {
  if (!n.IsMap()) return Bad(path, n, kContextShape);
  ContextConfig c;
  c.line = n.Mark().line + 1;
  FALCON_ASSIGN_OR_RETURN(c.name, Scalar(path, n, "name"));
  if (c.name.empty()) return Bad(path, n, "a context needs `name:`");
  for (const auto& kv : n) {
    static const std::vector<std::string> kKeys = {"name",  "server",     "certificate-authority",
                                                   "token", "token-file", "exec",
                                                   "login", "client-certificate", "client-key"};
    std::string key = kv.first.as<std::string>();
    if (std::find(kKeys.begin(), kKeys.end(), key) == kKeys.end()) {
      return Bad(path, kv.first, "unknown key `" + key + "` in context " + c.name + "; " + kContextShape);
    }
  }
  FALCON_ASSIGN_OR_RETURN(c.server, Scalar(path, n, "server"));
  FALCON_ASSIGN_OR_RETURN(c.certificate_authority, Scalar(path, n, "certificate-authority"));
  FALCON_ASSIGN_OR_RETURN(c.client_certificate, Scalar(path, n, "client-certificate"));
  FALCON_ASSIGN_OR_RETURN(c.client_key, Scalar(path, n, "client-key"));
  if (c.client_certificate.empty() != c.client_key.empty()) {
    return Bad(path, n, "context " + c.name + " sets only one of `client-certificate` and `client-key`; give both");
  }
  FALCON_ASSIGN_OR_RETURN(c.token, Scalar(path, n, "token"));
  FALCON_ASSIGN_OR_RETURN(c.token_file, Scalar(path, n, "token-file"));
  int credentials = (c.token.empty() ? 0 : 1) + (c.token_file.empty() ? 0 : 1);
  if (YAML::Node e = n["exec"]; e && !e.IsNull()) {
    FALCON_ASSIGN_OR_RETURN(ExecConfig exec, ParseExec(path, e));
    c.exec = std::move(exec);
    ++credentials;
  }
  if (YAML::Node l = n["login"]; l && !l.IsNull()) {
    if (!l.IsMap()) return Bad(path, l, "`login` must be a mapping: {issuer: URL, client-id: ID}");
    LoginConfig login;
    FALCON_ASSIGN_OR_RETURN(login.issuer, Scalar(path, l, "issuer"));
    FALCON_ASSIGN_OR_RETURN(login.client_id, Scalar(path, l, "client-id"));
    FALCON_ASSIGN_OR_RETURN(std::string use, Scalar(path, l, "token"));
    if (!use.empty() && use != "id_token" && use != "access_token") {
      return Bad(path, l, "`login.token` must be id_token or access_token");
    }
    login.access_token = use == "access_token";
    FALCON_ASSIGN_OR_RETURN(login.certificate_authority, Scalar(path, l, "certificate-authority"));
    if (login.issuer.empty() || login.client_id.empty()) {
      return Bad(path, l, "`login` needs `issuer:` and `client-id:` (as given to falcon login)");
    }
    c.login = login;
    ++credentials;
  }
  if (credentials > 1) {
    return Bad(path, n, "context " + c.name + " has more than one of token, token-file, exec and login; keep one");
  }
  return c;
}

YAML::Node ExecNode(const ExecConfig& e) {
  YAML::Node n;
  n["command"] = e.command;
  if (!e.args.empty()) {
    for (const auto& a : e.args) n["args"].push_back(a);
  }
  for (const auto& [k, v] : e.env) {
    YAML::Node x;
    x["name"] = k;
    x["value"] = v;
    n["env"].push_back(x);
  }
  return n;
}

}  // namespace

std::string DefaultConfigPath(const EnvLookup& env) {
  return XdgPath(env, "XDG_CONFIG_HOME", ".config", "falcon/config.yaml");
}

std::string DefaultCacheDir(const EnvLookup& env) { return XdgPath(env, "XDG_CACHE_HOME", ".cache", "falcon"); }

std::string DefaultLocalAdminTokenPath(const EnvLookup& env) { return LocalAdminTokenPath(env); }

bool IsLoopbackServer(const std::string& url) {
  auto scheme = url.find("://");
  std::string rest = scheme == std::string::npos ? url : url.substr(scheme + 3);
  rest = rest.substr(0, rest.find('/'));
  std::string host;
  if (!rest.empty() && rest[0] == '[') {
    host = rest.substr(1, rest.find(']') == std::string::npos ? std::string::npos : rest.find(']') - 1);
  } else {
    host = rest.substr(0, rest.find(':'));
  }
  return IsLoopbackHost(host);
}

std::string ExpandHome(const std::string& path, const EnvLookup& env) {
  if (path.rfind("~/", 0) == 0) {
    const char* home = env("HOME");
    if (home && *home) return std::string(home) + path.substr(1);
  }
  return path;
}

const ContextConfig* ConfigFile::Find(const std::string& name) const {
  for (const auto& c : contexts) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

ContextConfig* ConfigFile::Find(const std::string& name) {
  for (auto& c : contexts) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::vector<std::string> ConfigFile::Names() const {
  std::vector<std::string> v;
  for (const auto& c : contexts) v.push_back(c.name);
  return v;
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(what + " " + path + " cannot be opened (" + std::strerror(errno) + ")");
  std::string data;
  data.resize(kMaxConfigFileBytes + 1);
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  data.resize(static_cast<size_t>(in.gcount()));
  if (data.size() > kMaxConfigFileBytes) {
    return absl::ResourceExhaustedError(what + " " + path + " is larger than the limit of " +
                                        std::to_string(kMaxConfigFileBytes) + " bytes");
  }
  return data;
}

absl::StatusOr<std::string> ReadCaFile(const std::string& path, const std::string& source) {
  auto pem = ReadSmallFile(path, "CA file");
  if (!pem.ok()) {
    return absl::Status(pem.status().code(), std::string(pem.status().message()) + "; it was named by " + source);
  }
  if (pem->find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
    return absl::InvalidArgumentError("CA file " + path + " (from " + source +
                                      ") holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
  }
  return pem;
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path, const std::string& source) {
  auto read = ReadSmallFile(path, "token file");
  if (!read.ok()) {
    return absl::Status(read.status().code(), std::string(read.status().message()) + "; it was named by " + source);
  }
  std::string data = std::move(*read);
  size_t b = data.find_first_not_of(" \t\r\n");
  size_t e = data.find_last_not_of(" \t\r\n");
  std::string token = b == std::string::npos ? "" : data.substr(b, e - b + 1);
  if (token.empty()) {
    return absl::InvalidArgumentError("token file " + path + " (from " + source + ") is empty: write the token into it");
  }
  if (token.find_first_of(" \t\r\n") != std::string::npos) {
    return absl::InvalidArgumentError("token file " + path + " (from " + source +
                                      ") must hold one token on one line, without spaces");
  }
  return token;
}

absl::StatusOr<ConfigFile> LoadConfig(const std::string& path, bool must_exist) {
  ConfigFile cfg;
  cfg.path = path;
  if (path.empty()) return cfg;
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    if (must_exist) return absl::NotFoundError("config file " + path + " does not exist: check the --config path");
    return cfg;
  }
  cfg.exists = true;
  FALCON_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path, "config file"));
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError("cannot read config file " + path +
                                      (e.mark.line >= 0 ? ":" + std::to_string(e.mark.line + 1) : "") + ": " +
                                      e.msg + "; fix it or remove it (expected `server: http://HOST:PORT` or contexts)");
  }
  if (!root || root.IsNull()) return cfg;
  if (!root.IsMap()) {
    return absl::InvalidArgumentError("config file " + path +
                                      " is not a YAML mapping: write `server: http://HOST:PORT` or contexts");
  }
  try {
    // Unknown keys are refused rather than dropped: `falcon config` rewrites the file.
    for (const auto& kv : root) {
      static const std::vector<std::string> kTop = {"server", "current-context", "contexts"};
      std::string key = kv.first.as<std::string>();
      if (std::find(kTop.begin(), kTop.end(), key) == kTop.end()) {
        return Bad(path, kv.first, "unknown key `" + key + "`; the file has `server:`, `current-context:` and `contexts:`");
      }
    }
    FALCON_ASSIGN_OR_RETURN(cfg.server, Scalar(path, root, "server"));
    FALCON_ASSIGN_OR_RETURN(cfg.current_context, Scalar(path, root, "current-context"));
    if (root["current-context"]) cfg.current_context_line = root["current-context"].Mark().line + 1;
    if (YAML::Node cs = root["contexts"]; cs && !cs.IsNull()) {
      if (!cs.IsSequence()) return Bad(path, cs, kContextShape);
      for (const auto& n : cs) {
        FALCON_ASSIGN_OR_RETURN(ContextConfig c, ParseContext(path, n));
        if (cfg.Find(c.name)) return Bad(path, n, "context " + c.name + " is defined twice");
        cfg.contexts.push_back(std::move(c));
      }
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError("config file " + path +
                                      (e.mark.line >= 0 ? ":" + std::to_string(e.mark.line + 1) : "") + ": " + e.msg);
  }
  return cfg;
}

std::string ConfigYaml(const ConfigFile& config, bool redact) {
  YAML::Node root(YAML::NodeType::Map);
  if (!config.current_context.empty()) root["current-context"] = config.current_context;
  if (!config.server.empty()) root["server"] = config.server;
  for (const auto& c : config.contexts) {
    YAML::Node n;
    n["name"] = c.name;
    if (!c.server.empty()) n["server"] = c.server;
    if (!c.certificate_authority.empty()) n["certificate-authority"] = c.certificate_authority;
    if (!c.client_certificate.empty()) n["client-certificate"] = c.client_certificate;
    if (!c.client_key.empty()) n["client-key"] = c.client_key;
    if (!c.token.empty()) n["token"] = redact ? "REDACTED" : c.token;
    if (!c.token_file.empty()) n["token-file"] = c.token_file;
    if (c.exec) {
      YAML::Node e = ExecNode(*c.exec);
      // Environment values of a plugin may be secrets too.
      if (redact) {
        for (auto x : e["env"]) x["value"] = "REDACTED";
      }
      n["exec"] = e;
    }
    if (c.login) {
      n["login"]["issuer"] = c.login->issuer;
      n["login"]["client-id"] = c.login->client_id;
      if (c.login->access_token) n["login"]["token"] = "access_token";
      if (!c.login->certificate_authority.empty()) n["login"]["certificate-authority"] = c.login->certificate_authority;
    }
    root["contexts"].push_back(n);
  }
  YAML::Emitter out;
  out << root;
  return std::string(out.c_str()) + "\n";
}

absl::Status SaveConfig(const ConfigFile& config) {
  if (config.path.empty()) {
    return absl::FailedPreconditionError("no config file path: set HOME or XDG_CONFIG_HOME, or give --config");
  }
  fs::path p(config.path);
  std::error_code ec;
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  std::string tmp = config.path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::PermissionDeniedError("cannot write " + tmp + ": " + std::strerror(errno));
  std::string text = ConfigYaml(config, false);
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::string err = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return absl::DataLossError("cannot write " + tmp + ": " + err);
    }
    off += static_cast<size_t>(n);
  }
  ::fchmod(fd, 0600);
  if (::close(fd) != 0 || ::rename(tmp.c_str(), config.path.c_str()) != 0) {
    std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    return absl::DataLossError("cannot replace " + config.path + ": " + err);
  }
  return absl::OkStatus();
}

absl::StatusOr<ServerChoice> ResolveServer(const std::string& flag, const EnvLookup& env,
                                           const std::string& config_path, bool config_explicit) {
  ConnectionFlags flags;
  flags.server = flag;
  FALCON_ASSIGN_OR_RETURN(Connection c, ResolveConnection(flags, env, config_path, config_explicit));
  return ServerChoice{c.server, c.server_source};
}

absl::StatusOr<Connection> ResolveConnection(const ConnectionFlags& flags, const EnvLookup& env,
                                             const std::string& config_path, bool config_explicit) {
  auto from_env = [&](const char* name) -> std::string {
    const char* v = env(name);
    return v ? std::string(v) : std::string();
  };
  FALCON_ASSIGN_OR_RETURN(ConfigFile cfg, LoadConfig(config_path, config_explicit));
  Connection c;
  c.config_path = config_path;

  // The context: --context, FALCON_CONTEXT, current-context.
  const ContextConfig* ctx = nullptr;
  std::string want = flags.context, want_source = "--context";
  if (want.empty()) {
    want = from_env("FALCON_CONTEXT");
    want_source = "FALCON_CONTEXT";
  }
  if (!want.empty()) {
    ctx = cfg.Find(want);
    if (!ctx) {
      std::string names;
      for (const auto& n : cfg.Names()) names += (names.empty() ? "" : ", ") + n;
      return absl::NotFoundError("context " + want + " (from " + want_source + ") is not in config file " +
                                 (config_path.empty() ? "(none)" : config_path) + "; " +
                                 (names.empty() ? "it has no contexts" : "it has " + names) +
                                 " (add one with `falcon config set-context " + want + " --server URL`)");
    }
  } else if (!cfg.current_context.empty()) {
    ctx = cfg.Find(cfg.current_context);
    if (!ctx) {
      return absl::InvalidArgumentError("config file " + config_path + ":" + std::to_string(cfg.current_context_line) +
                                        ": current-context " + cfg.current_context +
                                        " names no context in `contexts:`; fix it with `falcon config use-context NAME`");
    }
  }
  std::string ctx_source;
  if (ctx) {
    c.context = ctx->name;
    ctx_source = "context " + ctx->name + " in " + config_path;
  }

  // The server.
  if (!flags.server.empty()) {
    c.server = flags.server, c.server_source = "--server";
  } else if (std::string s = from_env("FALCON_SERVER"); !s.empty()) {
    c.server = s, c.server_source = "FALCON_SERVER";
  } else if (ctx && !ctx->server.empty()) {
    c.server = ctx->server, c.server_source = ctx_source;
  } else if (!cfg.server.empty()) {
    c.server = cfg.server, c.server_source = config_path;
  } else {
    c.server = kDefaultServer, c.server_source = "default";
  }

  // The CA.
  if (!flags.certificate_authority.empty()) {
    c.ca_file = flags.certificate_authority, c.ca_source = "--certificate-authority";
  } else if (std::string s = from_env("FALCON_CA_FILE"); !s.empty()) {
    c.ca_file = s, c.ca_source = "FALCON_CA_FILE";
  } else if (ctx && !ctx->certificate_authority.empty()) {
    c.ca_file = ExpandHome(ctx->certificate_authority, env), c.ca_source = ctx_source;
  }

  // The client certificate: a pair from one place.
  if (!flags.client_certificate.empty() || !flags.client_key.empty()) {
    if (flags.client_certificate.empty() || flags.client_key.empty()) {
      return absl::InvalidArgumentError("--client-certificate and --client-key go together; give both");
    }
    c.client_cert_file = flags.client_certificate, c.client_key_file = flags.client_key;
    c.client_cert_source = "--client-certificate/--client-key";
  } else if (std::string cert = from_env("FALCON_CLIENT_CERTIFICATE"), key = from_env("FALCON_CLIENT_KEY");
             !cert.empty() || !key.empty()) {
    if (cert.empty() || key.empty()) {
      return absl::InvalidArgumentError("FALCON_CLIENT_CERTIFICATE and FALCON_CLIENT_KEY go together; set both");
    }
    c.client_cert_file = cert, c.client_key_file = key;
    c.client_cert_source = "FALCON_CLIENT_CERTIFICATE/FALCON_CLIENT_KEY";
  } else if (ctx && !ctx->client_certificate.empty()) {
    c.client_cert_file = ExpandHome(ctx->client_certificate, env);
    c.client_key_file = ExpandHome(ctx->client_key, env);
    c.client_cert_source = ctx_source;
  }

  // The credential.
  if (!flags.token.empty()) {
    c.kind = CredentialKind::kToken, c.token = flags.token, c.credential_source = "--token";
  } else if (!flags.token_file.empty()) {
    c.kind = CredentialKind::kTokenFile, c.token_file = flags.token_file, c.credential_source = "--token-file";
  } else if (std::string t = from_env("FALCON_TOKEN"); !t.empty()) {
    c.kind = CredentialKind::kToken, c.token = t, c.credential_source = "FALCON_TOKEN";
  } else if (std::string f = from_env("FALCON_TOKEN_FILE"); !f.empty()) {
    c.kind = CredentialKind::kTokenFile, c.token_file = f, c.credential_source = "FALCON_TOKEN_FILE";
  } else if (ctx) {
    c.credential_source = ctx_source;
    if (!ctx->token.empty()) {
      c.kind = CredentialKind::kToken, c.token = ctx->token;
    } else if (!ctx->token_file.empty()) {
      c.kind = CredentialKind::kTokenFile, c.token_file = ExpandHome(ctx->token_file, env);
    } else if (ctx->exec) {
      c.kind = CredentialKind::kExec, c.exec = *ctx->exec;
    } else if (ctx->login) {
      c.kind = CredentialKind::kLogin, c.login = *ctx->login;
    } else {
      c.credential_source.clear();
    }
  }
  // Nothing given, a server on this machine: the local admin token its first start wrote, if readable.
  // A client certificate is a credential of its own: the local token would hide who it names.
  if (c.kind == CredentialKind::kNone && c.client_cert_file.empty() && IsLoopbackServer(c.server)) {
    std::string local = DefaultLocalAdminTokenPath(env);
    std::error_code ec;
    if (!local.empty() && std::filesystem::is_regular_file(local, ec) && ::access(local.c_str(), R_OK) == 0) {
      c.kind = CredentialKind::kTokenFile, c.token_file = local;
      c.credential_source = "the local admin token " + local;
    }
  }
  return c;
}

}  // namespace falcon::cli
