#include "apiserver/bootstrap.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "apiserver/access.h"
#include "auth/static_tokens.h"

namespace falcon::apiserver {

bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

absl::StatusOr<std::chrono::seconds> ParseRetention(const std::string& text) {
  if (text == "0") return std::chrono::seconds(0);
  auto bad = absl::InvalidArgumentError("\"" + text + "\" is not a duration: use e.g. 720h, 30d, 90m, or 0 to keep every event");
  if (text.size() < 2) return bad;
  int64_t n = 0;
  if (!absl::SimpleAtoi(text.substr(0, text.size() - 1), &n) || n <= 0 || n > 100'000'000) return bad;
  switch (text.back()) {
    case 's': return std::chrono::seconds(n);
    case 'm': return std::chrono::seconds(n * 60);
    case 'h': return std::chrono::seconds(n * 3600);
    case 'd': return std::chrono::seconds(n * 86400);
    default: return bad;
  }
}

BootstrapPaths DefaultBootstrapPaths(const std::string& db_url, const std::function<const char*(const char*)>& env) {
  BootstrapPaths p;
  const std::string scheme = "sqlite://";
  if (db_url.rfind(scheme, 0) != 0) return p;
  std::string path = db_url.substr(scheme.size());
  if (auto q = path.find('?'); q != std::string::npos) path = path.substr(0, q);
  if (path.empty() || path == ":memory:") return p;
  p.controller_token_file = (std::filesystem::absolute(path).lexically_normal().parent_path() / "controller.token").string();
  const char* state = env("XDG_STATE_HOME");
  const char* home = env("HOME");
  if (state != nullptr && *state != '\0') {
    p.admin_token_file = std::string(state) + "/falcon/admin.token";
  } else if (home != nullptr && *home != '\0') {
    p.admin_token_file = std::string(home) + "/.local/state/falcon/admin.token";
  }
  return p;
}

namespace {

absl::Status WriteSecret(const std::string& file, const std::string& secret) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path parent = fs::path(file).parent_path();
  if (!parent.empty() && !fs::exists(parent)) {
    fs::create_directories(parent, ec);
    if (ec) return absl::InternalError("cannot create " + parent.string() + ": " + ec.message());
    fs::permissions(parent, fs::perms::owner_all, ec);
  }
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError("cannot create " + file + ": " + std::strerror(errno));
  const std::string text = secret + "\n";
  ssize_t n = ::write(fd, text.data(), text.size());
  int close_rc = ::close(fd);
  if (n != static_cast<ssize_t>(text.size()) || close_rc != 0) {
    ::unlink(file.c_str());
    return absl::InternalError("cannot write " + file);
  }
  return absl::OkStatus();
}

absl::Status Bootstrap(store::Store& store, Clock& clock, const std::string& file, const std::string& base_name,
                       const std::string& role) {
  if (file.empty() || std::filesystem::exists(file)) return absl::OkStatus();
  auto secret = auth::NewTokenSecret();
  if (!secret.ok()) return secret.status();
  store::ApiToken t;
  t.role = role;
  t.token_hash = auth::HashToken(*secret);
  t.created_by = "falcon-apiserver (first start)";
  t.created_at = clock.Now();
  for (int i = 1;; ++i) {
    t.name = i == 1 ? base_name : absl::StrCat(base_name, "-", i);
    absl::Status s = store.CreateApiToken(t);
    if (s.ok()) break;
    if (!absl::IsAlreadyExists(s) || i >= 1000) return s;
  }
  if (auto s = WriteSecret(file, *secret); !s.ok()) {
    store.RevokeApiToken(t.name, clock.Now()).IgnoreError();
    return s;
  }
  spdlog::warn("access control: created token {} (role {}) and wrote it to {} (mode 0600)", t.name, role, file);
  return absl::OkStatus();
}

}  // namespace

absl::Status BootstrapTokens(store::Store& store, Clock& clock, const BootstrapPaths& paths) {
  if (auto s = Bootstrap(store, clock, paths.admin_token_file, kLocalAdminTokenName, kRoleAdmin); !s.ok()) {
    return absl::Status(s.code(), "local admin token: " + std::string(s.message()));
  }
  if (auto s = Bootstrap(store, clock, paths.controller_token_file, kControllerTokenName, kRoleController); !s.ok()) {
    return absl::Status(s.code(), "controller token: " + std::string(s.message()));
  }
  return absl::OkStatus();
}

}  // namespace falcon::apiserver
