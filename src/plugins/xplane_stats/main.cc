// xplane-stats: per-plane, per-op occurrences, total and self time, and steps of XSpace profiles.
#include "plugins/common/plugin_main.h"
#include "plugins/xplane_stats/xplane_reader.h"
#include "plugins/xplane_stats/xplane_stats.h"

int main(int argc, char** argv) {
  using namespace falcon::plugins;
  PluginInfo info;
  info.name = "xplane-stats";
  info.description =
      "Reads jax.profiler / TensorFlow XSpace profiles (*.xplane.pb, optionally .gz) and writes, per plane "
      "(device or host) and line, the busy time and per-op occurrences, total time, self time and share of "
      "busy time; per-step records where step markers exist (a 'Steps' line or step_num stats); and per HLO "
      "op totals for events that carry an hlo_op stat (comparable with XProf's hlo_stats).";
  info.file_kinds = "*.xplane.pb (and .gz)";
  info.filter = [](const std::string& name) { return HasSuffixMaybeGz(name, ".xplane.pb"); };
  return PluginMain(
      info,
      [](const std::string& path, JsonlWriter& out) -> absl::Status {
        xplane::XPlaneStats stats(out);
        absl::Status s = xplane::ReadXSpaceFile(path, stats);
        if (s.ok()) stats.Finish();
        return s;
      },
      argc, argv);
}
