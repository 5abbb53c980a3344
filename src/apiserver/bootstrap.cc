#include "apiserver/bootstrap.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "apiserver/access.h"
#include "auth/static_tokens.h"
#include "common/local_paths.h"

namespace falcon::apiserver {

absl::StatusOr<std::chrono::seconds> ParseRetention(const std::string& text, const std::string& what) {
  if (text == "0") return std::chrono::seconds(0);
  auto bad = absl::InvalidArgumentError("\"" + text + "\" is not a duration: use e.g. 720h, 30d, 90m, or 0 to keep every " + what);
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
  p.admin_token_file = LocalAdminTokenPath(env);
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

// The secret of a token file that exists: only if it belongs to this process' user (or root: a mounted
// Kubernetes Secret), others have no access and the group cannot write it (the rule ssh applies to keys),
// and it is one line of printable characters. A link is followed (Secret volumes are links).
absl::StatusOr<std::string> ReadOwnSecret(const std::string& file) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::FailedPreconditionError("cannot open " + file + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(file + " is not a regular file");
  }
  if ((st.st_uid != ::geteuid() && st.st_uid != 0) || (st.st_mode & 027) != 0) {
    ::close(fd);
    return absl::FailedPreconditionError(file + " must be owned by this user with no access for others (chmod 600 " +
                                         file + "), or removed so a new token is written");
  }
  char buf[512];
  ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (n <= 0 || n == static_cast<ssize_t>(sizeof buf)) {
    return absl::FailedPreconditionError(file + " does not hold one token (remove it so a new one is written)");
  }
  std::string secret(buf, static_cast<size_t>(n));
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  for (char c : secret) {
    if (c <= ' ' || c > '~') {
      return absl::FailedPreconditionError(file + " does not hold one token (remove it so a new one is written)");
    }
  }
  if (secret.size() < 16) return absl::FailedPreconditionError(file + " holds a token shorter than 16 characters");
  return secret;
}

absl::Status Bootstrap(store::Store& store, Clock& clock, const std::string& file, const std::string& base_name,
                       const std::string& role) {
  if (file.empty()) return absl::OkStatus();
  // A file that exists is kept. If this database does not know its token (a new database, e.g. a second
  // demo), the token is registered here, so the credential the CLI finds keeps working.
  const bool adopt = std::filesystem::exists(file);
  absl::StatusOr<std::string> secret;
  if (adopt) {
    secret = ReadOwnSecret(file);
    if (!secret.ok()) return secret.status();
    auto known = store.FindApiTokenByHash(auth::HashToken(*secret));
    if (known.ok()) return absl::OkStatus();  // revoked or expired stays so: the file is then just stale
    if (!absl::IsNotFound(known.status())) return known.status();
  } else {
    secret = auth::NewTokenSecret();
    if (!secret.ok()) return secret.status();
  }
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
  if (adopt) {
    spdlog::warn("access control: registered the token in {} as {} (role {}): this database did not know it",
                 file, t.name, role);
    return absl::OkStatus();
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
