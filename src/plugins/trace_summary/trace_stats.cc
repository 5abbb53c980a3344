#include "plugins/trace_summary/trace_stats.h"

#include <algorithm>
#include <map>

namespace falcon::plugins {

namespace {
// A raw JSON token as a JSON value: numbers stay numbers, strings lose their quotes.
Json TokenValue(const std::string& tok) {
  if (tok.empty()) return nullptr;
  if (tok.front() == '"') {
    try {
      return Json::parse(tok);
    } catch (const Json::exception&) {
      return tok;
    }
  }
  char* end = nullptr;
  long long v = std::strtoll(tok.c_str(), &end, 10);
  if (end != nullptr && *end == '\0') return v;
  double d = std::strtod(tok.c_str(), &end);
  if (end != nullptr && *end == '\0') return d;
  return tok;
}
}  // namespace

uint32_t TraceStats::Intern(std::string_view name) {
  auto it = names_index_.find(name);
  if (it != names_index_.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(names_.size());
  names_.emplace_back(name);
  names_index_.emplace(std::string(name), id);
  return id;
}

TraceStats::Thread& TraceStats::ThreadFor(std::string_view pid, std::string_view tid) {
  key_.assign(pid);
  key_.push_back('\x1f');
  key_.append(tid);
  auto it = threads_index_.find(key_);
  if (it != threads_index_.end()) return threads_[it->second];
  uint32_t id = static_cast<uint32_t>(threads_.size());
  threads_index_.emplace(key_, id);
  Thread& t = threads_.emplace_back();
  t.pid = std::string(pid);
  t.tid = std::string(tid);
  return t;
}

void TraceStats::Add(const RawEvent& e) {
  ++events_;
  ++phases_[static_cast<unsigned char>(e.ph)];
  if (e.ph == 'M') {
    if (e.name == "process_name") {
      process_names_[std::string(e.pid)] = std::string(e.args_name);
    } else if (e.name == "thread_name") {
      key_.assign(e.pid);
      key_.push_back('\x1f');
      key_.append(e.tid);
      thread_names_[key_] = std::string(e.args_name);
    }
    return;
  }
  auto note_time = [&](double start, double end) {
    if (!any_time_) {
      min_ts_ = start;
      max_end_ = end;
      any_time_ = true;
    } else {
      min_ts_ = std::min(min_ts_, start);
      max_end_ = std::max(max_end_, end);
    }
  };
  switch (e.ph) {
    case 'X': {
      if (!e.has_ts) {
        ++missing_ts_;
        return;
      }
      double dur = e.has_dur && e.dur > 0 ? e.dur : 0;
      ThreadFor(e.pid, e.tid).spans.push_back(Span{e.ts, dur, Intern(e.name)});
      note_time(e.ts, e.ts + dur);
      return;
    }
    case 'B': {
      if (!e.has_ts) {
        ++missing_ts_;
        return;
      }
      ThreadFor(e.pid, e.tid).stack.push_back(Open{e.ts, Intern(e.name)});
      note_time(e.ts, e.ts);
      return;
    }
    case 'E': {
      Thread& t = ThreadFor(e.pid, e.tid);
      if (t.stack.empty() || !e.has_ts) {
        ++t.unmatched_end;
        return;
      }
      Open o = t.stack.back();
      t.stack.pop_back();
      double dur = std::max(0.0, e.ts - o.ts);
      t.spans.push_back(Span{o.ts, dur, o.name});
      note_time(o.ts, o.ts + dur);
      return;
    }
    case 'i':
    case 'I':
      ++ThreadFor(e.pid, e.tid).instants;
      if (e.has_ts) note_time(e.ts, e.ts);
      return;
    case 'C':
      ++ThreadFor(e.pid, e.tid).counters;
      return;
    default:
      return;  // flows, async, samples, ...: counted in the phase histogram only
  }
}

void TraceStats::Write(JsonlWriter& out) {
  struct Agg {
    uint64_t occurrences = 0;
    double total = 0, self = 0, min = 0, max = 0;
    void Add(double dur, double self_time) {
      if (occurrences == 0 || dur < min) min = dur;
      if (occurrences == 0 || dur > max) max = dur;
      ++occurrences;
      total += dur;
      self += self_time;
    }
  };
  std::vector<Agg> global(names_.size());
  uint64_t unclosed = 0, unmatched = 0;
  double all_self = 0;
  std::vector<Json> thread_records;
  std::vector<Json> op_records;

  // Threads in a stable, readable order: by pid token then tid token.
  std::vector<uint32_t> order(threads_.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    if (threads_[a].pid != threads_[b].pid) return threads_[a].pid < threads_[b].pid;
    return threads_[a].tid < threads_[b].tid;
  });

  for (uint32_t ti : order) {
    Thread& t = threads_[ti];
    unclosed += t.stack.size();
    unmatched += t.unmatched_end;
    auto& spans = t.spans;
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
      if (a.ts != b.ts) return a.ts < b.ts;
      return a.dur > b.dur;
    });
    std::vector<double> child(spans.size(), 0.0);
    std::vector<uint32_t> stack;  // indices into spans
    double busy = 0, covered_until = 0;
    bool first = true;
    for (uint32_t i = 0; i < spans.size(); ++i) {
      const Span& s = spans[i];
      double end = s.ts + s.dur;
      while (!stack.empty() && spans[stack.back()].ts + spans[stack.back()].dur <= s.ts) stack.pop_back();
      if (!stack.empty()) {
        const Span& p = spans[stack.back()];
        child[stack.back()] += std::min(end, p.ts + p.dur) - s.ts;
      }
      stack.push_back(i);
      if (first) {
        busy += s.dur;
        covered_until = end;
        first = false;
      } else if (end > covered_until) {
        busy += end - std::max(s.ts, covered_until);
        covered_until = end;
      }
    }
    std::map<uint32_t, Agg> ops;
    double thread_self = 0;
    for (uint32_t i = 0; i < spans.size(); ++i) {
      double self = std::max(0.0, spans[i].dur - child[i]);
      ops[spans[i].name].Add(spans[i].dur, self);
      global[spans[i].name].Add(spans[i].dur, self);
      thread_self += self;
    }
    all_self += thread_self;
    Json tr = out.Record("thread");
    tr["pid"] = TokenValue(t.pid);
    tr["tid"] = TokenValue(t.tid);
    auto pn = process_names_.find(t.pid);
    tr["process_name"] = pn == process_names_.end() ? "" : pn->second;
    auto tn = thread_names_.find(t.pid + '\x1f' + t.tid);
    tr["thread_name"] = tn == thread_names_.end() ? "" : tn->second;
    tr["events"] = spans.size();
    tr["instant_events"] = t.instants;
    tr["counter_events"] = t.counters;
    tr["busy_time"] = busy;
    if (!spans.empty()) {
      double lo = spans.front().ts, hi = lo;
      for (const auto& s : spans) hi = std::max(hi, s.ts + s.dur);
      tr["first_ts"] = lo;
      tr["last_end"] = hi;
    }
    tr["distinct_ops"] = ops.size();
    if (!t.stack.empty()) tr["unclosed_begin_events"] = t.stack.size();
    if (t.unmatched_end) tr["unmatched_end_events"] = t.unmatched_end;
    thread_records.push_back(std::move(tr));

