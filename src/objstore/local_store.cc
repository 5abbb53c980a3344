#include "objstore/local_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"

namespace falcon::objstore {

namespace fs = std::filesystem;

namespace {

constexpr char kTempPrefix[] = ".falcon-tmp-";

int64_t MtimeMs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
}

// Prefixes may end with '/' or in the middle of a name, but never climb out of the root.
absl::Status ValidatePrefix(const std::string& prefix) {
  if (!prefix.empty() && prefix[0] == '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("prefix '", prefix, "' must be relative to the store root (no leading '/')"));
  }
  for (absl::string_view seg : absl::StrSplit(prefix, '/')) {
    if (seg == "..") {
      return absl::InvalidArgumentError(absl::StrCat("prefix '", prefix, "' must not contain '..'"));
    }
  }
  return absl::OkStatus();
}

// Removes empty folders from `dir` up to (not including) `root`. Best effort.
void PruneEmptyParents(const fs::path& root, fs::path dir) {
  while (!dir.empty() && dir != root && dir.string().size() > root.string().size()) {
    if (::rmdir(dir.c_str()) != 0) break;
    dir = dir.parent_path();
  }
}

}  // namespace

absl::Status ValidateKey(const std::string& key) {
  if (key.empty()) return absl::InvalidArgumentError("object key is empty");
  if (key[0] == '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("object key '", key, "' must be relative to the store root (no leading '/')"));
  }
  if (key.back() == '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("object key '", key, "' ends with '/': keys name objects, not folders"));
  }
  for (absl::string_view seg : absl::StrSplit(key, '/')) {
    if (seg.empty() || seg == "." || seg == "..") {
      return absl::InvalidArgumentError(absl::StrCat(
          "object key '", key, "' has an empty, '.' or '..' path segment; use a plain relative path"));
    }
    if (absl::StartsWith(seg, kTempPrefix)) {
      return absl::InvalidArgumentError(
          absl::StrCat("object key '", key, "' uses the reserved name prefix ", kTempPrefix));
    }
  }
  if (key.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError("object key contains a NUL byte");
  }
  return absl::OkStatus();
}

absl::Status AtomicWriteFile(const fs::path& dest, std::istream& in) {
  fs::path dir = dest.parent_path();
  std::string tmpl;
  int fd = -1;
  // A concurrent DeletePrefix may remove a just-created empty folder: retry a few times.
  for (int attempt = 0; attempt < 5 && fd < 0; ++attempt) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return ErrnoStatus(ec.value(), absl::StrCat("creating folder ", dir.string()));
    tmpl = (dir / absl::StrCat(kTempPrefix, "XXXXXX")).string();
    fd = ::mkstemp(tmpl.data());
    if (fd < 0 && errno != ENOENT) {
      return ErrnoStatus(errno, absl::StrCat("creating a temp file in ", dir.string()));
    }
  }
  if (fd < 0) return ErrnoStatus(ENOENT, absl::StrCat("creating a temp file in ", dir.string()));
  auto fail = [&](absl::Status s) {
    ::close(fd);
    ::unlink(tmpl.c_str());
    return s;
  };
  std::vector<char> buf(1 << 16);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    std::streamsize n = in.gcount();
    const char* p = buf.data();
    while (n > 0) {
      ssize_t w = ::write(fd, p, static_cast<size_t>(n));
      if (w < 0) {
        if (errno == EINTR) continue;
        return fail(ErrnoStatus(errno, absl::StrCat("writing ", dest.string())));
      }
      p += w;
      n -= w;
    }
  }
  if (in.bad()) return fail(absl::DataLossError(absl::StrCat("reading the input for ", dest.string())));
  if (::fchmod(fd, 0644) != 0) return fail(ErrnoStatus(errno, "chmod of temp file"));
  if (::fsync(fd) != 0) return fail(ErrnoStatus(errno, absl::StrCat("fsync of ", dest.string())));
  if (::close(fd) != 0) {
    fd = -1;
    ::unlink(tmpl.c_str());
    return ErrnoStatus(errno, absl::StrCat("closing ", dest.string()));
  }
  if (::rename(tmpl.c_str(), dest.c_str()) != 0) {
    int err = errno;
    ::unlink(tmpl.c_str());
    return ErrnoStatus(err, absl::StrCat("renaming into ", dest.string()));
  }
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<LocalObjectStore>> LocalObjectStore::Open(const fs::path& root) {
  if (!root.is_absolute()) {
    return absl::InvalidArgumentError(
        absl::StrCat("local object store root '", root.string(), "' must be an absolute path"));
  }
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) {
    return ErrnoStatus(ec.value(), absl::StrCat("creating the object store folder ", root.string()));
  }
  if (!fs::is_directory(root, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("object store root ", root.string(), " exists but is not a folder"));
  }
  return std::unique_ptr<LocalObjectStore>(new LocalObjectStore(root.lexically_normal()));
}

std::string LocalObjectStore::RootUrl() const {
  std::string r = root_.string();
  if (r.size() > 1 && r.back() == '/') r.pop_back();
  return absl::StrCat("file://", r);
}

std::string LocalObjectStore::Uri(const std::string& key) const {
  std::string r = RootUrl();
  if (r.back() != '/') r += '/';
  return r + key;
}

absl::Status LocalObjectStore::Put(const std::string& key, std::istream& in) {
  FALCON_RETURN_IF_ERROR(ValidateKey(key));
  return AtomicWriteFile(root_ / key, in);
}

absl::Status LocalObjectStore::PutFile(const std::string& key, const fs::path& local) {
  FALCON_RETURN_IF_ERROR(ValidateKey(key));
  std::ifstream in(local, std::ios::binary);
  if (!in) return ErrnoStatus(errno ? errno : ENOENT, absl::StrCat("opening ", local.string()));
  return AtomicWriteFile(root_ / key, in);
}

