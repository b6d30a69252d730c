// The retention benchmark (see retention.cc for what it measures).
#pragma once

#include <cstdint>
#include <string>

#include "bench/report.h"

namespace verdict::bench {

struct RetentionBenchOptions {
  // Growth: rooms settled at `rate` per second while retention passes run every `pass_s`, with
  // partitions of `partition` ids and the windows below (seconds).
  uint64_t rooms = 60'000;
  double rate = 1000;
  int64_t partition = 5'000;
  double pass_s = 1;
  double events_window_s = 10;
  double history_window_s = 20;
  double receipts_window_s = 30;
  // Drain: a backlog drained without retention, with passes running, and without again.
  uint64_t backlog = 40'000;
  uint32_t shards = 16;
  size_t batch = 64;
  // Drop: partitions of these many events, each dropped once it is past its window.
  uint64_t drop_small = 100'000;
  uint64_t drop_large = 1'000'000;
  std::string db;  // libpq conninfo; empty: the PG* environment
  OutputOptions output;
};

int RunRetentionBench(const RetentionBenchOptions& options);

}  // namespace verdict::bench
