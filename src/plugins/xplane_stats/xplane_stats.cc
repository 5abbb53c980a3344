#include "plugins/xplane_stats/xplane_stats.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <vector>

namespace falcon::plugins::xplane {

namespace {
double Us(int64_t ps) { return static_cast<double>(ps) / 1e6; }
}  // namespace

void XPlaneStats::BeginPlane(const PlaneInfo& plane) {
  plane_lines_ = plane_events_ = plane_busy_ps_ = 0;
  hlo_ops_.clear();
  tpu_ops_.clear();
}

namespace {
bool IsTpuPlane(const std::string& name) { return name.rfind("/device:TPU:", 0) == 0; }
// XProf's rates: GFLOP/s and GiB/s of the measured time.
double GflopRate(double flops, int64_t ps) { return ps > 0 ? flops / (static_cast<double>(ps) / 1e3) : 0; }
double GibPerSecond(double bytes, int64_t ps) {
  return ps > 0 ? bytes / (static_cast<double>(ps) / 1e12) / (1024.0 * 1024.0 * 1024.0) : 0;
}
void AddTpuFields(Json& r, const auto& a, int64_t all_ps) {
  r["occurrences"] = a.occurrences;
  r["total_time"] = static_cast<double>(a.total_ps) / 1e6;
  r["avg_time"] = a.occurrences ? static_cast<double>(a.total_ps) / 1e6 / static_cast<double>(a.occurrences) : 0.0;
  r["total_self_time"] = static_cast<double>(a.self_ps) / 1e6;
  r["avg_self_time"] = a.occurrences ? static_cast<double>(a.self_ps) / 1e6 / static_cast<double>(a.occurrences) : 0.0;
  r["total_time_percent"] = all_ps > 0 ? 100.0 * static_cast<double>(a.total_ps) / static_cast<double>(all_ps) : 0.0;
  if (a.has_flops) {
    r["flops"] = a.flops;
    r["model_flop_rate"] = GflopRate(a.flops, a.total_ps);
  }
  if (a.has_bytes) {
    r["bytes_accessed"] = a.bytes;
    r["measured_memory_bw"] = GibPerSecond(a.bytes, a.total_ps);
  }
  r["time_source"] = a.device_time ? "device_duration_ps" : "event_span";
}
}  // namespace

void XPlaneStats::OnLine(PlaneInfo& plane, Line& line) {
  ++plane_lines_;
  plane_events_ += static_cast<int64_t>(line.events.size());
  auto& ev = line.events;
  auto before = [](const Event& a, const Event& b) {
    if (a.offset_ps != b.offset_ps) return a.offset_ps < b.offset_ps;
    return a.duration_ps > b.duration_ps;
  };
  // Profilers mostly write lines in time order already; sorting is then skipped.
  if (!std::is_sorted(ev.begin(), ev.end(), before)) std::sort(ev.begin(), ev.end(), before);
  // Nesting: self = duration - time covered by direct children (children sticking out are clipped).
  std::vector<int64_t>& child = child_;
  child.assign(ev.size(), 0);
  std::vector<uint32_t>& stack = stack_;
  stack.clear();
  int64_t busy = 0, covered = INT64_MIN;
  for (uint32_t i = 0; i < ev.size(); ++i) {
    const Event& e = ev[i];
    int64_t end = e.offset_ps + e.duration_ps;
    while (!stack.empty() && ev[stack.back()].offset_ps + ev[stack.back()].duration_ps <= e.offset_ps) {
      stack.pop_back();
    }
    if (!stack.empty()) {
      const Event& p = ev[stack.back()];
      child[stack.back()] += std::min(end, p.offset_ps + p.duration_ps) - e.offset_ps;
    }
    stack.push_back(i);
    if (end > covered) {
      busy += end - std::max(e.offset_ps, covered);
      covered = end;
    }
  }
  plane_busy_ps_ += busy;

  const std::string& lname = line.display_name.empty() ? line.name : line.display_name;
  const bool tpu_plane = IsTpuPlane(plane.name);
  const bool tpu_ops = tpu_plane && lname == "XLA Ops";
  if (tpu_ops) {
    // The device's own timespan (device_offset_ps, device_duration_ps) where present, else the event's, as
    // XProf's GetDeviceEventTimespan; self time = that duration minus the device durations of the direct
    // children, nesting by the device timespans in line order (XProf's AncestorStack: an event is a child
    // of the innermost open event whose device timespan includes its own).
    auto dev = [](const Event& e) { return e.device_duration_ps >= 0 ? e.device_duration_ps : e.duration_ps; };
    auto dev_begin = [](const Event& e) {
      return e.device_offset_ps >= 0 ? e.device_offset_ps : e.offset_ps;
    };
    std::vector<int64_t>& cd = child_dev_;
    cd.assign(ev.size(), 0);
    stack.clear();
    for (uint32_t i = 0; i < ev.size(); ++i) {
      const Event& e = ev[i];
      const int64_t b = dev_begin(e), end = b + dev(e);
      while (!stack.empty()) {
        const Event& p = ev[stack.back()];
        const int64_t pb = dev_begin(p);
        if (pb <= b && end <= pb + dev(p)) break;
        stack.pop_back();
      }
      if (!stack.empty()) cd[stack.back()] += dev(e);
      stack.push_back(i);
    }
    for (uint32_t i = 0; i < ev.size(); ++i) {
      const Event& e = ev[i];
      auto it = plane.event_metadata.find(e.metadata_id);
      const EventMeta* m = it == plane.event_metadata.end() ? nullptr : &it->second;
      const uint64_t program =
          e.program_id != kNoProgramId ? e.program_id : (m ? m->program_id : kNoProgramId);
      TpuAgg& a = tpu_ops_[{program, m ? (m->display_name.empty() ? m->name : m->display_name)
                                       : std::to_string(e.metadata_id)}];
      int64_t t = dev(e);
      a.occurrences += e.occurrences;
      a.total_ps += t;
      a.self_ps += std::max<int64_t>(0, t - cd[i]);
      if (e.device_duration_ps < 0) a.device_time = false;
      if (m && m->flops >= 0) {
        a.flops += m->flops * static_cast<double>(e.occurrences);
        a.has_flops = true;
      }
      if (m && m->bytes_accessed >= 0) {
        a.bytes += m->bytes_accessed * static_cast<double>(e.occurrences);
        a.has_bytes = true;
      }
    }
  }

  std::unordered_map<int64_t, Agg> ops;
  for (uint32_t i = 0; i < ev.size(); ++i) {
    const Event& e = ev[i];
    int64_t self = std::max<int64_t>(0, e.duration_ps - child[i]);
    Agg& a = ops[e.metadata_id];
    if (a.occurrences == 0 || e.duration_ps < a.min_ps) a.min_ps = e.duration_ps;
    if (a.occurrences == 0 || e.duration_ps > a.max_ps) a.max_ps = e.duration_ps;
    a.occurrences += e.occurrences;
    a.total_ps += e.duration_ps;
    a.self_ps += self;
    // On TPU planes only the "XLA Ops" line gives HLO-op rows, as XProf's hlo_stats: the events of
    // "Async XLA Ops" carry an hlo_op stat too, but repeat the copy-start/copy-done ops as async spans.
    if (e.hlo_op >= 0 && !tpu_plane) {
      Agg& h = hlo_ops_[{e.program_id, e.hlo_module, e.hlo_op}];
      if (h.occurrences == 0 || e.duration_ps < h.min_ps) h.min_ps = e.duration_ps;
      if (h.occurrences == 0 || e.duration_ps > h.max_ps) h.max_ps = e.duration_ps;
      h.occurrences += e.occurrences;
      h.total_ps += e.duration_ps;
      h.self_ps += self;
    }
  }

  const std::string& line_name = line.display_name.empty() ? line.name : line.display_name;
  auto meta_name = [&](int64_t id) -> const EventMeta* {
    auto it = plane.event_metadata.find(id);
    return it == plane.event_metadata.end() ? nullptr : &it->second;
  };

  Json lr = out_.Record("line");
  lr["plane_id"] = plane.id;
  lr["plane"] = plane.name;
  lr["line_id"] = line.id;
  lr["line"] = line_name;
  lr["events"] = ev.size();
  lr["distinct_ops"] = ops.size();
  lr["busy_time"] = Us(busy);
  if (!ev.empty()) {
    int64_t first = ev.front().offset_ps, last = first;
    for (const auto& e : ev) last = std::max(last, e.offset_ps + e.duration_ps);
    lr["start_time_ns"] = line.timestamp_ns + first / 1000;
    lr["span_time"] = Us(last - first);
  }
  if (line.duration_ps) lr["duration"] = Us(line.duration_ps);
  out_.Write(lr);

  std::vector<std::pair<int64_t, Agg>> sorted(ops.begin(), ops.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    if (a.second.self_ps != b.second.self_ps) return a.second.self_ps > b.second.self_ps;
    return a.first < b.first;
  });
  for (const auto& [id, a] : sorted) {
    const EventMeta* m = meta_name(id);
    Json r = out_.Record("op");
    r["plane"] = plane.name;
    r["line"] = line_name;
    r["name"] = m ? m->name : std::to_string(id);
    if (m && !m->display_name.empty()) r["display_name"] = m->display_name;
    r["occurrences"] = a.occurrences;
    r["total_time"] = Us(a.total_ps);
    r["avg_time"] = a.occurrences ? Us(a.total_ps) / static_cast<double>(a.occurrences) : 0.0;
    r["min_time"] = Us(a.min_ps);
    r["max_time"] = Us(a.max_ps);
    r["total_self_time"] = Us(a.self_ps);
    r["avg_self_time"] = a.occurrences ? Us(a.self_ps) / static_cast<double>(a.occurrences) : 0.0;
    r["total_self_time_percent"] = busy > 0 ? 100.0 * static_cast<double>(a.self_ps) / busy : 0.0;
    out_.Write(r);
  }

