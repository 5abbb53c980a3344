// Aggregates Chrome trace events into per-thread busy time and per-op total/self time (see
// docs/plugins.md, "trace-summary"). Feed events with Add(), then call Write() once. Not thread-safe.
//
// Time model: X events are spans [ts, ts+dur); B/E pairs on the same (pid, tid) are matched as a stack and
// become spans. Per thread, spans are sorted by start (longer first on ties) and nested: an op's self time
// is its duration minus the parts covered by its direct children (a child sticking out of its parent is
// clipped). Busy time is the length of the union of the thread's spans.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "plugins/common/jsonl_writer.h"
#include "plugins/trace_summary/trace_reader.h"

namespace falcon::plugins {

class TraceStats {
 public:
  explicit TraceStats(int top_n = 20) : top_n_(top_n) {}
  void Add(const RawEvent& e);
  // Writes the "trace", "thread", "op" and "top_op" records.
  void Write(JsonlWriter& out);

 private:
  struct Span {
    double ts;
    double dur;
    uint32_t name;
  };
  struct Open {
    double ts;
    uint32_t name;
  };
  struct Thread {
    std::string pid, tid;  // raw JSON tokens
    std::vector<Span> spans;
    std::vector<Open> stack;
    uint64_t instants = 0, counters = 0, other = 0;
    uint64_t unmatched_end = 0;
  };
  struct StrHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using Index = std::unordered_map<std::string, uint32_t, StrHash, std::equal_to<>>;

  uint32_t Intern(std::string_view name);
  Thread& ThreadFor(std::string_view pid, std::string_view tid);

  int top_n_;
  Index names_index_;
  std::vector<std::string> names_;
  Index threads_index_;
  std::vector<Thread> threads_;
  std::string key_;
  std::unordered_map<std::string, std::string> process_names_;  // pid token -> name
  std::unordered_map<std::string, std::string> thread_names_;   // pid\x1ftid -> name
  uint64_t phases_[256] = {};
  uint64_t events_ = 0;
  uint64_t missing_ts_ = 0;
  double min_ts_ = 0, max_end_ = 0;
  bool any_time_ = false;
};

}  // namespace falcon::plugins
