// xplane-stats: turns the lines of each XPlane into per-op occurrence/total/self-time records, per-line
// busy time, step records and per-HLO-op totals (see docs/plugins.md). Not thread-safe.
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "plugins/common/jsonl_writer.h"
#include "plugins/xplane_stats/xplane_reader.h"

namespace falcon::plugins::xplane {

class XPlaneStats : public Visitor {
 public:
  explicit XPlaneStats(JsonlWriter& out) : out_(out) {}
  void BeginPlane(const PlaneInfo& plane) override;
  void OnLine(PlaneInfo& plane, Line& line) override;
  void EndPlane(const PlaneInfo& plane) override;
  // Writes the records over all planes (TPU ops aggregated over cores). Call once after the file is read.
  void Finish();
  int planes() const { return planes_; }

 private:
  struct Agg {
    int64_t occurrences = 0;
    int64_t total_ps = 0, self_ps = 0;
    int64_t min_ps = 0, max_ps = 0;
  };
  JsonlWriter& out_;
  int planes_ = 0;
  int64_t plane_lines_ = 0, plane_events_ = 0, plane_busy_ps_ = 0;
  // (program_id, hlo_module id, hlo_op id) -> totals, for events that carry an hlo_op stat (not on TPU
  // planes, whose ops come from their "XLA Ops" line).
  std::map<std::tuple<uint64_t, int32_t, int32_t>, Agg> hlo_ops_;
  // TPU "XLA Ops" lines: per (program_id, op name) of the plane, times from device_duration_ps. The op name
  // is the event metadata's display name (the instruction name; its name is the instruction's text), else
  // its name.
  struct TpuAgg {
    int64_t occurrences = 0;
    int64_t total_ps = 0, self_ps = 0;
    double flops = 0, bytes = 0;
    bool has_flops = false, has_bytes = false, device_time = true;
  };
  std::map<std::pair<uint64_t, std::string>, TpuAgg> tpu_ops_;
  // Over all TPU planes: (program_id, op name) -> totals and the cores it ran on.
  struct AllCores {
    TpuAgg agg;
    std::vector<std::string> cores;
  };
  std::map<std::pair<uint64_t, std::string>, AllCores> all_cores_;
  std::vector<int64_t> child_;  // scratch of OnLine, kept to avoid reallocation
  std::vector<int64_t> child_dev_;
  std::vector<uint32_t> stack_;
};

}  // namespace falcon::plugins::xplane