  // Steps: every event of a "Steps" line, or events carrying a step_num stat (StepTraceAnnotation).
  bool steps_line = line_name == "Steps";
  std::vector<double> durations;
  for (const auto& e : ev) {
    if (!steps_line && e.step_num < 0) continue;
    const EventMeta* m = meta_name(e.metadata_id);
    Json r = out_.Record("step");
    r["plane"] = plane.name;
    r["line"] = line_name;
    r["name"] = m ? m->name : std::to_string(e.metadata_id);
    if (e.step_num >= 0) r["step_num"] = e.step_num;
    r["start_time_ns"] = line.timestamp_ns + e.offset_ps / 1000;
    r["step_time"] = Us(e.duration_ps);
    out_.Write(r);
    durations.push_back(Us(e.duration_ps));
  }
  if (!durations.empty()) {
    double sum = 0, mn = durations[0], mx = durations[0];
    for (double d : durations) {
      sum += d;
      mn = std::min(mn, d);
      mx = std::max(mx, d);
    }
    double avg = sum / durations.size(), var = 0;
    for (double d : durations) var += (d - avg) * (d - avg);
    Json r = out_.Record("step_summary");
    r["plane"] = plane.name;
    r["line"] = line_name;
    r["steps"] = durations.size();
    r["avg_step_time"] = avg;
    r["min_step_time"] = mn;
    r["max_step_time"] = mx;
    r["stddev_step_time"] = std::sqrt(var / durations.size());
    out_.Write(r);
  }
}

