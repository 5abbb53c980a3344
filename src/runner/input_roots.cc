#include "runner/input_roots.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace falcon::runner {

namespace {

constexpr char kFileScheme[] = "file://";
constexpr char kGsScheme[] = "gs://";

// A segment that some layer (a proxy, a client library) might decode into "." or "..".
bool IsDotSegment(const std::string& seg) {
  std::string decoded = absl::StrReplaceAll(absl::AsciiStrToLower(seg), {{"%2e", "."}});
  return decoded == "." || decoded == "..";
}

bool HasControlChar(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
}

struct ParsedUri {
  InputRoot::Scheme scheme;
  std::string bucket;
  std::vector<std::string> segments;
  bool trailing_slash = false;
};

// What: "URI" or "root", for messages.
absl::StatusOr<ParsedUri> Parse(const std::string& s, const char* what) {
  if (HasControlChar(s)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", absl::CHexEscape(s),
                                                   "' contains a control character"));
  }
  ParsedUri p;
  std::string path;
  bool keep_empty;
  if (absl::StartsWith(s, kFileScheme)) {
    p.scheme = InputRoot::Scheme::kFile;
    path = s.substr(sizeof(kFileScheme) - 1);
    if (path.empty() || path[0] != '/') {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " '", s, "' must be file:///abs/path (three slashes: an absolute path)"));
    }
    path = path.substr(1);
    keep_empty = false;
  } else if (absl::StartsWith(s, kGsScheme)) {
    p.scheme = InputRoot::Scheme::kGs;
    std::string rest = s.substr(sizeof(kGsScheme) - 1);
    size_t slash = rest.find('/');
    p.bucket = rest.substr(0, slash);
    if (p.bucket.empty() || IsDotSegment(p.bucket)) {
      return absl::InvalidArgumentError(absl::StrCat(what, " '", s, "' names no bucket: gs://bucket/key"));
    }
    path = slash == std::string::npos ? "" : rest.substr(slash + 1);
    keep_empty = true;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", s, "' is neither file:///abs/path nor gs://bucket/key"));
  }
  p.trailing_slash = !path.empty() && path.back() == '/';
  if (p.trailing_slash) path.pop_back();
  if (path.empty()) return p;
  for (absl::string_view v : absl::StrSplit(path, '/')) {
    std::string seg(v);
    if (seg.empty()) {
      // Distinct objects in GCS ("a//b" is not "a/b"): refuse rather than guess.
      if (keep_empty) {
        return absl::InvalidArgumentError(absl::StrCat(what, " '", s, "' has an empty segment ('//')"));
      }
      continue;
    }
    if (IsDotSegment(seg)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " '", s, "' has a '.' or '..' segment; use a plain absolute path"));
    }
    p.segments.push_back(std::move(seg));
  }
  return p;
}

}  // namespace

std::string InputRoot::ToString() const {
  std::string joined = absl::StrJoin(segments, "/");
  if (!joined.empty()) joined += '/';
  if (scheme == Scheme::kFile) return absl::StrCat("file:///", joined);
  return absl::StrCat(kGsScheme, bucket, "/", joined);
}

std::string InputRoot::LocalPath() const { return "/" + absl::StrJoin(segments, "/"); }

std::string CheckedInput::RelPath() const { return absl::StrJoin(rel, "/"); }

absl::StatusOr<InputRoot> ParseInputRoot(const std::string& root) {
  auto p = Parse(root, "input root");
  if (!p.ok()) return p.status();
  InputRoot r;
  r.scheme = p->scheme;
  r.bucket = p->bucket;
  r.segments = std::move(p->segments);
  return r;
}

std::string DescribeRoots(const std::vector<InputRoot>& roots) {
  if (roots.empty()) return "(none)";
  std::vector<std::string> names;
  for (const auto& r : roots) names.push_back(r.ToString());
  return absl::StrJoin(names, ", ");
}

absl::StatusOr<CheckedInput> CheckInputUri(const std::string& uri, const std::vector<InputRoot>& roots) {
  auto p = Parse(uri, "input URI");
  if (!p.ok()) return p.status();
  CheckedInput out;
  out.trailing_slash = p->trailing_slash;
  if (roots.empty()) {
    out.root.scheme = p->scheme;
    out.root.bucket = p->bucket;
    if (p->scheme == InputRoot::Scheme::kFile) {
      if (p->segments.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("input URI '", uri, "' names the whole file system; name a folder or a file"));
      }
      out.root.segments.assign(p->segments.begin(), p->segments.end() - 1);
      out.rel = {p->segments.back()};
    } else {
      out.rel = std::move(p->segments);
    }
    return out;
  }
  for (const auto& r : roots) {
    if (r.scheme != p->scheme || r.bucket != p->bucket) continue;
    if (r.segments.size() > p->segments.size()) continue;
    if (!std::equal(r.segments.begin(), r.segments.end(), p->segments.begin())) continue;
    out.root = r;
    out.rel.assign(p->segments.begin() + static_cast<long>(r.segments.size()), p->segments.end());
    return out;
  }
  return absl::PermissionDeniedError(absl::StrCat("input URI '", uri,
                                                  "' is outside the allowed input roots (",
                                                  DescribeRoots(roots), ")"));
}

}  // namespace falcon::runner
