// File-descriptor helpers for handling folders the runner must not trust: an owning fd, opening a path
// beneath a folder without following any symbolic link, and an istream that reads a byte range of an open
// fd (so what is uploaded is the inode the runner checked, not whatever a path names later).
// Everything here is thread-compatible: distinct objects may be used from distinct threads.
#pragma once

#include <cstdint>
#include <streambuf>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace falcon::runner {

// Owns one file descriptor; closes it on destruction. Movable, not copyable.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.Release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }

 private:
  int fd_ = -1;
};

// Status for a failed system call: "<what>: <strerror>", with NOT_FOUND / PERMISSION_DENIED / ... codes.
// The shared mapping (common/status.h), plus: ELOOP and EXDEV (a link, or a path that leaves the folder)
// are PERMISSION_DENIED, ENOTDIR is NOT_FOUND.
absl::Status ErrnoStatus(int err, const std::string& what);

// Opens `rel` ('/'-separated, relative, with no empty, "." or ".." segment; "" means `dirfd` itself)
// beneath the folder `dirfd` with open(2) `flags` (O_CLOEXEC is added), refusing every symbolic link on the
// way, the last component included (ELOOP), and any path that would leave the folder (EXDEV).
// Uses openat2(2) with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS; where the kernel has
// no openat2 (ENOSYS) it walks the components one by one with O_NOFOLLOW. Returns the new fd;
// PERMISSION_DENIED "... symbolic link ..." for a link or an escape, else the errno's status.
absl::StatusOr<UniqueFd> OpenBeneath(int dirfd, const std::string& rel, int flags);
// The component walk alone (what OpenBeneath falls back to), exposed so tests can exercise it on kernels
// that have openat2.
absl::StatusOr<UniqueFd> OpenBeneathByWalk(int dirfd, const std::string& rel, int flags);

// Splits a relative '/'-separated path into segments; INVALID_ARGUMENT for an absolute path or an empty,
// "." or ".." segment. "" yields no segments.
absl::StatusOr<std::vector<std::string>> SplitRelative(const std::string& rel);

// Names of the entries of the folder `dirfd` (without "." and ".."), sorted bytewise. Does not move or
// close `dirfd`.
absl::StatusOr<std::vector<std::string>> ListDir(int dirfd);

// A read-only streambuf over bytes [offset, offset + length) of an fd, read with pread(2) (so the fd's
// own offset is untouched and several readers may share it). Seekable, positions counted from `offset`
// (a store can rewind to retry an upload). Stops early at end of file. Does not own
// the fd. A read error sets error() and puts the stream in badbit (it throws from underflow, which istream
// catches), so a store's Put fails instead of storing a truncated object.
class FdRangeStreambuf : public std::streambuf {
 public:
  FdRangeStreambuf(int fd, int64_t offset, int64_t length);
  int error() const { return error_; }

 protected:
  int_type underflow() override;
  pos_type seekoff(off_type off, std::ios_base::seekdir dir, std::ios_base::openmode which) override;
  pos_type seekpos(pos_type pos, std::ios_base::openmode which) override;

 private:
  int fd_;
  int64_t begin_;
  int64_t pos_;  // file offset of egptr()
  int64_t end_;
  int error_ = 0;
  std::vector<char> buf_;
};

}  // namespace falcon::runner
