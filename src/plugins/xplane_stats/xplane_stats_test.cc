#include <gtest/gtest.h>

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

}  // namespace
}  // namespace falcon::plugins::xplane
