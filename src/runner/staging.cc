#include "runner/staging.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "runner/fd_io.h"

namespace falcon::runner {

namespace fs = std::filesystem;

namespace {

// Files a local object store is still writing (objstore's reserved temp prefix); the store never lists them.
constexpr char kStoreTempPrefix[] = ".falcon-tmp-";

const char* KindOf(mode_t m) {
  if (S_ISLNK(m)) return "a symbolic link (links are not followed)";
  if (S_ISFIFO(m)) return "a fifo";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
  return "not a regular file or folder";
}

absl::Status CopyFd(int src, int dst, const std::string& what, int64_t* bytes) {
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(src, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, absl::StrCat("reading ", what));
    }
    if (n == 0) return absl::OkStatus();
    const char* p = buf;
    while (n > 0) {
      ssize_t w = ::write(dst, p, static_cast<size_t>(n));
      if (w < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus(errno, absl::StrCat("writing the staged copy of ", what));
      }
      p += w;
      n -= w;
      *bytes += w;
    }
  }
}

// A destination folder created on first use, so empty source folders leave no trace (as the store's
// listing of objects never did).
struct LazyDir {
  LazyDir* parent = nullptr;
  int parent_fd = -1;  // for the top: the folder to create `name` in
  std::string name;
  UniqueFd fd;

