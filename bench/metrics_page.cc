#include "bench/metrics_page.h"

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <utility>
#include <vector>

namespace verdict::bench {

double MetricValue(const std::string& text, const std::string& name) {
  const size_t at = ("\n" + text).find("\n" + name + " ");
  return at == std::string::npos ? 0 : std::atof(text.c_str() + at + name.size() + 1);
}

namespace {

// The cumulative counts of histogram `name`'s buckets on a rendered page, by upper bound (le),
// in the page's order (ascending, +Inf last); none when the page has no such histogram.
std::vector<std::pair<double, double>> HistogramBuckets(const std::string& text,
                                                        const std::string& name) {
  std::istringstream in(text);
  std::string line;
  std::vector<std::pair<double, double>> buckets;
  const std::string prefix = name + "_bucket{le=\"";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    const size_t end = line.find('"', prefix.size());
    const std::string le = line.substr(prefix.size(), end - prefix.size());
    const double bound = le == "+Inf" ? INFINITY : std::stod(le);
    buckets.emplace_back(bound, std::stod(line.substr(line.rfind(' ') + 1)));
  }
  return buckets;
}

}  // namespace

double HistogramQuantileMs(const std::string& before, const std::string& after,
                           const std::string& name, double fraction) {
  std::vector<std::pair<double, double>> gained = HistogramBuckets(after, name);
  const std::vector<std::pair<double, double>> earlier = HistogramBuckets(before, name);
  for (size_t i = 0; i < gained.size() && i < earlier.size(); ++i) {
    gained[i].second -= earlier[i].second;
  }
  if (gained.empty() || gained.back().second <= 0) return 0;
  for (const auto& [bound, cumulative] : gained) {
    if (cumulative >= fraction * gained.back().second) return bound * 1000;
  }
  return INFINITY;
}

double HistogramMean(const std::string& before, const std::string& after, const std::string& name) {
  const double count = MetricValue(after, name + "_count") - MetricValue(before, name + "_count");
  const double sum = MetricValue(after, name + "_sum") - MetricValue(before, name + "_sum");
  return count > 0 ? sum / count : 0;
}

}  // namespace verdict::bench
