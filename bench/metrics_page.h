// Figures read from the Prometheus text pages that verdict-node and verdict-lobby serve at
// /metrics: a sample's value, and what a histogram gained between two readings of the page, for
// the benchmarks that profile a run by the programs' own metrics. Plain functions of the text.
#pragma once

#include <string>

namespace verdict::bench {

// The value of the unlabelled sample `name` on a Prometheus text page (its line "name VALUE");
// 0 when absent.
double MetricValue(const std::string& text, const std::string& name);

// A quantile of the observations histogram `name` gained from one rendering of a Prometheus text
// page, `before` (empty: from none), to a later one, `after`: the upper bound of the first bucket
// that holds `fraction` of them, in milliseconds (the histogram in seconds). 0 when it gained
// none; infinity when only the +Inf bucket reaches the fraction.
double HistogramQuantileMs(const std::string& before, const std::string& after,
                           const std::string& name, double fraction);

// The mean of the observations histogram `name` gained between the two renderings, in its own
// unit (its _sum over its _count); 0 when it gained none.
double HistogramMean(const std::string& before, const std::string& after, const std::string& name);

}  // namespace verdict::bench
