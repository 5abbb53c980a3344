#include "auth/token_file.h"

#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "auth/token_secret.h"
#include "spdlog/spdlog.h"

namespace falcon::auth {
namespace {
constexpr char kNone[] = "(none)";  // never an Identity()
}  // namespace

absl::StatusOr<std::unique_ptr<TokenFile>> TokenFile::Open(const std::string& path, const std::string& flag,
                                                           Clock& clock, std::chrono::milliseconds check_interval) {
  std::unique_ptr<TokenFile> f(new TokenFile(path, flag, clock, check_interval));
  f->identity_ = f->Identity();
  f->refused_identity_ = kNone;
  auto token = ReadTokenFile(path, flag);
  if (!token.ok()) return token.status();
  f->token_ = *token;
  f->next_check_ = clock.MonotonicNow() + check_interval;
  return f;
}

std::string TokenFile::Identity() const {
  struct stat st;
  if (::stat(path_.c_str(), &st) != 0) return "";
  return absl::StrCat(st.st_dev, ":", st.st_ino, ":", st.st_size, ":", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec);
}

std::string TokenFile::Current() {
  std::lock_guard<std::mutex> l(mu_);
  const MonoTime now = clock_.MonotonicNow();
  if (now < next_check_) return token_;
  next_check_ = now + check_interval_;
  const std::string id = Identity();
  if (id == identity_ || id == refused_identity_) return token_;
  auto token = ReadTokenFile(path_, flag_);
  if (!token.ok()) {
    // Kept until the file changes again: a replacement being written, or removed by mistake.
    refused_identity_ = id;
    spdlog::warn("{}; keeping the token read before", std::string(token.status().message()));
    return token_;
  }
  identity_ = id;
  refused_identity_ = kNone;
  if (*token != token_) {
    token_ = *token;
    ++reloads_;
    spdlog::info("{} {}: read the replaced token", flag_, path_);
  }
  return token_;
}

int TokenFile::reloads() const {
  std::lock_guard<std::mutex> l(mu_);
  return reloads_;
}

}  // namespace falcon::auth
