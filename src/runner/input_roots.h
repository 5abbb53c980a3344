// Which artifact URIs an analysis may read: the deployment's allowed input roots (`gs://bucket[/prefix]`
// or `file:///abs/path`) and the rule that checks a URI against them. Pure functions with no I/O, so the
// runner (before staging) and the API server (at registration) apply exactly the same rule.
// Thread-safe (no shared state).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace falcon::runner {

// One allowed root. Matching is by whole path segments: `gs://b/exps` allows `gs://b/exps/x` but not
// `gs://b/exps-other/x`.
struct InputRoot {
  enum class Scheme { kFile, kGs };
  Scheme scheme = Scheme::kFile;
  std::string bucket;                 // kGs only
  std::vector<std::string> segments;  // kFile: the absolute path's segments; kGs: the key prefix's

  // Canonical form, always ending in '/': "file:///data/exps/", "gs://b/", "gs://b/exps/".
  std::string ToString() const;
  // kFile: the local folder ("/data/exps"; "/" for the file system root).
  std::string LocalPath() const;
};

// Parses a root as given to --allowed-input-root. INVALID_ARGUMENT for another scheme, a relative file
// path, a missing bucket, or a '.' / '..' segment.
absl::StatusOr<InputRoot> ParseInputRoot(const std::string& root);

// An input URI that passed the check.
struct CheckedInput {
  InputRoot root;                // the allowed root it lies under
  std::vector<std::string> rel;  // its segments below root (empty: the root itself)
  bool trailing_slash = false;   // the URI ended in '/': it names a prefix (a folder)

  // The segments below the root joined by '/' ("" for the root itself).
  std::string RelPath() const;
};

// Checks an artifact URI against the allowed roots.
// - INVALID_ARGUMENT when the URI is malformed: not file:///abs/path or gs://bucket/key, a '.' or '..'
//   segment (also percent-encoded, "%2e%2e"), a NUL or other control character, or an empty segment
//   ("//") inside a gs:// key. Empty segments of a file:// path are dropped ("/a//b" is "/a/b").
// - PERMISSION_DENIED when it lies under none of `roots`; the message names every allowed root.
// With no roots at all (a deployment that configured none) every well-formed URI is allowed, and its
// root is its parent folder (file://) or its bucket (gs://): staging still never follows a link below
// that root, which is how the runner behaved before roots existed, minus the links.
absl::StatusOr<CheckedInput> CheckInputUri(const std::string& uri, const std::vector<InputRoot>& roots);

// "file:///data/, gs://b/exps/" (for messages); "(none)" when empty.
std::string DescribeRoots(const std::vector<InputRoot>& roots);

}  // namespace falcon::runner
