#include "plugins/common/provenance.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace falcon::plugins {

namespace {
// Absolute (against the working directory) and lexically normal, so that a relative --input and an
// absolute FALCON_INPUT_DIR (or the other way round) compare.
std::string Normalize(const std::string& p) {
  std::error_code ec;
  std::filesystem::path a = std::filesystem::absolute(p, ec);
  return (ec ? std::filesystem::path(p) : a).lexically_normal().string();
}
}  // namespace

ProvenanceResolver::ProvenanceResolver(std::string analysis_id, std::string input_dir,
                                       std::vector<Entry> entries)
    : analysis_id_(std::move(analysis_id)) {
  if (!input_dir.empty()) {
    input_dir_ = Normalize(input_dir);
    if (input_dir_.back() != '/') input_dir_ += '/';
  }
  for (auto& e : entries) uris_[e.staged] = e.uri;
}

absl::StatusOr<ProvenanceResolver> ProvenanceResolver::FromEnv(const std::map<std::string, std::string>& env) {
  auto get = [&](const char* k) {
    auto it = env.find(k);
    return it == env.end() ? std::string() : it->second;
  };
  std::vector<Entry> entries;
  const std::string manifest = get("FALCON_INPUT_MANIFEST");
  if (!manifest.empty()) {
    constexpr size_t kMaxManifestBytes = 16 << 20;
    std::error_code ec;
    auto size = std::filesystem::file_size(manifest, ec);
    if (ec) {
      return absl::InvalidArgumentError(
          absl::StrCat("FALCON_INPUT_MANIFEST names ", manifest, ", which cannot be read: ", ec.message()));
    }
    if (size > kMaxManifestBytes) {
      return absl::InvalidArgumentError(absl::StrCat("the input manifest ", manifest, " has ", size,
                                                     " bytes; the limit is ", kMaxManifestBytes));
    }
    std::ifstream in(manifest, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    auto j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("inputs") || !j["inputs"].is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the input manifest ", manifest, " is not a JSON object with an \"inputs\" array"));
    }
    for (const auto& e : j["inputs"]) {
      if (!e.is_object() || !e.contains("staged") || !e["staged"].is_string() || !e.contains("uri") ||
          !e["uri"].is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the input manifest ", manifest, " has an entry without string \"staged\" and \"uri\""));
      }
      entries.push_back({e["staged"].get<std::string>(), e["uri"].get<std::string>()});
    }
  }
  return ProvenanceResolver(get("FALCON_ANALYSIS_ID"), get("FALCON_INPUT_DIR"), std::move(entries));
}

Provenance ProvenanceResolver::Resolve(const std::string& local_path) const {
  Provenance p;
  p.analysis_id = analysis_id_;
  p.source = local_path;
  if (input_dir_.empty() || uris_.empty()) return p;
  std::string norm = Normalize(local_path);
  if (!absl::StartsWith(norm, input_dir_)) return p;
  std::string rel = norm.substr(input_dir_.size());
  size_t slash = rel.find('/');
  std::string top = slash == std::string::npos ? rel : rel.substr(0, slash);
  auto it = uris_.find(top);
  if (it == uris_.end()) return p;
  const std::string& uri = it->second;
  if (slash == std::string::npos) {
    p.source = uri;
  } else {
    p.source = absl::StrCat(uri, absl::EndsWith(uri, "/") ? "" : "/", rel.substr(slash + 1));
  }
  p.local_path = local_path;
  return p;
}

}  // namespace falcon::plugins
