// trace-summary: per-process/thread busy time, per-op self time and top ops of Chrome trace event JSON.
#include "plugins/common/plugin_main.h"
#include "plugins/trace_summary/trace_reader.h"
#include "plugins/trace_summary/trace_stats.h"

int main(int argc, char** argv) {
  using namespace falcon::plugins;
  PluginInfo info;
  info.name = "trace-summary";
  info.description =
      "Summarises Chrome trace event JSON (*.trace.json, *.json, optionally .gz): per process and thread the "
      "busy time and per-op total and self time, and the top 20 ops of each file by self time. Streams the "
      "input; memory grows with the number of events' spans (24 bytes each), not with the file size.";
  info.file_kinds = "*.trace.json, *.json and their .gz forms";
  info.filter = [](const std::string& name) { return HasSuffixMaybeGz(name, ".json"); };
  return PluginMain(
      info,
      [&](const std::string& path, JsonlWriter& out) -> absl::Status {
        auto in = InputFile::Open(path);
        if (!in.ok()) return in.status();
        // One reader per file: PluginMain analyses several files on worker threads at once, and a reader
        // holds its parser's buffers.
        TraceReader reader;
        TraceStats stats;
        absl::Status s = reader.Read(**in, [&](const RawEvent& e) { stats.Add(e); });
        if (!s.ok()) return s;  // partial figures of a broken file would mislead; the error record says why
        stats.Write(out);
        return absl::OkStatus();
      },
      argc, argv);
}
