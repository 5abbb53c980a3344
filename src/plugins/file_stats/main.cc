// file-stats: one JSONL record per artifact file (path, size, sha256, detected format).
#include <cstdlib>
#include <filesystem>

#include "absl/strings/match.h"
#include "plugins/common/plugin_main.h"
#include "plugins/file_stats/file_stats.h"

int main(int argc, char** argv) {
  using namespace falcon::plugins;
  PluginInfo info;
  info.name = "file-stats";
  info.description =
      "Writes one record per input file: {\"record_type\":\"file\",\"path\",\"size\",\"sha256\",\"format\"} "
      "where format is detected from the content and the name (gzip, json, jsonl, xplane, protobuf, hlo, "
      "text, binary; gzip files also get content_format). Streams every file once.";
  info.file_kinds = "every file";
  info.filter = [](const std::string&) { return true; };
  // Paths under $FALCON_INPUT_DIR are reported relative to it (what the user staged), others as given.
  std::string input_dir;
  if (const char* d = std::getenv("FALCON_INPUT_DIR")) {
    input_dir = std::filesystem::path(d).lexically_normal().string();
    if (!input_dir.empty() && input_dir.back() != '/') input_dir += '/';
  }
  return PluginMain(
      info,
      [&](const std::string& path, JsonlWriter& out) -> absl::Status {
        auto stats = ComputeFileStats(path);
        if (!stats.ok()) return stats.status();
        std::string norm = std::filesystem::path(path).lexically_normal().string();
        std::string shown = !input_dir.empty() && absl::StartsWith(norm, input_dir)
                                ? norm.substr(input_dir.size())
                                : path;
        WriteFileRecord(shown, *stats, out);
        return absl::OkStatus();
      },
      argc, argv);
}