absl::Status LocalObjectStore::Get(const std::string& key, std::ostream& out, int64_t offset,
                                   int64_t length) {
  FALCON_RETURN_IF_ERROR(ValidateKey(key));
  if (offset < 0) return absl::InvalidArgumentError("offset must be >= 0");
  fs::path p = root_ / key;
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR || errno == EISDIR) {
      return absl::NotFoundError(absl::StrCat("object '", key, "' not found in ", RootUrl()));
    }
    return ErrnoStatus(errno, absl::StrCat("opening ", p.string()));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::NotFoundError(absl::StrCat("object '", key, "' not found in ", RootUrl()));
  }
  // At or past the end there is nothing to read (the contract, as a ranged GCS read): answered here, as
  // pread(2) refuses offsets near INT64_MAX (EINVAL) instead of reading nothing.
  if (offset >= st.st_size) {
    ::close(fd);
    return absl::OkStatus();
  }
  std::vector<char> buf(1 << 16);
  int64_t pos = offset;
  int64_t remaining = length < 0 ? INT64_MAX : length;
  remaining = std::min<int64_t>(remaining, st.st_size - offset);
  while (remaining > 0) {
    size_t want = static_cast<size_t>(std::min<int64_t>(remaining, static_cast<int64_t>(buf.size())));
    ssize_t n = ::pread(fd, buf.data(), want, pos);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return ErrnoStatus(err, absl::StrCat("reading ", p.string()));
    }
    if (n == 0) break;
    out.write(buf.data(), n);
    if (!out) {
      ::close(fd);
      return absl::InternalError(absl::StrCat("writing object '", key, "' to the output stream failed"));
    }
    pos += n;
    remaining -= n;
  }
  ::close(fd);
  return absl::OkStatus();
}

absl::Status LocalObjectStore::GetToFile(const std::string& key, const fs::path& local) {
  FALCON_RETURN_IF_ERROR(ValidateKey(key));
  std::ifstream in(root_ / key, std::ios::binary);
  if (!in || !fs::is_regular_file(root_ / key)) {
    return absl::NotFoundError(absl::StrCat("object '", key, "' not found in ", RootUrl()));
  }
  return AtomicWriteFile(local, in);
}

absl::StatusOr<ObjectInfo> LocalObjectStore::Stat(const std::string& key) {
  FALCON_RETURN_IF_ERROR(ValidateKey(key));
  struct stat st;
  fs::path p = root_ / key;
  if (::stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat("object '", key, "' not found in ", RootUrl()));
  }
  return ObjectInfo{key, static_cast<int64_t>(st.st_size), MtimeMs(st)};
}

absl::StatusOr<std::vector<ObjectInfo>> LocalObjectStore::List(const std::string& prefix) {
  FALCON_RETURN_IF_ERROR(ValidatePrefix(prefix));
  // Walk only the deepest folder that can hold matches.
  std::string dir_part;
  size_t slash = prefix.rfind('/');
  if (slash != std::string::npos) dir_part = prefix.substr(0, slash);
  fs::path start = dir_part.empty() ? root_ : root_ / dir_part;
  std::vector<ObjectInfo> out;
  std::error_code ec;
  if (!fs::is_directory(start, ec)) return out;
  fs::recursive_directory_iterator it(start, fs::directory_options::skip_permission_denied, ec), end;
  if (ec) return ErrnoStatus(ec.value(), absl::StrCat("listing ", start.string()));
  for (; it != end; it.increment(ec)) {
    if (ec) return ErrnoStatus(ec.value(), absl::StrCat("listing ", start.string()));
    const auto& entry = *it;
    std::string name = entry.path().filename().string();
    if (absl::StartsWith(name, kTempPrefix)) continue;
    std::error_code ec2;
    if (!entry.is_regular_file(ec2)) continue;
    std::string key = entry.path().lexically_relative(root_).generic_string();
    if (!absl::StartsWith(key, prefix)) continue;
    struct stat st;
    if (::stat(entry.path().c_str(), &st) != 0) continue;  // deleted meanwhile
    out.push_back(ObjectInfo{key, static_cast<int64_t>(st.st_size), MtimeMs(st)});
  }
  std::sort(out.begin(), out.end(),
            [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
  return out;
}

absl::Status LocalObjectStore::Delete(const std::string& key) {
  FALCON_RETURN_IF_ERROR(ValidateKey(key));
  fs::path p = root_ / key;
  if (::unlink(p.c_str()) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return absl::OkStatus();
    if (errno == EISDIR) return absl::OkStatus();  // a folder is not an object
    return ErrnoStatus(errno, absl::StrCat("deleting ", p.string()));
  }
  PruneEmptyParents(root_, p.parent_path());
  return absl::OkStatus();
}

absl::StatusOr<int64_t> LocalObjectStore::DeletePrefix(const std::string& prefix) {
  if (prefix.empty()) {
    return absl::InvalidArgumentError("DeletePrefix needs a non-empty prefix (refusing to empty the store)");
  }
  FALCON_ASSIGN_OR_RETURN(auto objects, List(prefix));
  int64_t n = 0;
  for (const auto& o : objects) {
    fs::path p = root_ / o.key;
    if (::unlink(p.c_str()) == 0) {
      ++n;
      PruneEmptyParents(root_, p.parent_path());
    } else if (errno != ENOENT) {
      return ErrnoStatus(errno, absl::StrCat("deleting ", p.string()));
    }
  }
  return n;
}

}  // namespace falcon::objstore
