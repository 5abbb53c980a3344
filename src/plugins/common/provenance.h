// Where a record's input came from. Inside an analysis Pod the plugins read staged copies of the
// artifacts; records name the artifact's URI (what the user registered), the analysis id, and the staged
// copy only as `local_path`. The runner describes what it staged in a manifest file (docs/plugins.md,
// "Provenance"): FALCON_INPUT_MANIFEST names it, FALCON_INPUT_DIR is the folder the names are relative to,
// FALCON_ANALYSIS_ID the analysis. Without them (a plugin run by hand) `source` is the path as given.
// Immutable after construction; thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace falcon::plugins {

struct Provenance {
  std::string source;       // the artifact URI when known, else the local path
  std::string analysis_id;  // empty when not run by the runner
  std::string local_path;   // the staged path, only when `source` is a URI
};

class ProvenanceResolver {
 public:
  struct Entry {
    std::string staged;  // the top-level name below the input folder ("x.xplane.pb", "run1")
    std::string uri;     // the artifact URI; a prefix URI ends with '/'
  };
  ProvenanceResolver() = default;
  ProvenanceResolver(std::string analysis_id, std::string input_dir, std::vector<Entry> entries);

  // Reads FALCON_ANALYSIS_ID, FALCON_INPUT_DIR and the manifest named by FALCON_INPUT_MANIFEST from `env`.
  // INVALID_ARGUMENT when the manifest is named but cannot be read or is not the documented JSON.
  static absl::StatusOr<ProvenanceResolver> FromEnv(const std::map<std::string, std::string>& env);

  // The provenance of a local file: below the input folder, its staged entry's URI (a file inside a
  // staged prefix gets the prefix URI plus its relative path); elsewhere the path itself.
  Provenance Resolve(const std::string& local_path) const;

 private:
  std::string analysis_id_;
  std::string input_dir_;  // normalized, ending in '/'; empty when unknown
  std::map<std::string, std::string> uris_;  // staged name -> URI
};

}  // namespace falcon::plugins
