// BattleNode: what a battle host embeds. It composes the outbox, the result channel, the
// outbox writer and the deliverers from one options struct (node/options.h), owns the host's
// rooms (node/room.h: the host holds RoomHandles, which cannot dangle), and serves /metrics,
// /healthz and /readyz, and (when asked) the ingest endpoints through which other processes hand
// it results. Start it once; Shutdown (or destruction) stores every result still queued before
// returning, within writer.shutdown_deadline.
// Lifetimes: the node owns everything it uses except NodeOptions::clock, which must outlive it;
// notifiers and replay stores are shared with the rooms that call them (RoomOptions). Destroy
// the node before anything its clock points to, and make no room call concurrently with its
// destruction (calls after it answer NOT_FOUND).
// Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "verdict/common/clock.h"
#include "verdict/common/metrics.h"
#include "verdict/common/status.h"
#include "verdict/node/options.h"
#include "verdict/node/room.h"
#include "verdict/storage/outbox.h"

namespace verdict::delivery {
class Deliverer;
}
namespace verdict::replication {
class Replicator;
class NodeLease;
}  // namespace verdict::replication
namespace verdict::server {
class HttpServer;
}

namespace verdict::node {

class IngestService;
class OutboxWriter;
class ResultChannel;
class RoomFinisher;
class RoomTable;

// Rates measured over the last ten seconds, and what follows from them (docs/design.md §6).
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
  // Checks the options (INVALID_ARGUMENT for a node id or token the lobby could never take, a
  // malformed URL or listen address), opens the outbox, starts the writer, the deliverers and
  // (if asked) the metrics and ingest endpoints.
  static Result<std::unique_ptr<BattleNode>> Start(NodeOptions options);
  ~BattleNode();
  BattleNode(const BattleNode&) = delete;
  BattleNode& operator=(const BattleNode&) = delete;

  // Creates the room the lobby allocated to this node with this roster, and returns the host's
  // handle to it. INVALID_ARGUMENT unless the allocation passes the lobby's own rules (a
  // positive room id; 2 to 200 seats on teams 1 to T, 2 <= T <= 100, each seated; no player twice)
  // and names this node; ALREADY_EXISTS while a room with that id is held.
  Result<RoomHandle> AddRoom(const v1::RoomAllocation& allocation, RoomOptions options = {});
  // A handle to a held room; one that answers NOT_FOUND for an unknown or released room.
  RoomHandle FindRoom(uint64_t room_id) const;

  // The node's metrics, served on /metrics; a host may add its own series.
  metrics::Registry& metrics() { return registry_; }
  uint16_t metrics_port() const { return metrics_port_; }
  // The bound port of each ingest listener, in the order of ingest.listen (0 for a socket).
  const std::vector<uint16_t>& ingest_ports() const { return ingest_ports_; }
  const std::string& node_id() const { return options_.node_id; }

  // Results newly durable in the outbox, resolved (acked or dead-lettered), and of those
  // delivered (acked), so far.
  uint64_t stored() const;
  uint64_t resolved() const;
  uint64_t delivered() const;
  // The outbox's counts, bytes and ages per shard, side areas and free disk, read now.
  Result<storage::OutboxStats> OutboxStats() const;
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
  // delivery goes on, every backoff cut short (Deliverer::RetryNow): the first step of a drain on
  // exit. Rooms of an embedding host are not affected.
  void BeginDrain();
  // Replaces the lobby token from the next delivery attempt on (SIGHUP in verdict-node);
  // delivery paused by a refused token resumes at once. INVALID_ARGUMENT for a token that
  // cannot go in a header; the old one stays.
  Status SetLobbyToken(std::string token);
  // Replaces the token that TCP ingest listeners require (SIGHUP in verdict-node), likewise;
  // empty, they refuse every request.
  Status SetIngestToken(std::string token);

  // Moves the records of `room_id` (all of them when unset) from quarantine or dead letter back
  // to the tail of their shards and wakes delivery: what `verdict-node outbox redrive` does to a
  // stopped node's outbox, for a running node (its outbox is held by this process alone). A
  // result dead-lettered because its room's allocation had failed is delivered again once the
  // room is allocated. Blocks for the synced writes, a page at a time; any thread. Errors as
  // storage::Outbox::Redrive's; UNAVAILABLE once Shutdown has begun.
  Result<storage::RedriveReport> Redrive(storage::SideArea from, std::optional<uint64_t> room_id);

  // Stops taking results, stores what the channel holds, stops delivery and the endpoint.
  // Rooms blocked on a full channel (and handed-off finishes) get until
  // writer.shutdown_deadline to hand their results over; then the channel closes and a failing
  // outbox is given up. Returns how many results could not be stored (0 unless the outbox kept
  // failing); they are lost with the process, and an error line says so. From then on a room
  // call that would finish its room answers FAILED_PRECONDITION, and the room plays on.
  size_t Shutdown();

 private:
  friend class BattleNodeTestPeer;  // tests/support/battle_node_peer.h

  explicit BattleNode(NodeOptions options);
  void Maintain();  // once a second: room fallbacks and releases, stats, rates
  Status StartServer();
  void ExportMetrics();

  NodeOptions options_;
  const Clock* clock_;
  metrics::Registry registry_;
  std::unique_ptr<storage::Outbox> outbox_;
  std::unique_ptr<ResultChannel> channel_;
  std::unique_ptr<RoomTable> rooms_;
  std::unique_ptr<RoomFinisher> finisher_;
  std::unique_ptr<delivery::Deliverer> deliverer_;
  std::unique_ptr<OutboxWriter> writer_;
  std::unique_ptr<replication::Replicator> replicator_;  // null unless replicating
  std::unique_ptr<replication::NodeLease> lease_;
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
  // The ingest API's redrive (IngestHooks::redrive), one at a time off the I/O threads.
  std::thread redrive_thread_;
  bool redriving_ = false;  // guarded by mu_
};

}  // namespace verdict::node
