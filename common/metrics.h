// Metrics: counters, gauges and histograms rendered in the Prometheus text format for the
// /metrics endpoints of node and lobby. A Registry owns its metrics; metric objects are
// thread-safe (atomics, or a mutex for labelled families) and live as long as the registry.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace verdict::metrics {

class Counter {
 public:
  void Add(uint64_t n = 1) { value_ += n; }
  uint64_t value() const { return value_.load(); }

 private:
  std::atomic<uint64_t> value_{0};
};

// A counter family with one label, e.g. settlements_total{code="ROOM_UNKNOWN"}.
class LabeledCounter {
 public:
  explicit LabeledCounter(std::string label) : label_(std::move(label)) {}
  void Add(const std::string& value, uint64_t n = 1);
  std::map<std::string, uint64_t> Snapshot() const;
  const std::string& label() const { return label_; }

 private:
  const std::string label_;
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> values_;
};

// Fixed-bucket histogram of seconds.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double seconds);
  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // one per bound, then +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Read() const;

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket, last is +Inf
  double sum_ = 0;
};

// Latency buckets from 1 ms to 10 s.
std::vector<double> LatencyBuckets();

// The content type of Registry::RenderText's output: Prometheus's text exposition format.
inline constexpr char kTextContentType[] = "text/plain; version=0.0.4";

class Registry {
 public:
  Counter& AddCounter(const std::string& name, const std::string& help);
  LabeledCounter& AddLabeledCounter(const std::string& name, const std::string& help,
                                    const std::string& label);
  Histogram& AddHistogram(const std::string& name, const std::string& help,
                          std::vector<double> bounds = LatencyBuckets());
  // A gauge read when rendered. `read` must stay callable for the registry's lifetime.
  void AddGauge(const std::string& name, const std::string& help, std::function<double()> read);
  // Gauges with one label, read together when rendered.
  void AddLabeledGauge(const std::string& name, const std::string& help, const std::string& label,
                       std::function<std::vector<std::pair<std::string, double>>()> read);
  // A counter kept elsewhere (the kernel's count of CPU seconds, say), read when rendered. `read`
  // must stay callable for the registry's lifetime.
  void AddCounterReading(const std::string& name, const std::string& help,
                         std::function<double()> read);
  // A gauge of constant value 1 whose labels carry the information: Prometheus' "info" idiom
  // (verdict_build_info{version="0.1.0",revision="…"} 1). Labels are rendered in the order given.
  void AddInfo(const std::string& name, const std::string& help,
               const std::vector<std::pair<std::string, std::string>>& labels);

  std::string RenderText() const;

 private:
  struct Entry {
    std::string name, help, type;
    std::unique_ptr<Counter> counter;
    std::unique_ptr<LabeledCounter> labeled;
    std::unique_ptr<Histogram> histogram;
    std::function<double()> gauge;  // a gauge, or a counter read when rendered
    std::string fixed_labels;       // `{a="x",b="y"}` of an info metric, else empty
    std::string gauge_label;
    std::function<std::vector<std::pair<std::string, double>>()> labeled_gauge;
  };
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Entry>> entries_;
};

}  // namespace verdict::metrics
