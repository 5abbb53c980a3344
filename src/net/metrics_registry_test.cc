#include "net/metrics_registry.h"

#include <gtest/gtest.h>

namespace falcon::net {
namespace {

TEST(MetricsRegistry, RendersFamiliesInOrderWithSortedSeries) {
  MetricsRegistry r;
  Counter& c = r.AddCounter("x_requests_total", "Requests.", {"route", "code"});
  Gauge& g = r.AddGauge("x_up", "Up.");
  Histogram& h = r.AddHistogram("x_seconds", "Latency.", {"route"}, {0.5, 1});
  c.Increment({"/b", "200"});
  c.Increment({"/a", "404"}, 2);
  g.Set(3);
  h.Observe({"/a"}, 0.25);
  h.Observe({"/a"}, 0.75);
  h.Observe({"/a"}, 7);
  EXPECT_EQ(r.Render(),
            "# HELP x_requests_total Requests.\n"
            "# TYPE x_requests_total counter\n"
            "x_requests_total{route=\"/a\",code=\"404\"} 2\n"
            "x_requests_total{route=\"/b\",code=\"200\"} 1\n"
            "# HELP x_up Up.\n"
            "# TYPE x_up gauge\n"
            "x_up 3\n"
            "# HELP x_seconds Latency.\n"
            "# TYPE x_seconds histogram\n"
            "x_seconds_bucket{route=\"/a\",le=\"0.5\"} 1\n"
            "x_seconds_bucket{route=\"/a\",le=\"1\"} 2\n"
            "x_seconds_bucket{route=\"/a\",le=\"+Inf\"} 3\n"
            "x_seconds_sum{route=\"/a\"} 8\n"
            "x_seconds_count{route=\"/a\"} 3\n");
  EXPECT_EQ(c.Value({"/a", "404"}), 2u);
  EXPECT_EQ(c.Value({"/c", "200"}), 0u);
  EXPECT_EQ(h.Count({"/a"}), 3u);
}

TEST(MetricsRegistry, EmptyFamiliesKeepTheirHeadersAndTouchedSeriesRenderAtZero) {
  MetricsRegistry r;
  r.AddCounter("a_total", "A.", {"k"});
  Counter& b = r.AddCounter("b_total", "B.", {"status"});
  b.Touch({"failed"});
  Histogram& h = r.AddHistogram("d_seconds", "D.", {}, {0.001, 2.5});
  h.Touch();
  EXPECT_EQ(r.Render(),
            "# HELP a_total A.\n# TYPE a_total counter\n"
            "# HELP b_total B.\n# TYPE b_total counter\n"
            "b_total{status=\"failed\"} 0\n"
            "# HELP d_seconds D.\n# TYPE d_seconds histogram\n"
            "d_seconds_bucket{le=\"0.001\"} 0\n"
            "d_seconds_bucket{le=\"2.5\"} 0\n"
            "d_seconds_bucket{le=\"+Inf\"} 0\n"
            "d_seconds_sum 0\n"
            "d_seconds_count 0\n");
}

TEST(MetricsRegistry, EscapesLabelValues) {
  MetricsRegistry r;
  r.AddCounter("e_total", "E.", {"v"}).Increment({"a\"b\\c\nd"});
  EXPECT_NE(r.Render().find("e_total{v=\"a\\\"b\\\\c\\nd\"} 1\n"), std::string::npos) << r.Render();
}

}  // namespace
}  // namespace falcon::net
