#include "common/metrics.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace verdict::metrics {
namespace {

std::string FormatNumber(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  std::ostringstream out;
  out.precision(12);
  out << v;
  return out.str();
}

// Label values are escaped as the text format requires.
std::string EscapeLabel(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace

void LabeledCounter::Add(const std::string& value, uint64_t n) {
  std::lock_guard lock(mu_);
  values_[value] += n;
}

std::map<std::string, uint64_t> LabeledCounter::Snapshot() const {
  std::lock_guard lock(mu_);
  return values_;
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double seconds) {
  const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), seconds) - bounds_.begin();
  std::lock_guard lock(mu_);
  ++counts_[bucket];
  sum_ += seconds;
}

Histogram::Snapshot Histogram::Read() const {
  std::lock_guard lock(mu_);
  Snapshot s;
  s.bounds = bounds_;
  uint64_t running = 0;
  for (uint64_t c : counts_) {
    running += c;
    s.cumulative.push_back(running);
  }
  s.sum = sum_;
  s.count = running;
  return s;
}

std::vector<double> LatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

Counter& Registry::AddCounter(const std::string& name, const std::string& help) {
  auto e = std::make_unique<Entry>();
  e->name = name;
  e->help = help;
  e->type = "counter";
  e->counter = std::make_unique<Counter>();
  Counter& c = *e->counter;
  std::lock_guard lock(mu_);
  entries_.push_back(std::move(e));
  return c;
}

LabeledCounter& Registry::AddLabeledCounter(const std::string& name, const std::string& help,
                                            const std::string& label) {
  auto e = std::make_unique<Entry>();
  e->name = name;
  e->help = help;
  e->type = "counter";
  e->labeled = std::make_unique<LabeledCounter>(label);
  LabeledCounter& c = *e->labeled;
  std::lock_guard lock(mu_);
  entries_.push_back(std::move(e));
  return c;
}

Histogram& Registry::AddHistogram(const std::string& name, const std::string& help,
                                  std::vector<double> bounds) {
  auto e = std::make_unique<Entry>();
  e->name = name;
  e->help = help;
  e->type = "histogram";
  e->histogram = std::make_unique<Histogram>(std::move(bounds));
  Histogram& h = *e->histogram;
  std::lock_guard lock(mu_);
  entries_.push_back(std::move(e));
  return h;
}

void Registry::AddGauge(const std::string& name, const std::string& help,
                        std::function<double()> read) {
  auto e = std::make_unique<Entry>();
  e->name = name;
  e->help = help;
  e->type = "gauge";
  e->gauge = std::move(read);
  std::lock_guard lock(mu_);
  entries_.push_back(std::move(e));
}

void Registry::AddLabeledGauge(const std::string& name, const std::string& help,
                               const std::string& label,
                               std::function<std::vector<std::pair<std::string, double>>()> read) {
  auto e = std::make_unique<Entry>();
  e->name = name;
  e->help = help;
  e->type = "gauge";
  e->gauge_label = label;
  e->labeled_gauge = std::move(read);
  std::lock_guard lock(mu_);
  entries_.push_back(std::move(e));
}

void Registry::AddCounterReading(const std::string& name, const std::string& help,
                                 std::function<double()> read) {
  auto e = std::make_unique<Entry>();
  e->name = name;
  e->help = help;
  e->type = "counter";
  e->gauge = std::move(read);
  std::lock_guard lock(mu_);
  entries_.push_back(std::move(e));
}

void Registry::AddInfo(const std::string& name, const std::string& help,
                       const std::vector<std::pair<std::string, std::string>>& labels) {
  auto e = std::make_unique<Entry>();
  e->name = name;
  e->help = help;
  e->type = "gauge";
  e->gauge = [] { return 1.0; };
  for (const auto& [label, value] : labels) {
    e->fixed_labels +=
        (e->fixed_labels.empty() ? "{" : ",") + label + "=\"" + EscapeLabel(value) + '"';
  }
  if (!e->fixed_labels.empty()) e->fixed_labels += '}';
  std::lock_guard lock(mu_);
  entries_.push_back(std::move(e));
}

std::string Registry::RenderText() const {
  std::ostringstream out;
  std::lock_guard lock(mu_);
  for (const auto& e : entries_) {
    out << "# HELP " << e->name << ' ' << e->help << "\n# TYPE " << e->name << ' ' << e->type
        << '\n';
    if (e->counter) {
      out << e->name << ' ' << e->counter->value() << '\n';
    } else if (e->labeled) {
      for (const auto& [value, n] : e->labeled->Snapshot()) {
        out << e->name << '{' << e->labeled->label() << "=\"" << EscapeLabel(value) << "\"} " << n
            << '\n';
      }
    } else if (e->histogram) {
      const Histogram::Snapshot s = e->histogram->Read();
      for (size_t i = 0; i <= s.bounds.size(); ++i) {
        const double le = i < s.bounds.size() ? s.bounds[i] : INFINITY;
        out << e->name << "_bucket{le=\"" << FormatNumber(le) << "\"} " << s.cumulative[i] << '\n';
      }
      out << e->name << "_sum " << FormatNumber(s.sum) << '\n';
      out << e->name << "_count " << s.count << '\n';
    } else if (e->labeled_gauge) {
      for (const auto& [value, v] : e->labeled_gauge()) {
        out << e->name << '{' << e->gauge_label << "=\"" << EscapeLabel(value) << "\"} "
            << FormatNumber(v) << '\n';
      }
    } else if (e->gauge) {
      out << e->name << e->fixed_labels << ' ' << FormatNumber(e->gauge()) << '\n';
    }
  }
  return out.str();
}

}  // namespace verdict::metrics
