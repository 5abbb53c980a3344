#include "apiserver/options.h"

#include <filesystem>

namespace falcon::apiserver {

absl::StatusOr<std::string> DefaultObjectStoreUrl(const std::string& db_url) {
  const std::string scheme = "sqlite://";
  if (db_url.rfind(scheme, 0) != 0) {
    return absl::InvalidArgumentError("--object-store is required with --db=" + RedactUrl(db_url) +
                                      " (e.g. --object-store=file:///var/lib/falcon/objects or "
                                      "gs://bucket)");
  }
  std::string path = db_url.substr(scheme.size());
  auto q = path.find('?');
  if (q != std::string::npos) path = path.substr(0, q);
  if (path.empty() || path == ":memory:") {
    return absl::InvalidArgumentError(
        "--object-store is required with an in-memory SQLite database (e.g. "
        "--object-store=file:///tmp/falcon-objects)");
  }
  std::filesystem::path p = std::filesystem::absolute(path).lexically_normal();
  return "file://" + (p.parent_path() / "objects").string();
}

std::string RedactUrl(const std::string& url) {
  auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return url;
  auto at = url.find('@', scheme_end + 3);
  if (at == std::string::npos) return url;
  auto colon = url.find(':', scheme_end + 3);
  if (colon == std::string::npos || colon > at) return url;
  return url.substr(0, colon + 1) + "***" + url.substr(at);
}

}  // namespace falcon::apiserver
