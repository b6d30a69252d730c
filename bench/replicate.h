// The replicated tier's benchmark (see replicate.cc for what it compares).
#pragma once

#include <cstdint>
#include <string>

#include "bench/report.h"

namespace verdict::bench {

struct ReplicateOptions {
  double seconds = 5;        // length of each throughput and latency run
  int producers = 8;         // producer threads of the throughput runs
  uint64_t backlog = 5'000;  // results of the rescue and ordinary drains
  std::string etcd;          // etcd://HOST:PORT,...; empty: a three-member cluster started here
  std::string db;            // libpq conninfo; empty: PG* environment
  OutputOptions output;
};

int RunReplicate(const ReplicateOptions& options);

}  // namespace verdict::bench