void XPlaneStats::EndPlane(const PlaneInfo& plane) {
  ++planes_;
  std::vector<std::pair<std::tuple<uint64_t, int32_t, int32_t>, Agg>> sorted(hlo_ops_.begin(),
                                                                            hlo_ops_.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.second.total_ps > b.second.total_ps; });
  int64_t all = 0;
  for (const auto& [k, a] : sorted) all += a.total_ps;
  for (const auto& [k, a] : sorted) {
    const auto& [program_id, module, op] = k;
    Json r = out_.Record("hlo_op");
    r["plane"] = plane.name;
    if (program_id != kNoProgramId) r["program_id"] = program_id;
    if (module >= 0) r["hlo_module"] = plane.strings[module];
    r["hlo_op_name"] = plane.strings[op];
    r["occurrences"] = a.occurrences;
    r["total_time"] = Us(a.total_ps);
    r["avg_time"] = a.occurrences ? Us(a.total_ps) / static_cast<double>(a.occurrences) : 0.0;
    r["total_self_time"] = Us(a.self_ps);
    r["total_time_percent"] = all > 0 ? 100.0 * static_cast<double>(a.total_ps) / all : 0.0;
    out_.Write(r);
  }
  // TPU ops of this core, by total time.
  std::vector<std::pair<std::pair<uint64_t, std::string>, TpuAgg>> tpu(tpu_ops_.begin(), tpu_ops_.end());
  std::sort(tpu.begin(), tpu.end(), [](const auto& a, const auto& b) {
    if (a.second.total_ps != b.second.total_ps) return a.second.total_ps > b.second.total_ps;
    return a.first < b.first;
  });
  int64_t tpu_all = 0;
  for (const auto& [k, a] : tpu) tpu_all += a.total_ps;
  for (const auto& [k, a] : tpu) {
    const std::string& name = k.second;
    Json h = out_.Record("hlo_op");
    h["plane"] = plane.name;
    h["core"] = plane.name.substr(std::string("/device:TPU:").size());
    if (k.first != kNoProgramId) h["program_id"] = k.first;
    h["hlo_op_name"] = name;
    AddTpuFields(h, a, tpu_all);
    out_.Write(h);
    AllCores& all = all_cores_[{k.first, name}];
    all.agg.occurrences += a.occurrences;
    all.agg.total_ps += a.total_ps;
    all.agg.self_ps += a.self_ps;
    all.agg.flops += a.flops;
    all.agg.bytes += a.bytes;
    all.agg.has_flops |= a.has_flops;
    all.agg.has_bytes |= a.has_bytes;
    all.agg.device_time &= a.device_time;
    all.cores.push_back(plane.name);
  }
  Json r = out_.Record("plane");
  r["plane_id"] = plane.id;
  r["plane"] = plane.name;
  r["index"] = plane.index;
  r["lines"] = plane_lines_;
  r["events"] = plane_events_;
  r["event_metadata"] = plane.event_metadata.size();
  r["stat_metadata"] = plane.stat_names.size();
  r["busy_time_sum_of_lines"] = Us(plane_busy_ps_);
  r["hlo_ops"] = hlo_ops_.size() + tpu_ops_.size();
  out_.Write(r);
}

void XPlaneStats::Finish() {
  // TPU ops over all cores, keyed by (program id, op name), as XProf's hlo_stats rows.
  std::vector<const std::pair<const std::pair<uint64_t, std::string>, AllCores>*> rows;
  int64_t all = 0;
  for (const auto& kv : all_cores_) {
    rows.push_back(&kv);
    all += kv.second.agg.total_ps;
  }
  std::sort(rows.begin(), rows.end(), [](const auto* a, const auto* b) {
    if (a->second.agg.total_ps != b->second.agg.total_ps) return a->second.agg.total_ps > b->second.agg.total_ps;
    return a->first < b->first;
  });
  for (const auto* kv : rows) {
    Json r = out_.Record("hlo_op_all_cores");
    if (kv->first.first != kNoProgramId) r["program_id"] = kv->first.first;
    r["hlo_op_name"] = kv->first.second;
    r["cores"] = kv->second.cores.size();
    AddTpuFields(r, kv->second.agg, all);
    out_.Write(r);
  }
}

}  // namespace falcon::plugins::xplane
