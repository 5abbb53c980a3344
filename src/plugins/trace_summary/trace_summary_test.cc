#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <unistd.h>
#include <vector>

#include "plugins/trace_summary/trace_reader.h"
#include "plugins/trace_summary/trace_stats.h"

namespace falcon::plugins {
namespace {

std::vector<Json> Summarise(const std::string& json, absl::Status* status = nullptr) {
  TraceReader reader(64);  // tiny buffer: exercises refills and growth
  TraceStats stats;
  absl::Status s = reader.ReadString(json, [&](const RawEvent& e) { stats.Add(e); });
  if (status) *status = s;
  else EXPECT_TRUE(s.ok()) << s;
  std::ostringstream os;
  JsonlWriter w(os);
  w.set_source("t.json");
  stats.Write(w);
  std::vector<Json> out;
  std::istringstream is(os.str());
  for (std::string line; std::getline(is, line);) out.push_back(Json::parse(line));
  return out;
}

const Json* Find(const std::vector<Json>& recs, const std::string& type, const std::string& name = "") {
  for (const auto& r : recs) {
    if (r["record_type"] == type && (name.empty() || r.value("name", "") == name)) return &r;
  }
  return nullptr;
}

TEST(TraceSummary, NestedCompleteEventsSelfTimeAddsUp) {
  // parent 0..100 with children 10..30 and 40..90; grandchild 50..60 inside the second child.
  std::string json = R"({"displayTimeUnit":"ns","otherData":{"a":[1,{"b":"]}"}]},"traceEvents":[
    {"ph":"M","pid":1,"name":"process_name","args":{"name":"/device:CPU:0"}},
    {"ph":"M","pid":1,"tid":2,"name":"thread_name","args":{"name":"XLA Ops"}},
    {"ph":"X","pid":1,"tid":2,"ts":0,"dur":100,"name":"parent"},
    {"ph":"X","pid":1,"tid":2,"ts":40,"dur":50,"name":"child"},
    {"ph":"X","pid":1,"tid":2,"ts":10,"dur":20,"name":"child"},
    {"ph":"X","pid":1,"tid":2,"ts":50,"dur":10,"name":"leaf \"q\""},
    {"ph":"X","pid":1,"tid":2,"ts":200,"dur":5,"name":"late"}
  ],"z":null})";
  auto recs = Summarise(json);
  const Json* parent = Find(recs, "op", "parent");
  const Json* child = Find(recs, "op", "child");
  const Json* leaf = Find(recs, "op", "leaf \"q\"");
  ASSERT_TRUE(parent && child && leaf);
  EXPECT_DOUBLE_EQ((*parent)["total_self_time"].get<double>(), 100 - 20 - 50);
  EXPECT_EQ((*child)["occurrences"], 2);
  EXPECT_DOUBLE_EQ((*child)["total_time"].get<double>(), 70);
  EXPECT_DOUBLE_EQ((*child)["total_self_time"].get<double>(), 60);
  EXPECT_DOUBLE_EQ((*leaf)["total_self_time"].get<double>(), 10);
  const Json* thread = Find(recs, "thread");
  ASSERT_TRUE(thread);
  EXPECT_DOUBLE_EQ((*thread)["busy_time"].get<double>(), 105);
  EXPECT_EQ((*thread)["thread_name"], "XLA Ops");
  EXPECT_EQ((*thread)["process_name"], "/device:CPU:0");
  const Json* trace = Find(recs, "trace");
  EXPECT_DOUBLE_EQ((*trace)["total_self_time"].get<double>(), 105);  // self times add up to busy time
  EXPECT_DOUBLE_EQ((*trace)["duration"].get<double>(), 205);
  const Json* top = Find(recs, "top_op");
  EXPECT_EQ((*top)["name"], "child");
  EXPECT_EQ((*top)["rank"], 1);
}

TEST(TraceSummary, BeginEndPairsPerThreadAndBareArrayWithoutClosingBracket) {
  std::string json = R"([
    {"ph":"B","pid":"p","tid":1,"ts":0,"name":"outer"},
    {"ph":"B","pid":"p","tid":2,"ts":1,"name":"other"},
    {"ph":"B","pid":"p","tid":1,"ts":2,"name":"inner"},
    {"ph":"E","pid":"p","tid":1,"ts":5},
    {"ph":"E","pid":"p","tid":2,"ts":9},
    {"ph":"i","pid":"p","tid":1,"ts":3,"name":"mark"},
    {"ph":"E","pid":"p","tid":1,"ts":10},
    {"ph":"X","pid":"p","tid":1,"ts":20,"dur":1,"na)";
  auto recs = Summarise(json);
  const Json* outer = Find(recs, "op", "outer");
  const Json* inner = Find(recs, "op", "inner");
  const Json* other = Find(recs, "op", "other");
  ASSERT_TRUE(outer && inner && other);
  EXPECT_DOUBLE_EQ((*outer)["total_time"].get<double>(), 10);
  EXPECT_DOUBLE_EQ((*outer)["total_self_time"].get<double>(), 7);
  EXPECT_DOUBLE_EQ((*inner)["total_time"].get<double>(), 3);
  EXPECT_DOUBLE_EQ((*other)["total_time"].get<double>(), 8);
  EXPECT_EQ((*other)["pid"], "p");
  EXPECT_EQ((*Find(recs, "trace"))["events_by_phase"]["i"], 1);
}

TEST(TraceSummary, MalformedEventReportsOffset) {
  std::string json = R"({"traceEvents":[{"ph":"X","ts":1,"dur":2,"name":"a"},{"ph":"X","ts":1,"dur":}]})";
  absl::Status s;
  Summarise(json, &s);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorOffset(s), static_cast<int64_t>(json.find("{\"ph\":\"X\",\"ts\":1,\"dur\":}")));
}

TEST(TraceSummary, TruncatedObjectIsAnError) {
  absl::Status s;
  Summarise(R"({"traceEvents":[{"ph":"X","ts":1,"dur":2,"name":"a"},)", &s);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  Summarise(R"({"foo": 1})", &s);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("traceEvents"), std::string::npos);
}

TEST(TraceSummary, FileReadWithRefillsAcrossManyBuffers) {
  // Events straddle the 64-byte buffer boundary over and over; a long metadata value precedes them.
  char path[] = "/tmp/trace-refill-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    std::ofstream f(path);
    f << R"({"metadata":{"note":")" << std::string(1000, 'x') << R"("},"traceEvents":[)";
    for (int i = 0; i < 1000; ++i) {
      f << (i ? "," : "") << R"({"ph":"X","pid":1,"tid":1,"name":"op\")" << (i % 7) << R"(","ts":)" << i * 10
        << R"(,"dur":5})";
    }
    f << "]}";
  }
  auto in = InputFile::Open(path);
  ASSERT_TRUE(in.ok());
  TraceReader reader(64);
  TraceStats stats;
  int n = 0;
  absl::Status s = reader.Read(**in, [&](const RawEvent& e) {
    ++n;
    stats.Add(e);
  });
  std::remove(path);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(n, 1000);
  std::ostringstream os;
  JsonlWriter w(os);
  stats.Write(w);
  EXPECT_NE(os.str().find(R"("busy_time":5000.0)"), std::string::npos);
}

}  // namespace
}  // namespace falcon::plugins
