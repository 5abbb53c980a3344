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
  // (program_id, hlo_module id, hlo_op id) -> totals, for events that carry an hlo_op stat.
  std::map<std::tuple<int64_t, int32_t, int32_t>, Agg> hlo_ops_;
  std::vector<int64_t> child_;  // scratch of OnLine, kept to avoid reallocation
  std::vector<uint32_t> stack_;
};

}  // namespace falcon::plugins::xplane
