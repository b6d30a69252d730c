// The options a host fills to start a BattleNode (node/battle_node.h): NodeOptions and its parts
// for the outbox writer and the ingest listeners (delivery's are delivery/deliverer_options.h),
// and the callback that tells a host its results are stored. Plain structs; every field has its
// default here.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "verdict/common/clock.h"
#include "verdict/delivery/deliverer_options.h"
#include "verdict/replication/options.h"
#include "verdict/storage/outbox.h"
#include "verdict/v1/verdict.pb.h"

namespace verdict::node {

// Called with each batch of results once the outbox has answered for all of it durably, on the
// node's sync thread, in write order, with the outbox's answer for each; keep it short. A result
// whose answer is OK is stored (P1: from here on it cannot be lost), newly or (already_present)
// before. The others were refused and logged as errors: one over the size limit
// (RESOURCE_EXHAUSTED, kept in quarantine as "oversize"), one whose room already has a different
// record (ALREADY_EXISTS; that record is the one delivered), one with room 0 (INVALID_ARGUMENT).
using StoredCallback = std::function<void(const std::vector<v1::BattleResult>&,
                                          const std::vector<storage::EnqueueResult>&)>;

// The outbox writer (node/outbox_writer.h), which moves finished rooms' results into the outbox.
struct OutboxWriterOptions {
  // Most results written by one WriteBatch. Default: 256.
  size_t max_batch = 256;
  // Batches prepared but not yet written beyond which the writer waits for the sync thread.
  // Default: 4.
  size_t max_unsynced_batches = 4;
  // Wait between attempts while the outbox fails. Default: 1 s.
  std::chrono::milliseconds retry_interval{1000};
  // How long a shutdown may take to store what is queued: rooms blocked on a full channel get
  // this long to hand their results over, and a failing outbox is retried until then; what is
  // left after it is given up (logged as an error with every room id) and lost with the
  // process. BattleNode::Shutdown and Stop() measure it from their start. Default: 30 s.
  std::chrono::milliseconds shutdown_deadline{30'000};
  // Test-only negative control: a batch whose write or sync failed is reported stored instead
  // of held (P1 and P6 off): it is lost if the process dies before the outbox can write again.
  // Default: false. Never set it outside tests.
  bool unsafe_drop_failed_batches_for_test = false;
};

// The ingest listeners, through which other processes hand the node results (node/ingest.h).
struct IngestOptions {
  // Where battle hosts post results: "unix:PATH" or "HOST:PORT", any number. Default: none.
  std::vector<std::string> listen;
  // Bearer token that TCP listeners require of POSTs (a Unix socket relies on its file mode,
  // 0660). A TCP listener without a token is refused at start. Default: empty.
  std::string token;
  // How long a request waits for its results to become durable before it is answered 503; they
  // may still become durable, and a retry of the same results then answers 200. Default: 5 s.
  std::chrono::milliseconds durable_wait{5000};
  // How long a request with ?durability=replicated waits for its results to be durable and then
  // replicated to etcd before it is answered 503; as above, they may be stored and replicated
  // later, and a retry then answers 200. Default: 10 s.
  std::chrono::milliseconds replicated_wait{10000};
  // Results taken and not yet durable beyond which new requests are answered 503. Default: 8192.
  size_t max_pending_results = 8192;
  // Bytes of request bodies the listeners hold at once, from a request's header until it is
  // answered (server::HttpServerOptions::max_body_bytes_in_flight): what bounds the memory that
  // ingest can hold, whatever the number of connections. A request past it is answered 503 with
  // Retry-After before its body is read. At least one batch body (4 MiB). Default: 64 MiB.
  uint64_t max_body_bytes_in_flight = uint64_t{64} << 20;
  // Test-only negative control: answers 201 as soon as the results are queued, before the fsync
  // that makes them durable (P1 off). Default: false. Never set it outside tests.
  bool unsafe_answer_before_durable_for_test = false;
};

struct NodeOptions {
  // This node's id, as the lobby knows it (and its token is registered for): valid UTF-8
  // without NUL, at most 4096 bytes (the lobby's rules, proto/validation.h).
  std::string node_id;
  // The outbox directory (created if missing).
  std::string outbox_dir;
  // Outbox shards, fixed when the outbox is created. Default: 16.
  uint32_t shards = 16;
  // Lobby URLs ("http://host:port"), in failover order, and this node's bearer token at start
  // (SetLobbyToken replaces it): one word of visible ASCII (common/bearer_token.h).
  std::vector<std::string> lobby_urls;
  std::string token;
  // Preallocation of outbox files (storage::OutboxOptions::preallocate_files). Default: true.
  bool preallocate_outbox_files = true;
  // Results that may wait between finishing rooms and the outbox. Default: 256.
  size_t channel_capacity = 256;
  // Outbox writing; its shutdown_deadline bounds Shutdown (Default: 30 s).
  OutboxWriterOptions writer;
  // Delivery tuning; lobby_urls, token and clock are taken from above.
  delivery::DelivererOptions delivery;
  // "HOST:PORT" for /metrics, /healthz and /readyz; empty for none. Default: empty.
  std::string metrics_listen;
  // The ingest listeners (POST /v1/results); none by default.
  IngestOptions ingest;
  // Time source for rooms, outbox ages, backoff and the rates. Not owned. Default: system clock.
  const Clock* clock = nullptr;
  // Told of each batch of results once the outbox has answered for all of it durably (see
  // StoredCallback). Default: none.
  StoredCallback on_stored;
  // The replicated tier (replication/replicator.h): with etcd endpoints, each stored result is
  // copied to etcd, its copy deleted after the lobby's receipt, and the node keeps a lease there
  // so that a rescuer can deliver its results if its host is lost. Default: none (off).
  replication::ReplicationOptions replication;
  // Called with each batch of results once their copies are in etcd, on the replicator's thread;
  // keep it short. Default: none.
  std::function<void(const std::vector<replication::ReplicatedResult>&)> on_replicated;
  // Test seam: wraps the opened outbox (for example in one whose writes fail). Default: none.
  std::function<std::unique_ptr<storage::Outbox>(std::unique_ptr<storage::Outbox>)> wrap_outbox;
};

}  // namespace verdict::node
