// DelivererOptions: how a node delivers its outbox to the lobby (delivery/deliverer.h), filled
// by a host in NodeOptions::delivery or by verdict-node's flags. A plain struct; every field has
// its default here.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "verdict/common/clock.h"

namespace verdict::delivery {

struct DelivererOptions {
  // Lobby base URLs ("http://host:port" or "https://host:port"), tried in order; a shard whose
  // lobby cannot be reached, or refuses the node's token (401/403), moves on to the next one.
  std::vector<std::string> lobby_urls;
  // For https URLs: a PEM file of the certificate authorities to trust for the lobby's
  // certificate (which must also name the URL's host). Default: empty, meaning the system's.
  std::string tls_ca_file;
  // The node's bearer token at start (Deliverer::SetToken replaces it): one word of visible
  // ASCII (common/bearer_token.h), or Start fails with INVALID_ARGUMENT.
  std::string token;
  // I/O threads shared by all shard loops. Default: 2.
  int io_threads = 2;
  // Threads for the outbox calls that may wait on the disk: shard reads (which quarantine an
  // undecodable record with a synced write) and dead-letter moves (synced). Default: 1.
  int disk_threads = 1;
  // Limit for each of connect, write and read of one attempt. Default: 5 s.
  std::chrono::milliseconds attempt_timeout{5000};
  // Backoff of a room whose attempt failed: initial, doubling up to max, each multiplied by a
  // random factor in [1 - jitter, 1 + jitter]; the lobby's Retry-After wins when longer, up to
  // max_backoff (a Retry-After of days, from a misconfigured lobby or proxy, must not park the
  // results of a lobby that is back in seconds). Defaults: 1 s, 30 s, 0.2.
  std::chrono::milliseconds initial_backoff{1000};
  std::chrono::milliseconds max_backoff{30000};
  double jitter = 0.2;
  // A shard loop that ends unexpectedly (throws) is restarted after a backoff as above; after
  // this many failures in a row, without a record resolved in between, Health reports the
  // shard. Default: 3.
  int loop_failures_unhealthy = 3;
  // Records a shard loop reads from its shard at a time, and the most it keeps in memory while
  // rooms at its head wait out their backoff. Defaults: 128 and 4096.
  size_t read_batch = 128;
  size_t max_window = 4096;
  // Records one request carries at most (POST /v1/settlements:batch, capped at the lobby's 256
  // and kept under its 4 MiB), never two of one room. 1 sends each record alone to
  // POST /v1/settlements. A lobby that answers 404 or 405 on the batch path makes every shard
  // fall back to single requests until the deliverer restarts. Default: 64.
  size_t batch = 64;
  // How long Stop waits for the shard loops to end once it has closed their connections (an
  // attempt in flight is abandoned, its record kept). Default: 2 s.
  std::chrono::milliseconds stop_timeout{2000};
  // Time source for backoff decisions (its monotonic reading). Not owned. Default: nullptr
  // (the system clock).
  const Clock* clock = nullptr;
  // Test-only negative control: acks a record before sending it, so a crash in between loses
  // it. Default: false. Never set it outside tests.
  bool unsafe_ack_before_send_for_test = false;
  // Test-only negative control: holds back only the failed record, not its room, so a room's
  // later records may overtake it (P3 off). Default: false. Never set it outside tests.
  bool unsafe_ignore_room_order_for_test = false;
  // Test-only negative control: a 200 to a batch acks every record in it without reading the
  // items, so a record the lobby refused or could not settle is lost. Default: false. Never set
  // it outside tests.
  bool unsafe_ack_whole_batch_for_test = false;
};

}  // namespace verdict::delivery
