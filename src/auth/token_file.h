// A credential file that another process replaces while we run: a projected Kubernetes service-account
// token (the kubelet writes a new one before the old expires, by a symlink swap), or any token file an
// operator rotates. TokenFile hands out the file's current token, reading it again when its identity
// (device, inode, size, mtime) changed, looked at most every `check_interval`, as client-go does with a
// token file.
//
// A replacement that cannot be read or holds no token keeps the previous token (logged once per change), so
// a half-written file never turns a working credential into none.
//
// Thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"

namespace falcon::auth {

class TokenFile {
 public:
  // FAILED_PRECONDITION naming `flag` when the file cannot be read at start or holds no token.
  static absl::StatusOr<std::unique_ptr<TokenFile>> Open(const std::string& path, const std::string& flag,
                                                         Clock& clock,
                                                         std::chrono::milliseconds check_interval = std::chrono::seconds(10));
  // The token now (re-read first when the interval has passed and the file changed).
  std::string Current();
  // How many times a replaced file gave a new token.
  int reloads() const;

 private:
  TokenFile(std::string path, std::string flag, Clock& clock, std::chrono::milliseconds check_interval)
      : path_(std::move(path)), flag_(std::move(flag)), clock_(clock), check_interval_(check_interval) {}
  // The file's identity: "dev:ino:size:mtime_ns", or "" when it cannot be stat'ed.
  std::string Identity() const;

  const std::string path_, flag_;
  Clock& clock_;
  const std::chrono::milliseconds check_interval_;
  mutable std::mutex mu_;
  std::string token_, identity_, refused_identity_;
  MonoTime next_check_{};
  int reloads_ = 0;
};

}  // namespace falcon::auth
