#include "kube/kube_config.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace falcon::kube {
namespace {

std::string Str(const YAML::Node& n, const char* key) {
  if (!n || !n.IsMap() || !n[key] || !n[key].IsScalar()) return "";
  return n[key].as<std::string>();
}

// The `inner` map of the entry named `name` in a kubeconfig list; nullopt if there is none.
std::optional<YAML::Node> FindNamed(const YAML::Node& list, const std::string& name, const char* inner) {
  if (!list || !list.IsSequence()) return std::nullopt;
  for (const auto& e : list) {
    if (Str(e, "name") == name && e[inner] && e[inner].IsMap()) return e[inner];
  }
  return std::nullopt;
}

std::string Resolve(const std::string& base_dir, const std::string& p) {
  if (p.empty() || p[0] == '/' || base_dir.empty()) return p;
  return (std::filesystem::path(base_dir) / p).string();
}

// Reads `<key>-data` (base64) or `<key>` (a file path).
absl::StatusOr<std::string> DataOrFile(const YAML::Node& n, const std::string& key, const std::string& base_dir,
                                       const std::string& where) {
  std::string data = Str(n, (key + "-data").c_str());
  if (!data.empty()) {
    auto d = Base64Decode(data);
    if (!d.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("kubeconfig: ", where, ".", key, "-data is not valid base64"));
    }
    return *d;
  }
  std::string file = Str(n, key.c_str());
  if (file.empty()) return std::string();
  auto content = ReadFileToString(Resolve(base_dir, file));
  if (!content.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("kubeconfig: ", where, ".", key, ": ",
                                                   std::string(content.status().message())));
  }
  return *content;
}

}  // namespace

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return absl::InternalError(absl::StrCat("error reading ", path));
  return ss.str();
}

absl::StatusOr<std::string> Base64Decode(const std::string& in) {
  static const std::string kChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  int val = 0, bits = -8;
  for (char c : in) {
    if (c == '=' ) break;
    if (c == '\n' || c == '\r' || c == ' ' || c == '\t') continue;
    auto pos = kChars.find(c);
    if (pos == std::string::npos) return absl::InvalidArgumentError("invalid base64 character");
    val = (val << 6) + static_cast<int>(pos);
    bits += 6;
    if (bits >= 0) {
      out.push_back(static_cast<char>((val >> bits) & 0xFF));
      bits -= 8;
    }
  }
  return out;
}