    std::vector<std::pair<uint32_t, Agg>> sorted(ops.begin(), ops.end());
    std::sort(sorted.begin(), sorted.end(),
              [](const auto& a, const auto& b) { return a.second.self > b.second.self; });
    for (const auto& [name, a] : sorted) {
      Json r = out.Record("op");
      r["pid"] = TokenValue(t.pid);
      r["tid"] = TokenValue(t.tid);
      r["name"] = names_[name];
      r["occurrences"] = a.occurrences;
      r["total_time"] = a.total;
      r["avg_time"] = a.total / a.occurrences;
      r["min_time"] = a.min;
      r["max_time"] = a.max;
      r["total_self_time"] = a.self;
      r["avg_self_time"] = a.self / a.occurrences;
      r["total_self_time_percent"] = busy > 0 ? 100.0 * a.self / busy : 0.0;
      op_records.push_back(std::move(r));
    }
  }

  Json summary = out.Record("trace");
  summary["events"] = events_;
  Json phases = Json::object();
  std::map<std::string, uint64_t> ph_sorted;
  for (int ph = 0; ph < 256; ++ph) {
    if (phases_[ph]) ph_sorted[ph == 0 ? std::string("(none)") : std::string(1, static_cast<char>(ph))] = phases_[ph];
  }
  for (auto& [ph, n] : ph_sorted) phases[ph] = n;
  summary["events_by_phase"] = phases;
  summary["processes"] = [&] {
    std::map<std::string, int> pids;
    for (const auto& t : threads_) pids[t.pid] = 1;
    for (const auto& [p, n] : process_names_) pids[p] = 1;
    return pids.size();
  }();
  summary["threads"] = threads_.size();
  summary["distinct_ops"] = std::count_if(global.begin(), global.end(),
                                          [](const Agg& a) { return a.occurrences > 0; });
  if (any_time_) {
    summary["first_ts"] = min_ts_;
    summary["last_end"] = max_end_;
    summary["duration"] = max_end_ - min_ts_;
  }
  summary["total_self_time"] = all_self;
  summary["time_unit"] = "us";
  if (unclosed) summary["unclosed_begin_events"] = unclosed;
  if (unmatched) summary["unmatched_end_events"] = unmatched;
  if (missing_ts_) summary["events_without_ts"] = missing_ts_;
  out.Write(summary);
  for (const auto& r : thread_records) out.Write(r);
  for (const auto& r : op_records) out.Write(r);

  std::vector<uint32_t> top;
  for (uint32_t i = 0; i < global.size(); ++i) {
    if (global[i].occurrences > 0) top.push_back(i);
  }
  std::sort(top.begin(), top.end(), [&](uint32_t a, uint32_t b) {
    if (global[a].self != global[b].self) return global[a].self > global[b].self;
    return names_[a] < names_[b];
  });
  if (top.size() > static_cast<size_t>(top_n_)) top.resize(top_n_);
  double cumulative = 0;
  int rank = 0;
  for (uint32_t i : top) {
    const Agg& a = global[i];
    double pct = all_self > 0 ? 100.0 * a.self / all_self : 0.0;
    cumulative += pct;
    Json r = out.Record("top_op");
    r["rank"] = ++rank;
    r["name"] = names_[i];
    r["occurrences"] = a.occurrences;
    r["total_time"] = a.total;
    r["avg_time"] = a.total / a.occurrences;
    r["total_self_time"] = a.self;
    r["avg_self_time"] = a.self / a.occurrences;
    r["total_self_time_percent"] = pct;
    r["cumulative_total_self_time_percent"] = cumulative;
    out.Write(r);
  }
}

}  // namespace falcon::plugins
