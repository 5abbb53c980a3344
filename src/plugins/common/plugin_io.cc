#include "plugins/common/plugin_io.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <system_error>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace falcon::plugins {
namespace fs = std::filesystem;

namespace {
constexpr char kLinePayload[] = "falcon.dev/input-line";
constexpr char kOffsetPayload[] = "falcon.dev/input-offset";

std::optional<int64_t> GetIntPayload(const absl::Status& s, const char* key) {
  auto p = s.GetPayload(key);
  if (!p.has_value()) return std::nullopt;
  int64_t v = 0;
  if (!absl::SimpleAtoi(std::string(*p), &v)) return std::nullopt;
  return v;
}
}  // namespace

bool HasSuffixMaybeGz(const std::string& name, const std::string& suffix) {
  auto ends = [](const std::string& s, const std::string& suf) {
    return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
  };
  if (ends(name, suffix)) return true;
  if (ends(name, ".gz")) return ends(name.substr(0, name.size() - 3), suffix);
  return false;
}

absl::StatusOr<std::vector<std::string>> CollectInputs(const std::vector<std::string>& paths,
                                                       const FileFilter& filter) {
  std::vector<std::string> out;
  for (const auto& p : paths) {
    std::error_code ec;
    auto st = fs::status(p, ec);
    if (ec || !fs::exists(st)) {
      return absl::NotFoundError(absl::StrCat("input ", p, " does not exist"));
    }
    if (fs::is_directory(st)) {
      std::vector<std::string> found;
      auto it = fs::recursive_directory_iterator(
          p, fs::directory_options::skip_permission_denied | fs::directory_options::follow_directory_symlink,
          ec);
      if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot list ", p, ": ", ec.message()));
      for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (ec) break;
        std::error_code fec;
        if (!it->is_regular_file(fec)) continue;
        if (filter(it->path().filename().string())) found.push_back(it->path().string());
      }
      std::sort(found.begin(), found.end());
      out.insert(out.end(), found.begin(), found.end());
    } else {
      out.push_back(p);
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<InputFile>> InputFile::Open(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  gzbuffer(f, 1 << 18);
  return std::unique_ptr<InputFile>(new InputFile(path, f));
}

InputFile::~InputFile() { gzclose(file_); }

absl::StatusOr<size_t> InputFile::Read(char* buf, size_t n) {
  size_t total = 0;
  while (total < n) {
    unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - total, 1u << 30));
    int r = gzread(file_, buf + total, chunk);
    if (r < 0) {
      int errnum = 0;
      const char* msg = gzerror(file_, &errnum);
      return absl::DataLossError(
          absl::StrCat(path_, ": corrupt compressed data at offset ", offset_ + total, ": ", msg));
    }
    if (r == 0) {
      // gzread returns 0 both at a clean end and on a truncated gzip stream; gzerror tells them apart.
      int errnum = 0;
      const char* msg = gzerror(file_, &errnum);
      if (errnum != Z_OK && errnum != Z_BUF_ERROR) {
        return absl::DataLossError(absl::StrCat(path_, ": ", msg));
      }
      if (errnum == Z_BUF_ERROR) {
        return absl::DataLossError(
            absl::StrCat(path_, ": gzip stream truncated at offset ", offset_ + total));
      }
      break;
    }
    total += static_cast<size_t>(r);
  }
  offset_ += total;
  return total;
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  auto f = InputFile::Open(path);
  if (!f.ok()) return f.status();
  std::string data;
  constexpr size_t kChunk = 1 << 20;
  for (;;) {
    size_t old = data.size();
    data.resize(old + kChunk);
    auto n = (*f)->Read(data.data() + old, kChunk);
    if (!n.ok()) return n.status();
    data.resize(old + *n);
    if (*n == 0) break;
  }
  return data;
}

absl::Status InputError(const std::string& message, std::optional<int64_t> line,
                        std::optional<int64_t> offset) {
  absl::Status s = absl::InvalidArgumentError(message);
  if (line) s.SetPayload(kLinePayload, absl::Cord(absl::StrCat(*line)));
  if (offset) s.SetPayload(kOffsetPayload, absl::Cord(absl::StrCat(*offset)));
  return s;
}

absl::Status AlreadyReported(absl::Status s) {
  s.SetPayload("falcon.dev/already-reported", absl::Cord("1"));
  return s;
}
bool IsAlreadyReported(const absl::Status& s) {
  return s.GetPayload("falcon.dev/already-reported").has_value();
}

std::optional<int64_t> ErrorLine(const absl::Status& s) { return GetIntPayload(s, kLinePayload); }
std::optional<int64_t> ErrorOffset(const absl::Status& s) { return GetIntPayload(s, kOffsetPayload); }

}  // namespace falcon::plugins
