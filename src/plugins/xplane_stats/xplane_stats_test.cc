#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "plugins/common/plugin_io.h"
#include "plugins/xplane_stats/xplane.pb.h"
#include "plugins/xplane_stats/xplane_reader.h"
#include "plugins/xplane_stats/xplane_stats.h"

namespace falcon::plugins::xplane {
namespace {

// A device plane with one "XLA Ops" line: a fusion 0..100ns holding two dots (10..30, 40..90) and a
// "Steps" line with two steps; plus a host plane with a step_num-annotated event.
std::string MakeSpace() {
  XSpace space;
  XPlane* dev = space.add_planes();
  dev->set_id(1);
  dev->set_name("/device:GPU:0");
  (*dev->mutable_stat_metadata())[7].set_name("hlo_op");
  (*dev->mutable_stat_metadata())[8].set_name("program_id");
  (*dev->mutable_event_metadata())[1].set_name("fusion.1");
  (*dev->mutable_event_metadata())[2].set_name("dot.2");
  (*dev->mutable_event_metadata())[3].set_name("3");
  XLine* ops = dev->add_lines();
  ops->set_id(10);
  ops->set_name("XLA Ops");
  ops->set_timestamp_ns(1000);
  auto add = [](XLine* l, int64_t md, int64_t off_ns, int64_t dur_ns) {
    XEvent* e = l->add_events();
    e->set_metadata_id(md);
    e->set_offset_ps(off_ns * 1000);
    e->set_duration_ps(dur_ns * 1000);
    return e;
  };
  add(ops, 2, 40, 50);
  add(ops, 1, 0, 100);
  XEvent* d = add(ops, 2, 10, 20);
  XStat* s = d->add_stats();
  s->set_metadata_id(7);
  s->set_str_value("dot.2");
  s = d->add_stats();
  s->set_metadata_id(8);
  s->set_int64_value(42);
  XLine* steps = dev->add_lines();
  steps->set_name("Steps");
  add(steps, 3, 0, 100);
  add(steps, 3, 200, 300);

  XPlane* host = space.add_planes();
  host->set_name("/host:CPU");
  (*host->mutable_stat_metadata())[5].set_name("step_num");
  (*host->mutable_event_metadata())[1].set_name("train");
  XLine* py = host->add_lines();
  py->set_name("python");
  XEvent* t = add(py, 1, 0, 1000);
  t->add_stats()->set_metadata_id(5);
  t->mutable_stats(0)->set_int64_value(0);
  t = add(py, 1, 2000, 3000);
  t->add_stats()->set_metadata_id(5);
  t->mutable_stats(0)->set_int64_value(1);
  return space.SerializeAsString();
}

std::vector<Json> Analyze(const std::string& bytes, absl::Status* status = nullptr) {
  std::ostringstream os;
  JsonlWriter w(os);
  XPlaneStats stats(w);
  absl::Status s = ReadXSpaceBytes(bytes, stats);
  if (s.ok()) stats.Finish();
  if (status) *status = s;
  else EXPECT_TRUE(s.ok()) << s;
  std::vector<Json> out;
  std::istringstream is(os.str());
  for (std::string line; std::getline(is, line);) out.push_back(Json::parse(line));
  return out;
}

const Json* Find(const std::vector<Json>& recs, const std::string& type, const std::string& key,
                 const std::string& value) {
  for (const auto& r : recs) {
    if (r["record_type"] == type && r.value(key, "") == value) return &r;
  }
  return nullptr;
}

TEST(XPlaneStats, SelfTimeBusyTimeStepsAndHloOps) {
  auto recs = Analyze(MakeSpace());
  const Json* fusion = Find(recs, "op", "name", "fusion.1");
  const Json* dot = Find(recs, "op", "name", "dot.2");
  ASSERT_TRUE(fusion && dot);
  EXPECT_DOUBLE_EQ((*fusion)["total_time"].get<double>(), 0.100);
  EXPECT_DOUBLE_EQ((*fusion)["total_self_time"].get<double>(), 0.030);
  EXPECT_EQ((*dot)["occurrences"], 2);
  EXPECT_DOUBLE_EQ((*dot)["total_time"].get<double>(), 0.070);
  EXPECT_DOUBLE_EQ((*dot)["total_self_time_percent"].get<double>(), 70.0);
  const Json* line = Find(recs, "line", "line", "XLA Ops");
  ASSERT_TRUE(line);
  EXPECT_DOUBLE_EQ((*line)["busy_time"].get<double>(), 0.100);
  EXPECT_EQ((*line)["start_time_ns"], 1000);

  const Json* steps = Find(recs, "step_summary", "line", "Steps");
  ASSERT_TRUE(steps);
  EXPECT_EQ((*steps)["steps"], 2);
  EXPECT_DOUBLE_EQ((*steps)["avg_step_time"].get<double>(), 0.200);
  const Json* host_steps = Find(recs, "step_summary", "plane", "/host:CPU");
  ASSERT_TRUE(host_steps);
  EXPECT_EQ((*host_steps)["steps"], 2);
  EXPECT_DOUBLE_EQ((*host_steps)["max_step_time"].get<double>(), 3.0);

  const Json* hlo = Find(recs, "hlo_op", "hlo_op_name", "dot.2");
  ASSERT_TRUE(hlo);
  EXPECT_EQ((*hlo)["program_id"], 42);
  EXPECT_EQ((*hlo)["occurrences"], 1);
  EXPECT_DOUBLE_EQ((*hlo)["total_time"].get<double>(), 0.020);
  const Json* plane = Find(recs, "plane", "plane", "/device:GPU:0");
  ASSERT_TRUE(plane);
  EXPECT_EQ((*plane)["lines"], 2);
  EXPECT_EQ((*plane)["events"], 5);
}

TEST(XPlaneStats, TruncatedFileIsAnErrorWithOffset) {
  std::string bytes = MakeSpace();
  absl::Status s;
  Analyze(bytes.substr(0, bytes.size() - 7), &s);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(ErrorOffset(s).has_value());
  Analyze("this is not a protobuf at all", &s);
  EXPECT_FALSE(s.ok());
}

// TPU planes as XProf's converter reads them: per core an "XLA Ops" line whose events name the HLO op
// in their metadata, with program_id / flops / bytes_accessed on the metadata and the device's own time
// in a device_duration_ps event stat.
std::string MakeTpuSpace() {
  XSpace space;
  for (int core = 0; core < 2; ++core) {
    XPlane* p = space.add_planes();
    p->set_id(core + 1);
    p->set_name("/device:TPU:" + std::to_string(core));
    (*p->mutable_stat_metadata())[1].set_name("program_id");
    (*p->mutable_stat_metadata())[2].set_name("flops");
    (*p->mutable_stat_metadata())[3].set_name("bytes_accessed");
    (*p->mutable_stat_metadata())[4].set_name("device_duration_ps");
    auto md = [&](int64_t id, const std::string& name, int64_t program, int64_t flops, int64_t bytes) {
      XEventMetadata& m = (*p->mutable_event_metadata())[id];
      m.set_id(id);
      m.set_name(name);
      XStat* st = m.add_stats();
      st->set_metadata_id(1);
      st->set_int64_value(program);
      st = m.add_stats();
      st->set_metadata_id(2);
      st->set_uint64_value(flops);
      st = m.add_stats();
      st->set_metadata_id(3);
      st->set_uint64_value(bytes);
    };
    md(1, "fusion.1", 7, 1000000, 4096);  // program 7
    md(2, "convolution.2", 7, 8000000, 8192);
    md(3, "fusion.1", 9, 500, 64);  // the same op name in another program
    XLine* ops = p->add_lines();
    ops->set_name("XLA Ops");
    ops->set_timestamp_ns(1000);
    auto add = [&](int64_t id, int64_t off_ns, int64_t span_ns, int64_t device_ns) {
      XEvent* e = ops->add_events();
      e->set_metadata_id(id);
      e->set_offset_ps(off_ns * 1000);
      e->set_duration_ps(span_ns * 1000);
      if (device_ns >= 0) {
        XStat* st = e->add_stats();
        st->set_metadata_id(4);
        st->set_uint64_value(device_ns * 1000);
      }
    };
    // Spans differ from the device's durations (as on real TPUs, by up to ~10%).
    add(1, 0, 100, 90 + core);
    add(2, 200, 1000, 1100);
    add(1, 1300, 100, 95);
    add(3, 1500, 50, -1);  // no device duration: the span
    XLine* mods = p->add_lines();
    mods->set_name("XLA Modules");
    XEvent* e = mods->add_events();
    e->set_metadata_id(2);
    e->set_duration_ps(1600000);
  }
  return space.SerializeAsString();
}

TEST(XPlaneStats, TpuOpsPerCoreAndOverCoresByProgramWithDeviceDurations) {
  auto recs = Analyze(MakeTpuSpace());
  std::vector<Json> per_core, all;
  for (const auto& r : recs) {
    if (r["record_type"] == "hlo_op") per_core.push_back(r);
    if (r["record_type"] == "hlo_op_all_cores") all.push_back(r);
  }
  // Three (program, op) rows on each of the two cores, three over all cores.
  ASSERT_EQ(per_core.size(), 6u);
  ASSERT_EQ(all.size(), 3u);
  auto row = [](const std::vector<Json>& rows, const std::string& plane, int64_t program, const std::string& op) {
    for (const auto& r : rows) {
      if ((plane.empty() || r["plane"] == plane) && r["program_id"] == program && r["hlo_op_name"] == op) return r;
    }
    ADD_FAILURE() << "no row " << plane << " " << program << " " << op;
    return Json();
  };
  Json f0 = row(per_core, "/device:TPU:0", 7, "fusion.1");
  EXPECT_EQ(f0["occurrences"], 2);
  EXPECT_DOUBLE_EQ(f0["total_time"].get<double>(), (90 + 95) / 1000.0);  // device time, not the 200 ns of spans
  EXPECT_EQ(f0["time_source"], "device_duration_ps");
  EXPECT_EQ(f0["core"], "0");
  EXPECT_DOUBLE_EQ(f0["flops"].get<double>(), 2e6);
  EXPECT_DOUBLE_EQ(f0["bytes_accessed"].get<double>(), 2 * 4096.0);
  // GFLOP/s = flops / ns; GiB/s = bytes / s / 2^30.
  EXPECT_DOUBLE_EQ(f0["model_flop_rate"].get<double>(), 2e6 / 185.0);
  EXPECT_DOUBLE_EQ(f0["measured_memory_bw"].get<double>(), 8192.0 / 185e-9 / (1 << 30));
  Json f1 = row(per_core, "/device:TPU:1", 7, "fusion.1");
  EXPECT_DOUBLE_EQ(f1["total_time"].get<double>(), (91 + 95) / 1000.0);
  Json other = row(per_core, "/device:TPU:0", 9, "fusion.1");
  EXPECT_EQ(other["time_source"], "event_span");
  EXPECT_DOUBLE_EQ(other["total_time"].get<double>(), 0.05);
  Json conv_all = row(all, "", 7, "convolution.2");
  EXPECT_EQ(conv_all["cores"], 2);
  EXPECT_EQ(conv_all["occurrences"], 2);
  EXPECT_DOUBLE_EQ(conv_all["total_time"].get<double>(), 2.2);
  EXPECT_DOUBLE_EQ(conv_all["total_self_time"].get<double>(), 2.2);
  Json fusion_all = row(all, "", 7, "fusion.1");
  EXPECT_EQ(fusion_all["occurrences"], 4);
  EXPECT_DOUBLE_EQ(fusion_all["total_time"].get<double>(), (90 + 95 + 91 + 95) / 1000.0);
}

// As real TPU profiles write them (XProf's own test profile tpu_inference_2): the metadata's name is the
// instruction's text and its display name the op; program_id is a uint64 above 2^63; an "Async XLA Ops"
// line repeats copy ops with an hlo_op stat; nesting follows the device's timespans (device_offset_ps),
// not the spans.
TEST(XPlaneStats, TpuOpsAsRealTpuProfilesWriteThem) {
  XSpace space;
  XPlane* p = space.add_planes();
  p->set_id(2);
  p->set_name("/device:TPU:0");
  (*p->mutable_stat_metadata())[1].set_name("program_id");
  (*p->mutable_stat_metadata())[2].set_name("flops");
  (*p->mutable_stat_metadata())[3].set_name("bytes_accessed");
  (*p->mutable_stat_metadata())[4].set_name("device_duration_ps");
  (*p->mutable_stat_metadata())[5].set_name("device_offset_ps");
  (*p->mutable_stat_metadata())[6].set_name("hlo_op");
  auto md = [&](int64_t id, const std::string& text, const std::string& op) {
    XEventMetadata& m = (*p->mutable_event_metadata())[id];
    m.set_id(id);
    m.set_name(text);
    m.set_display_name(op);
    XStat* st = m.add_stats();
    st->set_metadata_id(1);
    st->set_uint64_value(12190760917235803885ull);
    st = m.add_stats();
    st->set_metadata_id(2);
    st->set_int64_value(1000);
    st = m.add_stats();
    st->set_metadata_id(3);
    st->set_int64_value(4096);
  };
  md(1, "%fusion.1 = f32[8]{0} fusion(f32[8]{0} %p), kind=kLoop, calls=%fused_computation", "fusion.1");
  md(2, "%copy-start = (f32[8]{0}, f32[8]{0}, u32[]) copy-start(f32[8]{0} %p)", "copy-start");
  md(3, "%copy-done = f32[8]{0} copy-done((f32[8]{0}, f32[8]{0}, u32[]) %copy-start)", "copy-done");
  auto add = [&](XLine* line, int64_t id, int64_t off_ns, int64_t span_ns, int64_t dev_off_ns,
                 int64_t dev_ns) {
    XEvent* e = line->add_events();
    e->set_metadata_id(id);
    e->set_offset_ps(off_ns * 1000);
    e->set_duration_ps(span_ns * 1000);
    XStat* st = e->add_stats();
    st->set_metadata_id(5);
    st->set_int64_value(dev_off_ns * 1000);
    st = e->add_stats();
    st->set_metadata_id(4);
    st->set_int64_value(dev_ns * 1000);
    return e;
  };
  XLine* ops = p->add_lines();
  ops->set_name("XLA Ops");
  // copy-done's span holds fusion.1's span, but on the device fusion.1 starts before copy-done: no child.
  add(ops, 2, 0, 10, 0, 8);
  add(ops, 3, 100, 1000, 120, 900);
  add(ops, 1, 200, 100, 110, 90);
  // copy-start's device timespan holds the second fusion.1's: a child there, though the spans do not nest.
  add(ops, 2, 2000, 50, 2000, 500);
  add(ops, 1, 2060, 100, 2100, 100);
  XLine* async = p->add_lines();
  async->set_name("Async XLA Ops");
  XEvent* a = add(async, 2, 0, 1100, 0, 1100);
  XStat* st = a->add_stats();
  st->set_metadata_id(6);
  st->set_str_value("copy-done");

  auto recs = Analyze(space.SerializeAsString());
  std::map<std::string, Json> rows;
  for (const auto& r : recs) {
    if (r["record_type"] == "hlo_op") rows[r["hlo_op_name"].get<std::string>()] = r;
  }
  // One row per op, named by the display name; nothing from the async line.
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& [op, r] : rows) {
    EXPECT_EQ(r["program_id"].get<uint64_t>(), 12190760917235803885ull) << op;
    EXPECT_EQ(r["occurrences"], 2 - (op == "copy-done")) << op;
  }
  EXPECT_DOUBLE_EQ(rows["copy-done"]["total_time"].get<double>(), 0.9);
  EXPECT_DOUBLE_EQ(rows["copy-done"]["total_self_time"].get<double>(), 0.9);
  EXPECT_DOUBLE_EQ(rows["copy-start"]["total_time"].get<double>(), 0.508);
  EXPECT_DOUBLE_EQ(rows["copy-start"]["total_self_time"].get<double>(), 0.408);
  EXPECT_DOUBLE_EQ(rows["fusion.1"]["total_time"].get<double>(), 0.19);
  EXPECT_DOUBLE_EQ(rows["fusion.1"]["flops"].get<double>(), 2000);
  EXPECT_DOUBLE_EQ(rows["fusion.1"]["bytes_accessed"].get<double>(), 8192);
}

}  // namespace
}  // namespace falcon::plugins::xplane
