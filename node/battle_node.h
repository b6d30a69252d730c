// BattleNode: what a battle host embeds. It composes the outbox, the result channel, the
// outbox writer and the deliverers from one options struct, keeps the host's rooms, and
// serves /metrics, /healthz and /readyz, and (when asked) the ingest endpoints through which
// other processes hand it results (node/ingest.h). Start it once; Shutdown (or destruction)
// stores every result still in the channel before returning, within writer.shutdown_deadline.
// Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/clock.h"
#include "common/metrics.h"
#include "common/status.h"
#include "delivery/deliverer.h"
#include "node/ingest.h"
#include "node/outbox_writer.h"
#include "node/result_channel.h"
#include "node/room.h"
#include "server/http_server.h"
#include "storage/outbox.h"

namespace verdict::node {

struct NodeOptions {
  // This node's id, as the lobby knows it (and its token is registered for).
  std::string node_id;
  // The outbox directory (created if missing).
  std::string outbox_dir;
  // Outbox shards, fixed when the outbox is created. Default: 16.
  uint32_t shards = 16;
  // Lobby URLs ("http://host:port"), in failover order, and this node's bearer token at start
  // (SetLobbyToken replaces it).
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
  // Called with each batch of results once the outbox has answered for all of it durably, on
  // the writer's sync thread, with the outbox's answer for each; keep it short. A result whose
  // answer is OK is stored (P1: from here on it cannot be lost). The others were refused and
  // logged as errors: one over the size limit (RESOURCE_EXHAUSTED, kept in quarantine as
  // "oversize"), one whose room already has a different record (ALREADY_EXISTS; that record is
  // the one delivered), one with room 0 (INVALID_ARGUMENT). Default: none.
  OutboxWriter::StoredCallback on_stored;
  // Test seam: wraps the opened outbox (for example in one whose writes fail). Default: none.
  std::function<std::unique_ptr<storage::Outbox>(std::unique_ptr<storage::Outbox>)> wrap_outbox;
};

// Rates measured over the last ten seconds, and what follows from them (DESIGN §6).
struct NodeRates {
  double ingest_per_s = 0;         // R: results stored per second
  double delivery_per_s = 0;       // C: results resolved (acked or dead-lettered) per second
  double disk_full_eta_s = 0;      // T = D / (S × R); +inf when nothing comes in
  double backlog_drain_eta_s = 0;  // BacklogDrainEtaS of the backlog and the two rates
};

// Seconds until a backlog of `backlog` records drains while `ingest_per_s` come in and
// `delivery_per_s` go out: N / (C − R). 0 for an empty backlog; +inf when it does not drain
// (C ≤ R).
double BacklogDrainEtaS(double backlog, double ingest_per_s, double delivery_per_s);

class BattleNode {
 public:
  // Opens the outbox, starts the writer, the deliverers and (if asked) the metrics endpoint.
  static Result<std::unique_ptr<BattleNode>> Start(NodeOptions options);
  ~BattleNode();
  BattleNode(const BattleNode&) = delete;
  BattleNode& operator=(const BattleNode&) = delete;

  // A RoomContext for this node's rooms, with the host's notifier and replay store (either
  // may be null; both must outlive the rooms).
  RoomContext room_context(BattleEndNotifier* notifier, ReplayStore* replays);

  ResultChannel& results() { return channel_; }
  RoomTable& rooms() { return rooms_; }
  storage::Outbox& outbox() { return *outbox_; }
  metrics::Registry& metrics() { return registry_; }
  uint16_t metrics_port() const { return metrics_port_; }
  // The bound port of each ingest listener, in the order of ingest.listen (0 for a socket).
  const std::vector<uint16_t>& ingest_ports() const { return ingest_ports_; }
  const std::string& node_id() const { return options_.node_id; }

  uint64_t stored() const { return writer_ ? writer_->stored() : 0; }
  uint64_t resolved() const { return deliverer_ ? deliverer_->resolved() : 0; }
  NodeRates rates() const;
  // Nothing waits anywhere: no room is blocked handing over a result, the channel is empty,
  // the writer holds no batch (taken but not yet stored) and every shard is empty.
  bool Drained();
  // OK, or why the node is unhealthy (outbox writes failing, a damaged outbox shard, a
  // delivery loop that keeps failing).
  Status Health() const;
  // OK while the node takes results: UNAVAILABLE while it drains (BeginDrain), shuts down, or
  // cannot write its outbox. /readyz and the ingest endpoints answer 503 with it.
  Status Ready() const;
  // Stops taking results through the ingest endpoints (503) and makes /readyz answer 503, while
  // delivery goes on: the first step of a drain on exit. Rooms of an embedding host are not
  // affected.
  void BeginDrain();
  // Replaces the lobby token from the next delivery attempt on (SIGHUP in verdict-node);
  // delivery paused by a refused token resumes at once.
  void SetLobbyToken(std::string token);
  // Replaces the token that TCP ingest listeners require (SIGHUP in verdict-node).
  void SetIngestToken(std::string token);

  // Stops taking results, stores what the channel holds, stops delivery and the endpoint.
  // Rooms blocked on a full channel get until writer.shutdown_deadline to hand their results
  // over; then the channel closes and a failing outbox is given up. Returns how many results
  // could not be stored (0 unless the outbox kept failing); they are lost with the process,
  // and an error line says so.
  size_t Shutdown();

 private:
  explicit BattleNode(NodeOptions options);
  void Maintain();  // once a second: room fallbacks and releases, stats, rates
  Status StartServer();
  void ExportMetrics();

  NodeOptions options_;
  const Clock* clock_;
  metrics::Registry registry_;
  std::unique_ptr<storage::Outbox> outbox_;
  ResultChannel channel_;
  RoomTable rooms_;
  std::unique_ptr<delivery::Deliverer> deliverer_;
  std::unique_ptr<OutboxWriter> writer_;
  std::unique_ptr<IngestService> ingest_;
  std::unique_ptr<server::HttpServer> server_;
  uint16_t metrics_port_ = 0;
  std::vector<uint16_t> ingest_ports_;
  std::atomic<bool> draining_{false};

  mutable std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  bool shut_down_ = false;
  storage::OutboxStats last_stats_;
  // (clock seconds, stored, resolved) samples of the last ten seconds.
  std::deque<std::tuple<double, uint64_t, uint64_t>> samples_;
  NodeRates rates_;
  std::thread maintenance_;
};

}  // namespace verdict::node
