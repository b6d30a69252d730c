// Deliverer: moves results from the outbox to the lobby. One asynchronous loop per outbox
// shard runs on a small pool of I/O threads, each loop with its own keep-alive HTTP connection,
// so shards deliver in parallel while each shard keeps per-room order (P3). A loop sends up to
// `batch` records per request (POST /v1/settlements:batch), at most one per room, or one record
// per request (POST /v1/settlements) at `batch` 1 or against a lobby without the batch path. A
// record is acked only after a 2xx carrying the lobby's receipt for it; a problem with
// `retryable: false` dead-letters it (P4); 401/403 pause every shard until the token works
// again; anything else keeps it and retries with backoff. Blocking outbox calls run on a separate
// disk thread, never on the I/O threads. Knows the outbox interface and HTTP, nothing of rooms.
// Thread-safety: Start/Stop from one thread; Wake, SetToken and Health from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/metrics.h"
#include "common/status.h"
#include "storage/outbox.h"

namespace verdict::delivery {

struct DelivererOptions {
  // Lobby base URLs ("http://host:port" or "https://host:port"), tried in order; a shard whose
  // lobby cannot be reached moves on to the next one.
  std::vector<std::string> lobby_urls;
  // For https URLs: a PEM file of the certificate authorities to trust for the lobby's
  // certificate (which must also name the URL's host). Default: empty, meaning the system's.
  std::string tls_ca_file;
  // The node's bearer token at start (Deliverer::SetToken replaces it).
  std::string token;
  // I/O threads shared by all shard loops. Default: 2.
  int io_threads = 2;
  // Threads for the outbox calls that may wait on the disk: shard reads (which quarantine an
  // undecodable record with a synced write) and dead-letter moves (synced). Default: 1.
  int disk_threads = 1;
  // Limit for each of connect, write and read of one attempt. Default: 5 s.
  std::chrono::milliseconds attempt_timeout{5000};
  // Backoff of a room whose attempt failed: initial, doubling up to max, each multiplied by a
  // random factor in [1 - jitter, 1 + jitter]; the lobby's Retry-After wins when longer.
  // Defaults: 1 s, 30 s, 0.2.
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

class Deliverer {
 public:
  // `outbox` must outlive the deliverer; `registry` may be null (no metrics).
  Deliverer(storage::Outbox& outbox, DelivererOptions options, metrics::Registry* registry);
  ~Deliverer();  // stops
  Deliverer(const Deliverer&) = delete;
  Deliverer& operator=(const Deliverer&) = delete;

  // Starts one loop per shard; each first rescans its shard, so a restart needs no other
  // state. INVALID_ARGUMENT for a malformed lobby URL.
  Status Start();

  // Stops every loop: attempts in flight are abandoned (their records stay in the outbox and
  // are delivered again later), then the threads are joined. Idempotent.
  void Stop();

  // New records may be in the outbox (after an Enqueue or a Redrive), or time moved on:
  // every sleeping loop looks again at once.
  void Wake();

  // Replaces the bearer token from the next attempt on (a rotated or corrected token, reloaded
  // on SIGHUP). Ends a pause caused by 401/403 at once: every shard tries the new token.
  void SetToken(std::string token);

  // OK, or UNAVAILABLE naming a shard whose loop keeps failing (loop_failures_unhealthy).
  Status Health() const;
  // True while the lobby refuses this node's token (401 or 403) and delivery is paused.
  bool auth_failing() const;

  // Rooms currently waiting out a backoff, over all shards.
  size_t RoomsInBackoff() const;
  // Records resolved so far (acked after a 2xx, or dead-lettered): the delivery rate's counter.
  uint64_t resolved() const;

  class Impl;  // defined in deliverer.cc

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace verdict::delivery
