// MetricsRegistry: counters, gauges and histograms rendered in the Prometheus text exposition format
// (version 0.0.4), the one registry behind both servers' GET /metrics (Prometheus' C++ client is not
// packaged by Debian). A family is a metric name with fixed label names; a series is one set of label
// values. Families render in the order they were added, each with its HELP and TYPE lines even when it has
// no series yet; series render in the order of their label values.
//
// Ownership: the registry owns its families; the references Add* return stay valid as long as it lives.
// Thread-safe: every method may be called from any thread (one mutex per registry).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"

namespace falcon::net {

using Labels = std::vector<std::string>;  // values, in the order of the family's label names

class MetricsRegistry;

// The series of one counter or gauge family: a value per label set.
template <typename V>
class ScalarFamily {
 public:
  // 0 when the series does not exist.
  V Value(const Labels& labels = {}) const;

 protected:
  explicit ScalarFamily(MetricsRegistry& r) : r_(r) {}
  MetricsRegistry& r_;
  std::map<Labels, V> series_;  // guarded by r_.mu_

 private:
  friend class MetricsRegistry;
};

class Counter : public ScalarFamily<uint64_t> {
 public:
  // Adds `by` to the series (created at 0 first).
  void Increment(const Labels& labels = {}, uint64_t by = 1);
  // Creates the series at 0 so it renders before it is first counted.
  void Touch(const Labels& labels = {}) { Increment(labels, 0); }

 private:
  friend class MetricsRegistry;
  using ScalarFamily::ScalarFamily;
};

class Gauge : public ScalarFamily<double> {
 public:
  void Set(const Labels& labels, double value);
  void Set(double value) { Set({}, value); }

 private:
  friend class MetricsRegistry;
  using ScalarFamily::ScalarFamily;
};

class Histogram {
 public:
  void Observe(const Labels& labels, double value);
  void Observe(double value) { Observe({}, value); }
  // Creates the series empty so it renders (all buckets 0) before the first observation.
  void Touch(const Labels& labels = {});
  // Observations of the series (0 when it does not exist).
  uint64_t Count(const Labels& labels = {}) const;

 private:
  friend class MetricsRegistry;
  struct Series {
    std::vector<uint64_t> buckets;  // non-cumulative; cumulated when rendered
    uint64_t count = 0;
    double sum = 0;
  };
  Histogram(MetricsRegistry& r, std::vector<double> bounds) : r_(r), bounds_(std::move(bounds)) {}
  MetricsRegistry& r_;
  const std::vector<double> bounds_;  // upper bounds, ascending; +Inf is implicit
  std::map<Labels, Series> series_;   // guarded by r_.mu_
};

class MetricsRegistry {
 public:
  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  Counter& AddCounter(const std::string& name, const std::string& help, std::vector<std::string> label_names = {});
  Gauge& AddGauge(const std::string& name, const std::string& help, std::vector<std::string> label_names = {});
  Histogram& AddHistogram(const std::string& name, const std::string& help, std::vector<std::string> label_names,
                          std::vector<double> bounds);

  // Every family in the text format.
  std::string Render() const;

 private:
  template <typename V>
  friend class ScalarFamily;
  friend class Counter;
  friend class Gauge;
  friend class Histogram;
  struct Family {
    std::string name, help, type;
    std::vector<std::string> label_names;
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
  };
  template <typename T, typename... Args>
  T& Add(std::unique_ptr<T> Family::*slot, const std::string& name, const std::string& help, const char* type,
         std::vector<std::string> label_names, Args&&... args);

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Family>> families_ ABSL_GUARDED_BY(mu_);
};

}  // namespace falcon::net
