// Deliverer: moves results from the outbox to the lobby. One asynchronous loop per outbox
// shard runs on a small pool of I/O threads, each loop with its own keep-alive HTTP connection,
// so shards deliver in parallel while each shard keeps per-room order (P3). A loop sends up to
// `batch` records per request (POST /v1/settlements:batch), at most one per room, or one record
// per request (POST /v1/settlements) at `batch` 1 or against a lobby without the batch path. A
// record is acked only after a 2xx carrying the lobby's receipt for it; a problem with
// `retryable: false` dead-letters it (P4); 401/403 move a shard on to the next lobby URL, and
// pause every shard until the token works again once every URL refused it; anything else keeps
// it and retries with backoff. Blocking outbox calls run on a separate
// disk thread, never on the I/O threads. Knows the outbox interface and HTTP, nothing of rooms.
// Thread-safety: Start/Stop from one thread; Wake, RetryNow, SetToken and Health from any
// thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/metrics.h"
#include "common/status.h"
#include "delivery/deliverer_options.h"
#include "storage/outbox.h"

namespace verdict::delivery {

class Deliverer {
 public:
  // `outbox` must outlive the deliverer; `registry` may be null (no metrics).
  Deliverer(storage::Outbox& outbox, DelivererOptions options, metrics::Registry* registry);
  ~Deliverer();  // stops
  Deliverer(const Deliverer&) = delete;
  Deliverer& operator=(const Deliverer&) = delete;

  // Starts one loop per shard; each first rescans its shard, so a restart needs no other
  // state. INVALID_ARGUMENT for a malformed lobby URL or token.
  Status Start();

  // Stops every loop: attempts in flight are abandoned (their records stay in the outbox and
  // are delivered again later), then the threads are joined. Idempotent.
  void Stop();

  // New records may be in the outbox (after an Enqueue or a Redrive), or time moved on:
  // every sleeping loop looks again at once.
  void Wake();

  // Cuts every wait short, for a drain before exit: rooms and shards backing off (after
  // failures, a lobby's Retry-After, or a refused token) are tried again at once, with their
  // failures counted afresh; so are the records of a request in flight at the call, whatever its
  // answer (given by the lobby before the call) says. A lobby that is healthy again gets everything
  // at once; one that still fails gets one attempt per room (in batches) and then the backoff from
  // initial_backoff doubling as after any first failure, never a tight loop.
  void RetryNow();

  // Replaces the bearer token from the next attempt on (a rotated or corrected token, reloaded
  // on SIGHUP). Ends a pause caused by 401/403 at once: every shard tries the new token.
  // INVALID_ARGUMENT for a token that cannot go in a header; the old one stays.
  Status SetToken(std::string token);

  // OK, or UNAVAILABLE naming a shard whose loop keeps failing (loop_failures_unhealthy).
  Status Health() const;
  // True while the lobby refuses this node's token (401 or 403) and delivery is paused.
  bool auth_failing() const;

  // Rooms currently waiting out a backoff, over all shards.
  size_t RoomsInBackoff() const;
  // Records resolved so far (acked after a 2xx, or dead-lettered): the delivery rate's counter.
  uint64_t resolved() const;
  // Of those, the ones acked: delivered to the lobby (ORIGINAL_EXPIRED included).
  uint64_t acked() const;

  class Impl;  // defined in deliverer.cc

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace verdict::delivery
