#include "runner/fd_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"

namespace falcon::runner {

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.Release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status ErrnoStatus(int err, const std::string& what) {
  // What the runner adds to the shared mapping: a link or a path that leaves its folder is refused, and a
  // file where a folder was expected is not there.
  switch (err) {
    case ENOTDIR:
      return absl::NotFoundError(absl::StrCat(what, ": ", std::strerror(err)));
    case ELOOP:
    case EXDEV:
      return absl::PermissionDeniedError(absl::StrCat(what, ": ", std::strerror(err)));
    default:
      return ::falcon::ErrnoStatus(err, what);
  }
}

namespace {

// The refusals of OpenBeneath get a message a person understands ("Too many levels of symbolic links" is
// the kernel's wording for "a link was there").
absl::Status OpenError(int err, const std::string& rel) {
  if (err == ELOOP || err == EXDEV) {
    return absl::PermissionDeniedError(absl::StrCat(
        "'", rel, "' is or passes through a symbolic link (links are not followed)"));
  }
  return ErrnoStatus(err, absl::StrCat("opening ", rel.empty() ? "." : rel));
}

}  // namespace

absl::StatusOr<std::vector<std::string>> SplitRelative(const std::string& rel) {
  std::vector<std::string> out;
  if (rel.empty()) return out;
  if (rel[0] == '/') return absl::InvalidArgumentError(absl::StrCat("path '", rel, "' must be relative"));
  if (rel.find('\0') != std::string::npos) return absl::InvalidArgumentError("path contains a NUL byte");
  for (absl::string_view seg : absl::StrSplit(rel, '/')) {
    if (seg.empty() || seg == "." || seg == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat("path '", rel, "' has an empty, '.' or '..' segment"));
    }
    out.emplace_back(seg);
  }
  return out;
}

absl::StatusOr<UniqueFd> OpenBeneathByWalk(int dirfd, const std::string& rel, int flags) {
  auto segs = SplitRelative(rel);
  if (!segs.ok()) return segs.status();
  if (segs->empty()) {
    int fd = ::openat(dirfd, ".", flags | O_CLOEXEC);
    if (fd < 0) return OpenError(errno, rel);
    return UniqueFd(fd);
  }
  UniqueFd cur;
  int at = dirfd;
  for (size_t i = 0; i + 1 < segs->size(); ++i) {
    // O_NOFOLLOW with O_DIRECTORY fails (ELOOP/ENOTDIR) on a link instead of opening what it names; O_PATH:
    // passing through a folder needs only search permission, as in a path lookup.
    int fd = ::openat(at, (*segs)[i].c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      struct stat st;
      // O_DIRECTORY | O_NOFOLLOW on a link fails with ENOTDIR: say what it really was.
      if (err == ENOTDIR && ::fstatat(at, (*segs)[i].c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISLNK(st.st_mode)) {
        err = ELOOP;
      }
      return OpenError(err, rel);
    }
    cur = UniqueFd(fd);
    at = cur.get();
  }
  int fd = ::openat(at, segs->back().c_str(), flags | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return OpenError(errno, rel);
  return UniqueFd(fd);
}

absl::StatusOr<UniqueFd> OpenBeneath(int dirfd, const std::string& rel, int flags) {
  auto segs = SplitRelative(rel);
  if (!segs.ok()) return segs.status();
#ifdef SYS_openat2
  open_how how{};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  const char* path = rel.empty() ? "." : rel.c_str();
  long fd;
  do {
    fd = ::syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
  } while (fd < 0 && (errno == EINTR || errno == EAGAIN));
  if (fd >= 0) return UniqueFd(static_cast<int>(fd));
  // Seccomp profiles of some container runtimes answer EPERM for syscalls they do not know.
  if (errno != ENOSYS && errno != EPERM) return OpenError(errno, rel);
#endif
  return OpenBeneathByWalk(dirfd, rel, flags);
}

absl::StatusOr<std::vector<std::string>> ListDir(int dirfd) {
  int dup = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dup < 0) return ErrnoStatus(errno, "opening a folder to list it");
  DIR* d = ::fdopendir(dup);
  if (d == nullptr) {
    int e = errno;
    ::close(dup);
    return ErrnoStatus(e, "listing a folder");
  }
  std::vector<std::string> names;
  errno = 0;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(std::move(n));
    errno = 0;
  }
  int err = errno;
  ::closedir(d);
  if (err != 0) return ErrnoStatus(err, "listing a folder");
  std::sort(names.begin(), names.end());
  return names;
}

FdRangeStreambuf::FdRangeStreambuf(int fd, int64_t offset, int64_t length)
    : fd_(fd), begin_(offset), pos_(offset), end_(offset + length), buf_(1 << 16) {}

FdRangeStreambuf::pos_type FdRangeStreambuf::seekoff(off_type off, std::ios_base::seekdir dir,
                                                     std::ios_base::openmode which) {
  int64_t cur = pos_ - (egptr() - gptr()) - begin_;
  int64_t base = dir == std::ios_base::beg ? 0 : dir == std::ios_base::cur ? cur : end_ - begin_;
  return seekpos(pos_type(base + off), which);
}

FdRangeStreambuf::pos_type FdRangeStreambuf::seekpos(pos_type pos, std::ios_base::openmode which) {
  int64_t p = static_cast<int64_t>(pos);
  if (!(which & std::ios_base::in) || p < 0 || p > end_ - begin_) return pos_type(off_type(-1));
  pos_ = begin_ + p;
  setg(buf_.data(), buf_.data(), buf_.data());
  return pos_type(p);
}

FdRangeStreambuf::int_type FdRangeStreambuf::underflow() {
  if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
  if (pos_ >= end_ || error_ != 0) return traits_type::eof();
  size_t want = static_cast<size_t>(std::min<int64_t>(end_ - pos_, static_cast<int64_t>(buf_.size())));
  ssize_t n;
  do {
    n = ::pread(fd_, buf_.data(), want, pos_);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    error_ = errno;
    // istream turns an exception from its streambuf into badbit, which the stores report as a failed read
    // (an end of file would upload a silently truncated object).
    throw std::runtime_error(absl::StrCat("read error: ", std::strerror(error_)));
  }
  if (n == 0) return traits_type::eof();
  pos_ += n;
  setg(buf_.data(), buf_.data(), buf_.data() + n);
  return traits_type::to_int_type(*gptr());
}

}  // namespace falcon::runner