  absl::StatusOr<int> Get() {
    if (fd.valid()) return fd.get();
    int at = parent_fd;
    if (parent != nullptr) {
      FALCON_ASSIGN_OR_RETURN(at, parent->Get());
    }
    if (::mkdirat(at, name.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoStatus(errno, absl::StrCat("creating the staging folder ", name));
    }
    int f = ::openat(at, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (f < 0) return ErrnoStatus(errno, absl::StrCat("opening the staging folder ", name));
    fd = UniqueFd(f);
    return fd.get();
  }
};

absl::Status CopyRegular(int src, int dstdir, const std::string& name, const std::string& what, int64_t* bytes) {
  int out = ::openat(dstdir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (out < 0) return ErrnoStatus(errno, absl::StrCat("creating the staged copy of ", what));
  UniqueFd o(out);
  return CopyFd(src, o.get(), what, bytes);
}

struct WalkStats {
  int64_t files = 0;
  int64_t bytes = 0;
};

// Copies the folder `src` into `dst`, entry by entry, never following a link. `uri` names `src` in
// messages (ends with '/').
absl::Status CopyTree(int src, LazyDir& dst, const std::string& uri, int depth, WalkStats* stats,
                      const Stager::LogFn& log) {
  if (depth > Stager::kMaxDepth) {
    return absl::ResourceExhaustedError(
        absl::StrCat("input ", uri, " is nested more than ", Stager::kMaxDepth, " folders deep"));
  }
  FALCON_ASSIGN_OR_RETURN(auto names, ListDir(src));
  for (const auto& name : names) {
    if (absl::StartsWith(name, kStoreTempPrefix)) continue;
    std::string what = uri + name;
    struct stat st;
    if (::fstatat(src, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;  // removed meanwhile
      return ErrnoStatus(errno, absl::StrCat("looking up ", what));
    }
    if (S_ISDIR(st.st_mode)) {
      int f = ::openat(src, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (f < 0) return ErrnoStatus(errno, absl::StrCat("opening ", what));
      UniqueFd sub(f);
      LazyDir child{&dst, -1, name, {}};
      FALCON_RETURN_IF_ERROR(CopyTree(sub.get(), child, what + "/", depth + 1, stats, log));
      continue;
    }
    if (!S_ISREG(st.st_mode)) {
      log(absl::StrCat("skipped ", what, ": ", KindOf(st.st_mode)));
      continue;
    }
    // O_NONBLOCK: if a fifo replaced the file since fstatat, opening it must not hang; fstat tells.
    int f = ::openat(src, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (f < 0) {
      if (errno == ELOOP) {
        log(absl::StrCat("skipped ", what, ": ", KindOf(S_IFLNK)));
        continue;
      }
      return ErrnoStatus(errno, absl::StrCat("opening ", what));
    }
    UniqueFd in(f);
    if (::fstat(in.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
      log(absl::StrCat("skipped ", what, ": ", KindOf(st.st_mode)));
      continue;
    }
    FALCON_ASSIGN_OR_RETURN(int dfd, dst.Get());
    FALCON_RETURN_IF_ERROR(CopyRegular(in.get(), dfd, name, what, &stats->bytes));
    ++stats->files;
  }
  return absl::OkStatus();
}

}  // namespace

Stager::Stager(std::vector<InputRoot> roots, fs::path input_dir, LogFn log, StoreOpener open_store)
    : roots_(std::move(roots)),
      input_dir_(std::move(input_dir)),
      log_(std::move(log)),
      open_store_(std::move(open_store)) {
  if (!open_store_) open_store_ = [](const std::string& url) { return objstore::OpenObjectStore(url); };
}

fs::path Stager::UniquePath(const fs::path& p) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(p, ec))) return p;
  for (int i = 1;; ++i) {
    fs::path c = p;
    c += absl::StrCat("-", i);
    if (!fs::exists(fs::symlink_status(c, ec))) return c;
  }
}

absl::StatusOr<objstore::ObjectStore*> Stager::StoreFor(const std::string& root_url) {
  auto it = stores_.find(root_url);
  if (it != stores_.end()) return it->second.get();
  FALCON_ASSIGN_OR_RETURN(auto s, open_store_(root_url));
  auto* raw = s.get();
  stores_[root_url] = std::move(s);
  return raw;
}

absl::Status Stager::StageInput(const std::string& uri) {
  auto checked = CheckInputUri(uri, roots_);
  if (!checked.ok()) {
    if (absl::IsPermissionDenied(checked.status())) {
      return absl::PermissionDeniedError(absl::StrCat(
          checked.status().message(), "; the deployment allows inputs only under --allowed-input-root"));
    }
    return checked.status();
  }
  if (checked->root.scheme == InputRoot::Scheme::kFile) return StageLocal(uri, *checked);
  return StageFromStore(uri, *checked);
}

absl::Status Stager::StageLocal(const std::string& uri, const CheckedInput& in) {
  // The root itself is the deployment's choice (or the input's own parent folder): its path is trusted;
  // nothing below it is. O_PATH: resolving beneath it needs only search permission (a root of mode 0711
  // works), as a path lookup would.
  std::string root_path = in.root.LocalPath();
  int r = ::open(root_path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (r < 0) {
    return Annotate(ErrnoStatus(errno, absl::StrCat("opening ", root_path)),
                    absl::StrCat("input ", uri, " not found"));
  }
  UniqueFd root(r);
  int flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | (in.trailing_slash ? O_DIRECTORY : 0);
  auto opened = OpenBeneath(root.get(), in.RelPath(), flags);
  if (!opened.ok()) {
    if (absl::IsNotFound(opened.status())) {
      return absl::NotFoundError(absl::StrCat("input ", uri, " not found: no object and no objects under it"));
    }
    if (absl::IsPermissionDenied(opened.status())) {
      return absl::PermissionDeniedError(absl::StrCat("input ", uri, " refused below the root ",
                                                      in.root.ToString(), ": ", opened.status().message()));
    }
    return Annotate(opened.status(), absl::StrCat("input ", uri));
  }
  struct stat st;
  if (::fstat(opened->get(), &st) != 0) return ErrnoStatus(errno, absl::StrCat("stat of ", uri));
  std::string base = !in.rel.empty() ? in.rel.back()
                     : !in.root.segments.empty() ? in.root.segments.back()
                                                 : "root";
  if (S_ISREG(st.st_mode)) {
    fs::path dest = UniquePath(input_dir_ / base);
    int d = ::open(input_dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0) return ErrnoStatus(errno, absl::StrCat("opening ", input_dir_.string()));
    UniqueFd dir(d);
    int64_t bytes = 0;
    FALCON_RETURN_IF_ERROR(CopyRegular(opened->get(), dir.get(), dest.filename().string(), uri, &bytes));
    log_(absl::StrCat("staged ", uri, " -> ", dest.string(), " (", bytes, " bytes)"));
    staged_.push_back({dest.filename().string(), uri});
    return absl::OkStatus();
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::PermissionDeniedError(absl::StrCat("input ", uri, " refused: ", KindOf(st.st_mode)));
  }
  fs::path dest_root = UniquePath(input_dir_ / base);
  int d = ::open(input_dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d < 0) return ErrnoStatus(errno, absl::StrCat("opening ", input_dir_.string()));
  UniqueFd dir(d);
  LazyDir top{nullptr, dir.get(), dest_root.filename().string(), {}};
  WalkStats stats;
  std::string shown = uri.back() == '/' ? uri : uri + "/";
  FALCON_RETURN_IF_ERROR(CopyTree(opened->get(), top, shown, 0, &stats, log_));
  if (stats.files == 0) {
    return absl::NotFoundError(absl::StrCat("input ", uri, " not found: no object and no objects under it"));
  }
  log_(absl::StrCat("staged ", uri, " -> ", dest_root.string(), "/ (", stats.files, " objects, ", stats.bytes,
                    " bytes)"));
  staged_.push_back({dest_root.filename().string(), shown});
  return absl::OkStatus();
}

absl::Status Stager::StageFromStore(const std::string& uri, const CheckedInput& in) {
  std::string root_url = absl::StrCat("gs://", in.root.bucket);
  FALCON_ASSIGN_OR_RETURN(objstore::ObjectStore * store, StoreFor(root_url));
  std::vector<std::string> all = in.root.segments;
  all.insert(all.end(), in.rel.begin(), in.rel.end());
  std::string key = absl::StrJoin(all, "/");
  std::string prefix;
  if (!key.empty() && !in.trailing_slash) {
    auto st = store->Stat(key);
    if (st.ok()) {
      fs::path dest = UniquePath(input_dir_ / all.back());
      FALCON_RETURN_IF_ERROR(Annotate(store->GetToFile(key, dest), absl::StrCat("downloading ", uri)));
      log_(absl::StrCat("staged ", uri, " -> ", dest.string(), " (", st->size, " bytes)"));
      staged_.push_back({dest.filename().string(), uri});
      return absl::OkStatus();
    }
    if (!absl::IsNotFound(st.status()) && !absl::IsInvalidArgument(st.status())) {
      return Annotate(st.status(), absl::StrCat("looking up ", uri));
    }
  }
  prefix = key.empty() ? "" : key + "/";
  FALCON_ASSIGN_OR_RETURN(auto objects, store->List(prefix));
  if (objects.empty()) {
    return absl::NotFoundError(absl::StrCat("input ", uri, " not found: no object and no objects under it"));
  }
  // Object names are data anyone with write access to the bucket chose: check each before it becomes a path.
  for (const auto& obj : objects) {
    if (!absl::StartsWith(obj.key, prefix) || !SplitRelative(obj.key.substr(prefix.size())).ok() ||
        obj.key.size() == prefix.size()) {
      return absl::PermissionDeniedError(
          absl::StrCat("input ", uri, " refused: object '", absl::CHexEscape(obj.key),
                       "' has an empty, '.' or '..' segment below the prefix and would be staged outside "
                       "the input folder"));
    }
  }
  std::string base = all.empty() ? "root" : all.back();
  fs::path dest_root = UniquePath(input_dir_ / base);
  int64_t bytes = 0;
  for (const auto& obj : objects) {
    fs::path dest = dest_root / obj.key.substr(prefix.size());
    FALCON_RETURN_IF_ERROR(
        Annotate(store->GetToFile(obj.key, dest), absl::StrCat("downloading ", store->Uri(obj.key))));
    bytes += obj.size;
  }
  log_(absl::StrCat("staged ", uri, " -> ", dest_root.string(), "/ (", objects.size(), " objects, ", bytes,
                    " bytes)"));
  staged_.push_back({dest_root.filename().string(), absl::EndsWith(uri, "/") ? uri : uri + "/"});
  return absl::OkStatus();
}

absl::Status StageScript(objstore::ObjectStore& store, const std::string& key, const fs::path& dest) {
  FALCON_RETURN_IF_ERROR(
      Annotate(store.GetToFile(key, dest), absl::StrCat("downloading the script ", store.Uri(key))));
  if (::chmod(dest.c_str(), 0755) != 0) return ErrnoStatus(errno, absl::StrCat("chmod of ", dest.string()));
  return absl::OkStatus();
}

}  // namespace falcon::runner
