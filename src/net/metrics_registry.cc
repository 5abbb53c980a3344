#include "net/metrics_registry.h"

#include <fmt/format.h>

namespace falcon::net {
namespace {

// Label values escape backslash, double quote and newline (exposition format).
std::string Esc(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

// The shortest form that reads back the same ("0.0005", "1", "2.5").
std::string Num(double v) { return fmt::format("{}", v); }

// `{a="x",b="y"}` (with `extra` appended, e.g. `le="0.5"`); "" when there is nothing to write.
std::string LabelSet(const std::vector<std::string>& names, const Labels& values, const std::string& extra = "") {
  std::string out;
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) {
    if (!out.empty()) out += ',';
    out += names[i] + "=\"" + Esc(values[i]) + "\"";
  }
  if (!extra.empty()) {
    if (!out.empty()) out += ',';
    out += extra;
  }
  return out.empty() ? "" : "{" + out + "}";
}

}  // namespace

template <typename V>
V ScalarFamily<V>::Value(const Labels& labels) const {
  std::lock_guard<std::mutex> l(r_.mu_);
  auto it = series_.find(labels);
  return it == series_.end() ? V{} : it->second;
}
template class ScalarFamily<uint64_t>;
template class ScalarFamily<double>;

void Counter::Increment(const Labels& labels, uint64_t by) {
  std::lock_guard<std::mutex> l(r_.mu_);
  series_[labels] += by;
}

void Gauge::Set(const Labels& labels, double value) {
  std::lock_guard<std::mutex> l(r_.mu_);
  series_[labels] = value;
}

void Histogram::Observe(const Labels& labels, double value) {
  std::lock_guard<std::mutex> l(r_.mu_);
  Series& s = series_[labels];
  if (s.buckets.empty()) s.buckets.resize(bounds_.size());
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (value <= bounds_[i]) {
      ++s.buckets[i];
      break;
    }
  }
  ++s.count;
  s.sum += value;
}

void Histogram::Touch(const Labels& labels) {
  std::lock_guard<std::mutex> l(r_.mu_);
  Series& s = series_[labels];
  if (s.buckets.empty()) s.buckets.resize(bounds_.size());
}

uint64_t Histogram::Count(const Labels& labels) const {
  std::lock_guard<std::mutex> l(r_.mu_);
  auto it = series_.find(labels);
  return it == series_.end() ? 0 : it->second.count;
}

template <typename T, typename... Args>
T& MetricsRegistry::Add(std::unique_ptr<T> Family::*slot, const std::string& name, const std::string& help,
                        const char* type, std::vector<std::string> label_names, Args&&... args) {
  std::lock_guard<std::mutex> l(mu_);
  auto f = std::make_unique<Family>();
  f->name = name;
  f->help = help;
  f->type = type;
  f->label_names = std::move(label_names);
  (*f).*slot = std::unique_ptr<T>(new T(*this, std::forward<Args>(args)...));
  T& metric = *((*f).*slot);
  families_.push_back(std::move(f));
  return metric;
}

Counter& MetricsRegistry::AddCounter(const std::string& name, const std::string& help,
                                     std::vector<std::string> label_names) {
  return Add(&Family::counter, name, help, "counter", std::move(label_names));
}

Gauge& MetricsRegistry::AddGauge(const std::string& name, const std::string& help,
                                 std::vector<std::string> label_names) {
  return Add(&Family::gauge, name, help, "gauge", std::move(label_names));
}

Histogram& MetricsRegistry::AddHistogram(const std::string& name, const std::string& help,
                                         std::vector<std::string> label_names, std::vector<double> bounds) {
  return Add(&Family::histogram, name, help, "histogram", std::move(label_names), std::move(bounds));
}

std::string MetricsRegistry::Render() const {
  std::lock_guard<std::mutex> l(mu_);
  std::string out;
  for (const auto& f : families_) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", f->name, f->help, f->name, f->type);
    if (f->counter) {
      for (const auto& [labels, v] : f->counter->series_) {
        out += fmt::format("{}{} {}\n", f->name, LabelSet(f->label_names, labels), v);
      }
    } else if (f->gauge) {
      for (const auto& [labels, v] : f->gauge->series_) {
        out += fmt::format("{}{} {}\n", f->name, LabelSet(f->label_names, labels), Num(v));
      }
    } else if (f->histogram) {
      const auto& bounds = f->histogram->bounds_;
      for (const auto& [labels, s] : f->histogram->series_) {
        uint64_t cumulative = 0;
        for (size_t i = 0; i < bounds.size(); ++i) {
          cumulative += s.buckets[i];
          out += fmt::format("{}_bucket{} {}\n", f->name,
                             LabelSet(f->label_names, labels, "le=\"" + Num(bounds[i]) + "\""), cumulative);
        }
        out += fmt::format("{}_bucket{} {}\n", f->name, LabelSet(f->label_names, labels, "le=\"+Inf\""), s.count);
        out += fmt::format("{}_sum{} {}\n", f->name, LabelSet(f->label_names, labels), Num(s.sum));
        out += fmt::format("{}_count{} {}\n", f->name, LabelSet(f->label_names, labels), s.count);
      }
    }
  }
  return out;
}

}  // namespace falcon::net
