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

struct ReplicateOutageOptions {
  uint64_t results = 27'000;     // results posted, in batches of 128, while etcd is away
  int retries = 2;               // times each batch is posted again, as a client retries a 503
  int clients = 8;               // client threads posting at once
  size_t result_bytes = 11'000;  // serialized size of each result (200 players and a replay path)
  std::string node_binary;       // default: the verdict-node built with this benchmark
  OutputOptions output;
};

// verdict-node's resident memory while etcd is away and replicated posts keep coming, beside
// the same posts without ?durability=replicated.
int RunReplicateOutage(const ReplicateOutageOptions& options);

}  // namespace verdict::bench
