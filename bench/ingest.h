// The ingest benchmark (see ingest.cc for what it compares).
#pragma once

#include <cstddef>

#include "bench/report.h"

namespace verdict::bench {

struct IngestOptions {
  double seconds = 5;          // per design
  int producers = 8;           // threads pushing results at saturation
  int load_producers = 2;      // threads pushing open loop (few: on a small host, more of
                               // them wake often enough to set the tail themselves)
  size_t size = 2048;          // serialized result size, bytes
  bool verdict_only = false;   // skip the comparisons (for profiling verdict's path)
  double load_fraction = 0.5;  // then verdict again, open loop at this part of its maximum
                               // (latency at a load below saturation), and a bare log at the
                               // same rate; 0 skips both
  OutputOptions output;
};

// Runs the three designs one after the other and prints the table (and JSON/CSV if asked).
int RunIngest(const IngestOptions& options);

}  // namespace verdict::bench
