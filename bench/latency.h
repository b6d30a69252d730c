// The settlement latency benchmark (see latency.cc): the time from a battle's end to the player's
// new rating on the feed, at part of the drain's maximum, beside the floor of its path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "bench/report.h"
#include "node/options.h"

namespace verdict::bench {

struct LatencyOptions {
  uint64_t results = 20'000;   // results posted open loop
  double load_fraction = 0.5;  // of the drain's maximum, measured first in the same run
  double rate = 0;             // results/s to post; set, the drain's maximum is not measured
  uint64_t backlog = 20'000;   // results of the drain that measures the maximum
  uint32_t shards = node::NodeOptions{}.shards;       // the node's --shards (and the drain's)
  size_t batch = delivery::DelivererOptions{}.batch;  // the node's --batch (and the drain's)
  int clients = 32;  // keep-alive connections posting to the node, one request in flight each
  uint64_t floor_samples = 1000;  // samples of each part of the floor
  double lobby_coalesce_ms = -1;  // the lobby's --coalesce-wait-ms; negative: its default
  // The feed's subscriber acknowledges every segment at once (FeedReader::Open): what the
  // lobby's small writes held back for a delayed acknowledgement cost.
  bool subscriber_quick_ack = false;
  std::string db;            // libpq conninfo of the server; empty: the PG* environment
  std::string lobby_binary;  // verdict-lobby to run; empty: the one built with this bench
  std::string node_binary;   // verdict-node to run; empty: the one built with this bench
  OutputOptions output;
};

int RunLatency(const LatencyOptions& options);

}  // namespace verdict::bench