absl::StatusOr<KubeConfig> ParseKubeconfig(const std::string& yaml, const std::string& base_dir,
                                           const std::string& context) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("kubeconfig is not valid YAML: ", e.what()));
  }
  if (!root.IsMap()) return absl::InvalidArgumentError("kubeconfig: not a YAML mapping");
  std::string ctx_name = context.empty() ? Str(root, "current-context") : context;
  if (ctx_name.empty()) {
    return absl::InvalidArgumentError("kubeconfig has no current-context; pass a context name");
  }
  auto ctx_entry = FindNamed(root["contexts"], ctx_name, "context");
  if (!ctx_entry) return absl::InvalidArgumentError(absl::StrCat("kubeconfig: context \"", ctx_name, "\" not found"));
  const YAML::Node ctx = *ctx_entry;
  std::string cluster_name = Str(ctx, "cluster");
  std::string user_name = Str(ctx, "user");
  auto cluster_entry = FindNamed(root["clusters"], cluster_name, "cluster");
  if (!cluster_entry) {
    return absl::InvalidArgumentError(absl::StrCat("kubeconfig: cluster \"", cluster_name, "\" of context \"",
                                                   ctx_name, "\" not found"));
  }
  const YAML::Node cluster = *cluster_entry;
  KubeConfig c;
  c.server = std::string(absl::StripSuffix(Str(cluster, "server"), "/"));
  if (c.server.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("kubeconfig: cluster \"", cluster_name, "\" has no server"));
  }
  std::string ns = Str(ctx, "namespace");
  if (!ns.empty()) c.namespace_ = ns;
  c.tls_server_name = Str(cluster, "tls-server-name");
  c.insecure_skip_tls_verify = Str(cluster, "insecure-skip-tls-verify") == "true";
  auto ca = DataOrFile(cluster, "certificate-authority", base_dir, "clusters[" + cluster_name + "]");
  if (!ca.ok()) return ca.status();
  c.ca_pem = *ca;
  if (!user_name.empty()) {
    auto user_entry = FindNamed(root["users"], user_name, "user");
    if (!user_entry) {
      return absl::InvalidArgumentError(absl::StrCat("kubeconfig: user \"", user_name, "\" not found"));
    }
    const YAML::Node user = *user_entry;
    const std::string where = "users[" + user_name + "]";
    auto cert = DataOrFile(user, "client-certificate", base_dir, where);
    if (!cert.ok()) return cert.status();
    auto key = DataOrFile(user, "client-key", base_dir, where);
    if (!key.ok()) return key.status();
    c.client_cert_pem = *cert;
    c.client_key_pem = *key;
    if (c.client_cert_pem.empty() != c.client_key_pem.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("kubeconfig: ", where, " has a client certificate without a key or a key without one"));
    }
    c.token = Str(user, "token");
    std::string tf = Str(user, "tokenFile");
    if (!tf.empty()) c.token_file = Resolve(base_dir, tf);
    if (const YAML::Node exec = user["exec"]; exec && exec.IsMap()) {
      ExecPlugin p;
      p.command = Str(exec, "command");
      if (p.command.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("kubeconfig: ", where, ".exec has no command"));
      }
      // Like kubectl: a relative path with a separator is relative to the kubeconfig's folder; a bare name is
      // looked up on PATH.
      if (p.command.find('/') != std::string::npos && p.command[0] != '/' && !base_dir.empty()) {
        p.command = base_dir + "/" + p.command;
      }
      if (exec["args"] && exec["args"].IsSequence()) {
        for (const auto& a : exec["args"]) p.args.push_back(a.as<std::string>());
      }
      if (exec["env"] && exec["env"].IsSequence()) {
        for (const auto& e : exec["env"]) p.env.emplace_back(Str(e, "name"), Str(e, "value"));
      }
      std::string v = Str(exec, "apiVersion");
      if (!v.empty()) p.api_version = v;
      if (p.api_version != "client.authentication.k8s.io/v1" &&
          p.api_version != "client.authentication.k8s.io/v1beta1") {
        return absl::InvalidArgumentError(absl::StrCat(
            "kubeconfig: ", where, ".exec.apiVersion \"", p.api_version,
            "\" is not supported: use client.authentication.k8s.io/v1 or v1beta1"));
      }
      p.install_hint = Str(exec, "installHint");
      c.exec = std::move(p);
    }
    if (user["auth-provider"] && c.token.empty() && c.token_file.empty() && c.client_cert_pem.empty() && !c.exec) {
      return absl::UnimplementedError(absl::StrCat(
          "kubeconfig: ", where, " uses an auth-provider (removed from kubectl since 1.26), which is not "
          "supported; use an exec credential plugin, a client certificate, a token or a tokenFile"));
    }
  }
  return c;
}

absl::StatusOr<KubeConfig> LoadKubeconfig(const std::string& path, const std::string& context) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return absl::NotFoundError(absl::StrCat("kubeconfig ", path, " cannot be read"));
  auto c = ParseKubeconfig(*text, std::filesystem::path(path).parent_path().string(), context);
  if (!c.ok()) return absl::Status(c.status().code(), absl::StrCat(path, ": ", std::string(c.status().message())));
  return c;
}

absl::StatusOr<KubeConfig> InClusterConfig(const std::string& sa_dir,
                                           const std::function<const char*(const char*)>& getenv_fn) {
  auto env = [&](const char* k) -> std::string {
    const char* v = getenv_fn ? getenv_fn(k) : std::getenv(k);
    return v ? v : "";
  };
  std::string host = env("KUBERNETES_SERVICE_HOST");
  std::string port = env("KUBERNETES_SERVICE_PORT");
  if (host.empty() || port.empty()) {
    return absl::FailedPreconditionError(
        "not running in a Kubernetes Pod (KUBERNETES_SERVICE_HOST/PORT unset); pass --kubeconfig");
  }
  KubeConfig c;
  if (host.find(':') != std::string::npos) host = "[" + host + "]";  // IPv6
  c.server = absl::StrCat("https://", host, ":", port);
  c.token_file = sa_dir + "/token";
  auto tok = ReadFileToString(c.token_file);
  if (!tok.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "in-cluster: service-account token ", c.token_file,
        " missing; mount a token (automountServiceAccountToken) or pass --kubeconfig"));
  }
  auto ca = ReadFileToString(sa_dir + "/ca.crt");
  if (!ca.ok()) return absl::FailedPreconditionError(absl::StrCat("in-cluster: ", sa_dir, "/ca.crt missing"));
  c.ca_pem = *ca;
  auto ns = ReadFileToString(sa_dir + "/namespace");
  if (ns.ok()) {
    std::string n(absl::StripTrailingAsciiWhitespace(*ns));
    if (!n.empty()) c.namespace_ = n;
  }
  return c;
}

}  // namespace falcon::kube
