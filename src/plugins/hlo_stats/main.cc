// hlo-stats: per-module and per-instruction statistics of XLA HLO text dumps.
#include "plugins/common/plugin_main.h"
#include "plugins/hlo_stats/hlo_stats.h"

int main(int argc, char** argv) {
  using namespace falcon::plugins;
  PluginInfo info;
  info.name = "hlo-stats";
  info.description =
      "Reads XLA HLO text (--xla_dump_to files such as module_*.before_optimizations.txt / "
      "*after_optimizations.txt, and .hlo files) and writes per module the instruction and computation "
      "counts, fusions by kind, collectives by kind, parameter and output bytes and the estimated FLOPs and "
      "bytes, and per instruction its opcode, shape, computation, FLOP/byte estimates (XLA HloCostAnalysis "
      "conventions) and source metadata.";
  info.file_kinds = "*.hlo, *.hlo.txt, *before_optimizations.txt, *after_optimizations.txt (and .gz)";
  info.filter = [](const std::string& name) {
    return HasSuffixMaybeGz(name, ".hlo") || HasSuffixMaybeGz(name, ".hlo.txt") ||
           HasSuffixMaybeGz(name, "before_optimizations.txt") ||
           HasSuffixMaybeGz(name, "after_optimizations.txt");
  };
  return PluginMain(
      info,
      [](const std::string& path, JsonlWriter& out) -> absl::Status {
        return AnalyzeHloFile(path, out);
      },
      argc, argv);
}
