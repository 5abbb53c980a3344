#include "runner/collector.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <istream>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "runner/fd_io.h"

namespace falcon::runner {

namespace {

constexpr int kMaxDepth = 64;  // also bounds the descriptors held open by the walk

const char* KindOf(mode_t m) {
  if (S_ISLNK(m)) return "a symbolic link (links are not followed)";
  if (S_ISFIFO(m)) return "a fifo";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
  return "not a regular file";
}

struct Found {
  std::vector<std::string> names;  // path below the output folder
  std::string key;
  int64_t size;
  dev_t dev;
  ino_t ino;
};

class Walker {
 public:
  Walker(const CollectorOptions& o, const std::function<void(const std::string&)>& log, CollectSummary* s)
      : o_(o), log_(log), summary_(s) {}

  // Fills files_; RESOURCE_EXHAUSTED as soon as a bound is crossed (anything unreadable is skipped).
  absl::Status Walk(int dirfd, std::vector<std::string>& names) {
    if (static_cast<int>(names.size()) > kMaxDepth) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the output folder is nested more than ", kMaxDepth, " folders deep"));
    }
    auto entries = ListDir(dirfd);
    if (!entries.ok()) {
      Skip(names, std::string(entries.status().message()));
      return absl::OkStatus();
    }
    for (const auto& name : *entries) {
      if (++entries_ > o_.max_files) {
        return absl::ResourceExhaustedError(
            absl::StrCat("the output folder holds more than ", o_.max_files,
                         " entries (--max-result-files=", o_.max_files, ")"));
      }
      names.push_back(name);
      absl::Status s = Visit(dirfd, names);
      names.pop_back();
      FALCON_RETURN_IF_ERROR(s);
    }
    return absl::OkStatus();
  }

  std::vector<Found>& files() { return files_; }

 private:
  void Skip(const std::vector<std::string>& names, const std::string& why) {
    ++summary_->skipped;
    log_(absl::StrCat("skipped output ", absl::CHexEscape(absl::StrJoin(names, "/")), ": ", why));
  }

  absl::Status Visit(int dirfd, std::vector<std::string>& names) {
    const std::string& name = names.back();
    struct stat st;
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) return absl::OkStatus();  // removed meanwhile
      Skip(names, std::strerror(errno));
      return absl::OkStatus();
    }
    auto key = ResultKey(o_.result_prefix, names);
    if (!key.ok()) {
      Skip(names, "its name is not usable as a result name (control character)");
      return absl::OkStatus();
    }
    if (S_ISDIR(st.st_mode)) {
      int f = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (f < 0) {
        Skip(names, errno == ELOOP || errno == ENOTDIR ? "replaced while collecting" : std::strerror(errno));
        return absl::OkStatus();
      }
      UniqueFd sub(f);
      return Walk(sub.get(), names);
    }
    if (!S_ISREG(st.st_mode)) {
      Skip(names, KindOf(st.st_mode));
      return absl::OkStatus();
    }
    if (o_.reserved_keys.count(*key)) {
      Skip(names, "the runner writes this result itself");
      return absl::OkStatus();
    }
    bytes_ += st.st_size;
    if (bytes_ > o_.max_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat("the output files hold more than ", o_.max_bytes,
                                                       " bytes (--max-result-bytes=", o_.max_bytes, ")"));
    }
    files_.push_back(Found{names, *key, static_cast<int64_t>(st.st_size), st.st_dev, st.st_ino});
    return absl::OkStatus();
  }

  const CollectorOptions& o_;
  const std::function<void(const std::string&)>& log_;
  CollectSummary* summary_;
  int64_t entries_ = 0;
  int64_t bytes_ = 0;
  std::vector<Found> files_;
};

}  // namespace

absl::StatusOr<std::string> ResultKey(const std::string& result_prefix, const std::vector<std::string>& names) {
  if (names.empty()) return absl::InvalidArgumentError("a result needs a name");
  for (const auto& n : names) {
    bool bad = n.empty() || n == "." || n == ".." ||
               std::any_of(n.begin(), n.end(), [](char c) {
                 auto u = static_cast<unsigned char>(c);
                 return c == '/' || u < 0x20 || u == 0x7f;
               });
    if (bad) {
      return absl::InvalidArgumentError(
          absl::StrCat("output name '", absl::CHexEscape(n), "' cannot be a result name"));
    }
  }
  return result_prefix + absl::StrJoin(names, "/");
}

absl::Status CollectResults(const std::string& output_dir, const CollectorOptions& opts,
                            objstore::ObjectStore& store, const std::function<void(const std::string&)>& log,
                            CollectSummary* summary) {
  *summary = {};
  // The folder itself may have been swapped for a link by the analysis (its parent is the analysis').
  std::string parent = output_dir.substr(0, output_dir.find_last_of('/'));
  std::string leaf = output_dir.substr(output_dir.find_last_of('/') + 1);
  int p = ::open(parent.empty() ? "/" : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (p < 0) return ErrnoStatus(errno, absl::StrCat("opening ", parent));
  UniqueFd pfd(p);
  auto out = OpenBeneath(pfd.get(), leaf, O_RDONLY | O_DIRECTORY);
  if (!out.ok()) {
    if (absl::IsNotFound(out.status())) return absl::OkStatus();  // the command removed it: no results
    log(absl::StrCat("skipped the output folder ", output_dir, ": ", out.status().message(),
                     "; no results collected"));
    ++summary->skipped;
    return absl::OkStatus();
  }
  Walker w(opts, log, summary);
  std::vector<std::string> names;
  absl::Status walked = w.Walk(out->get(), names);
  if (!walked.ok()) return walked;
  absl::Status first;
  for (const auto& f : w.files()) {
    std::string rel = absl::StrJoin(f.names, "/");
    // Reopen through the checked folder, never following a link: the entry may have changed since.
    auto fd = OpenBeneath(out->get(), rel, O_RDONLY | O_NONBLOCK | O_NOCTTY);
    struct stat st;
    if (!fd.ok() || ::fstat(fd->get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_dev != f.dev ||
        st.st_ino != f.ino) {
      ++summary->skipped;
      log(absl::StrCat("skipped output ", absl::CHexEscape(rel), ": replaced while collecting"));
      continue;
    }
    // Never more than was counted against --max-result-bytes, even if something still appends to it.
    int64_t len = std::min<int64_t>(f.size, st.st_size);
    FdRangeStreambuf buf(fd->get(), 0, len);
    std::istream in(&buf);
    absl::Status s = store.Put(f.key, in);
    if (s.ok()) {
      ++summary->uploaded;
      summary->bytes += len;
      log(absl::StrCat("uploaded result ", store.Uri(f.key), " (", len, " bytes)"));
    } else {
      log(absl::StrCat("ERROR uploading result ", output_dir, "/", absl::CHexEscape(rel), ": ", s.message()));
      if (first.ok()) first = s;
    }
  }
  return first;
}

}  // namespace falcon::runner
