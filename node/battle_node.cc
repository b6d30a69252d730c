#include "node/battle_node.h"

#include <cmath>
#include <limits>

#include <spdlog/spdlog.h>

#include "common/bearer_token.h"
#include "common/log.h"
#include "common/process_metrics.h"
#include "delivery/deliverer.h"
#include "node/ingest.h"
#include "node/outbox_writer.h"
#include "node/result_channel.h"
#include "node/room_table.h"
#include "proto/validation.h"
#include "proto/wire.h"
#include "replication/node_lease.h"
#include "replication/releasing_outbox.h"
#include "replication/replicator.h"
#include "server/http_server.h"

namespace verdict::node {
namespace {

// Rates are measured over the samples of the last kRateWindowS seconds, and over at least the
// kMinRateSamples newest ones however old (a rate needs two).
constexpr double kRateWindowS = 10;
constexpr size_t kMinRateSamples = 2;
// How often the maintenance thread ticks rooms, releases them, and samples stats and rates.
constexpr std::chrono::seconds kMaintenanceInterval{1};
// The stored size of a record assumed for the time to a full disk while the outbox is empty
// and has no records to measure.
constexpr double kAssumedRecordBytes = 2048;
// How long Shutdown waits, after closing the channel, for the producers it woke to leave Push.
constexpr std::chrono::seconds kWokenProducersWait{5};
// How long Shutdown lets the replicator delete the etcd copies of the last acked results.
constexpr std::chrono::seconds kReplicaDeletesWait{2};
constexpr double kInfinity = std::numeric_limits<double>::infinity();

// What the lobby could never take is refused before anything is opened or started: a node id it
// would refuse in every result (the results would be stored, then quarantined as undecodable),
// and tokens that cannot go in a header (every request would be malformed).
Status CheckNodeOptions(const NodeOptions& options) {
  if (Status valid = wire::ValidateNodeId(options.node_id); !valid.ok()) {
    return InvalidArgumentError("the node id: " + valid.message());
  }
  if (Status valid = CheckBearerToken(options.token); !valid.ok()) {
    return InvalidArgumentError("the lobby token " + valid.message());
  }
  if (!options.ingest.token.empty()) {
    if (Status valid = CheckBearerToken(options.ingest.token); !valid.ok()) {
      return InvalidArgumentError("the ingest token " + valid.message());
    }
  }
  if (options.ingest.max_body_bytes_in_flight < wire::kMaxBatchBodyBytes) {
    return InvalidArgumentError("the ingest body budget must hold one batch body (" +
                                std::to_string(wire::kMaxBatchBodyBytes) + " bytes), got " +
                                std::to_string(options.ingest.max_body_bytes_in_flight));
  }
  return Status::Ok();
}

}  // namespace

double BacklogDrainEtaS(double backlog, double ingest_per_s, double delivery_per_s) {
  if (backlog == 0) return 0;
  if (delivery_per_s <= ingest_per_s) return kInfinity;
  return backlog / (delivery_per_s - ingest_per_s);
}

BattleNode::BattleNode(NodeOptions options)
    : options_(std::move(options)),
      clock_(options_.clock ? options_.clock : SystemClock::Default()),
      channel_(std::make_unique<ResultChannel>(options_.channel_capacity)),
      rooms_(std::make_unique<RoomTable>(clock_)),
      finisher_(std::make_unique<RoomFinisher>()) {}

Result<std::unique_ptr<BattleNode>> BattleNode::Start(NodeOptions options) {
  VERDICT_RETURN_IF_ERROR(CheckNodeOptions(options));
  std::unique_ptr<BattleNode> node(new BattleNode(std::move(options)));
  NodeOptions& o = node->options_;

  storage::OutboxOptions outbox_options;
  outbox_options.shard_count = o.shards;
  outbox_options.clock = node->clock_;
  outbox_options.preallocate_files = o.preallocate_outbox_files;
  auto outbox = storage::OpenOutbox(o.outbox_dir, outbox_options);
  if (!outbox.ok()) return outbox.status();
  node->outbox_ =
      o.wrap_outbox ? o.wrap_outbox(std::move(outbox).value()) : std::move(outbox).value();
  BattleNode* raw = node.get();
  const bool replicate = !o.replication.etcd.endpoints.empty();
  if (replicate) {
    // Every ack (the lobby's receipt) releases the record's copy in etcd.
    node->outbox_ = replication::ReleaseOnAck(
        std::move(node->outbox_),
        [raw](const storage::OutboxRecord& record) { raw->replicator_->Released(record); });
    node->replicator_ = std::make_unique<replication::Replicator>(
        *node->outbox_, o.outbox_dir, o.node_id, o.replication, node->clock_, o.on_replicated,
        [raw] { raw->deliverer_->Wake(); }, &node->registry_);
    node->lease_ =
        std::make_unique<replication::NodeLease>(o.node_id, o.replication, &node->registry_);
  }

  delivery::DelivererOptions delivery = o.delivery;
  delivery.lobby_urls = o.lobby_urls;
  delivery.token = o.token;
  delivery.clock = node->clock_;
  node->deliverer_ =
      std::make_unique<delivery::Deliverer>(*node->outbox_, delivery, &node->registry_);
  VERDICT_RETURN_IF_ERROR(node->deliverer_->Start());
  if (replicate) {
    VERDICT_RETURN_IF_ERROR(node->replicator_->Start());
    VERDICT_RETURN_IF_ERROR(node->lease_->Start());
  }

  node->writer_ = std::make_unique<OutboxWriter>(
      *node->channel_, *node->outbox_, o.writer,
      [raw](const std::vector<v1::BattleResult>& batch,
            const std::vector<storage::EnqueueResult>& outcomes) {
        raw->deliverer_->Wake();
        if (raw->replicator_) raw->replicator_->Stored(batch, outcomes);
        if (raw->options_.on_stored) raw->options_.on_stored(batch, outcomes);
      },
      &node->registry_);
  node->writer_->Start();

  node->ExportMetrics();
  VERDICT_RETURN_IF_ERROR(node->StartServer());
  node->Maintain();  // first stats before anyone scrapes
  node->maintenance_ = std::thread([raw] {
    std::unique_lock lock(raw->mu_);
    while (!raw->stop_cv_.wait_for(lock, kMaintenanceInterval, [raw] { return raw->stopping_; })) {
      lock.unlock();
      raw->Maintain();
      lock.lock();
    }
  });
  return node;
}

BattleNode::~BattleNode() { Shutdown(); }

Status BattleNode::StartServer() {
  server::HttpServerOptions http;
  http.name = "verdict_node";
  http.max_body_bytes_in_flight = options_.ingest.max_body_bytes_in_flight;
  if (!options_.metrics_listen.empty()) {
    auto address = server::ListenAddress::Parse(options_.metrics_listen);
    if (!address.ok()) return address.status();
    if (address->kind != server::ListenAddress::Kind::kTcp) {
      return InvalidArgumentError("the metrics address is HOST:PORT, got '" +
                                  options_.metrics_listen + "'");
    }
    http.listen.push_back(*address);
  }
  const size_t first_ingest = http.listen.size();
  for (const std::string& text : options_.ingest.listen) {
    auto address = server::ListenAddress::Parse(text);
    if (!address.ok()) return address.status();
    if (address->kind == server::ListenAddress::Kind::kTcp && options_.ingest.token.empty()) {
      return InvalidArgumentError("the TCP ingest listener " + text +
                                  " needs a bearer token (--ingest-token or --ingest-token-file)");
    }
    http.listen.push_back(*address);
  }
  if (http.listen.empty()) return Status::Ok();
  IngestHooks hooks;
  hooks.offer = [this](std::vector<v1::BattleResult> results,
                       std::vector<ResultChannel::Completion> done) {
    return channel_->Offer(std::move(results), std::move(done));
  };
  hooks.ready = [this] { return Ready(); };
  hooks.health = [this] { return Health(); };
  hooks.metrics = [this] { return registry_.RenderText(); };
  hooks.redrive = [this](storage::SideArea from, std::optional<uint64_t> room_id,
                         std::function<void(Result<storage::RedriveReport>)> done) -> Status {
    std::lock_guard lock(mu_);
    if (stopping_) return UnavailableError("shutting down: redrive after the next start");
    if (redriving_) return UnavailableError("a redrive is running; retry once it is done");
    // The last one is done: it cleared redriving_, and needs mu_ no more to hand over its answer.
    if (redrive_thread_.joinable()) redrive_thread_.join();
    redriving_ = true;
    redrive_thread_ = std::thread([this, from, room_id, done = std::move(done)] {
      Result<storage::RedriveReport> report = Redrive(from, room_id);
      {
        // Before the answer: a request that follows it finds no redrive running.
        std::lock_guard lock(mu_);
        redriving_ = false;
      }
      done(std::move(report));
    });
    return Status::Ok();
  };
  if (replicator_) {
    hooks.replicate = [this](const std::vector<v1::BattleResult>& results,
                             std::function<void(std::vector<Status>)> done) {
      replicator_->Await(results, std::move(done));
    };
  }
  ingest_ =
      std::make_unique<IngestService>(options_.ingest, options_.node_id, outbox_->shard_count(),
                                      first_ingest, std::move(hooks), registry_);
  server_ = std::make_unique<server::HttpServer>(std::move(http), *ingest_, &registry_);
  auto ports = server_->Start();
  if (!ports.ok()) return ports.status();
  if (first_ingest > 0) metrics_port_ = ports->front();
  ingest_ports_.assign(ports->begin() + first_ingest, ports->end());
  return Status::Ok();
}

Result<RoomHandle> BattleNode::AddRoom(const v1::RoomAllocation& allocation, RoomOptions options) {
  RoomContext context;
  context.node_id = options_.node_id;
  context.clock = clock_;
  context.notifier = std::move(options.notifier);
  context.replays = std::move(options.replays);
  context.results = channel_.get();
  if (options.finishing == Finishing::kHandedOff) context.finisher = finisher_.get();
  return rooms_->Add(allocation, std::move(context));
}

RoomHandle BattleNode::FindRoom(uint64_t room_id) const { return rooms_->Find(room_id); }

uint64_t BattleNode::stored() const { return writer_ ? writer_->stored() : 0; }

uint64_t BattleNode::resolved() const { return deliverer_ ? deliverer_->resolved() : 0; }

uint64_t BattleNode::delivered() const { return deliverer_ ? deliverer_->acked() : 0; }

Result<storage::OutboxStats> BattleNode::OutboxStats() const { return outbox_->Stats(); }

void BattleNode::Maintain() {
  rooms_->TickAll();
  rooms_->ReleaseDue();
  auto stats = outbox_->Stats();
  // On the node's clock, so that a simulated clock drives the rates (and everything derived
  // from them) in tests.
  const double now = clock_->MonotonicMs() / 1000.0;
  std::lock_guard lock(mu_);
  if (stats.ok()) last_stats_ = *stats;
  samples_.emplace_back(now, stored(), resolved());
  while (samples_.size() > kMinRateSamples && now - std::get<0>(samples_.front()) > kRateWindowS) {
    samples_.pop_front();
  }
  const auto& [t0, stored0, resolved0] = samples_.front();
  const auto& [t1, stored1, resolved1] = samples_.back();
  const double span = t1 - t0;
  NodeRates r;
  if (span > 0) {
    r.ingest_per_s = (stored1 - stored0) / span;
    r.delivery_per_s = (resolved1 - resolved0) / span;
  }
  const double backlog = static_cast<double>(last_stats_.records);
  const double record_bytes = last_stats_.records > 0
                                  ? static_cast<double>(last_stats_.bytes) / backlog
                                  : kAssumedRecordBytes;
  r.disk_full_eta_s = r.ingest_per_s > 0
                          ? last_stats_.free_disk_bytes / (record_bytes * r.ingest_per_s)
                          : kInfinity;
  r.backlog_drain_eta_s = BacklogDrainEtaS(backlog, r.ingest_per_s, r.delivery_per_s);
  rates_ = r;
}

NodeRates BattleNode::rates() const {
  std::lock_guard lock(mu_);
  return rates_;
}

bool BattleNode::Drained() {
  // First the finisher, the channel and the writer, in the order a result passes them: one they
  // no longer count has moved on.
  if (finisher_->unfinished() > 0) return false;
  if (channel_->unfinished() > 0 || writer_->stalled()) return false;
  auto stats = outbox_->Stats();
  return stats.ok() && stats->records == 0;
}

Status BattleNode::Health() const {
  if (writer_ && writer_->stalled()) {
    return UnavailableError("outbox writes are failing; rooms finishing are held back");
  }
  {
    std::lock_guard lock(mu_);
    for (const storage::ShardStats& s : last_stats_.shards) {
      if (!s.damage.empty()) return DataLossError(s.damage);  // names the shard, stopped alone
    }
  }
  return deliverer_ ? deliverer_->Health() : Status::Ok();
}

Status BattleNode::Ready() const {
  if (draining_) return UnavailableError("draining: this node takes no more results");
  if (channel_->closed()) {
    return UnavailableError("shutting down: this node takes no more results");
  }
  if (writer_ && writer_->stalled()) {
    return UnavailableError("outbox writes are failing (full disk or I/O error); retry later");
  }
  return Status::Ok();
}

void BattleNode::BeginDrain() {
  draining_ = true;
  // The lobby may have been away long enough to grow every backoff past the drain's deadline.
  deliverer_->RetryNow();
}

Result<storage::RedriveReport> BattleNode::Redrive(storage::SideArea from,
                                                   std::optional<uint64_t> room_id) {
  {
    std::lock_guard lock(mu_);
    if (shut_down_) return UnavailableError("the node is shutting down");
  }
  auto report = outbox_->Redrive(from, room_id);
  if (report.ok() && report->moved > 0) deliverer_->Wake();
  return report;
}

Status BattleNode::SetLobbyToken(std::string token) {
  return deliverer_->SetToken(std::move(token));
}

Status BattleNode::SetIngestToken(std::string token) {
  // Empty is allowed, as at start: TCP listeners then refuse every request.
  if (Status valid = token.empty() ? Status::Ok() : CheckBearerToken(token); !valid.ok()) {
    return InvalidArgumentError("the ingest token " + valid.message() +
                                "; the node keeps the token it has");
  }
  if (ingest_) ingest_->SetToken(std::move(token));
  return Status::Ok();
}

size_t BattleNode::Shutdown() {
  {
    std::lock_guard lock(mu_);
    if (shut_down_) return 0;
    shut_down_ = true;
    stopping_ = true;
  }
  stop_cv_.notify_all();
  // A redrive under way finishes (its records are where they were, or moved, either way
  // durable) and answers before delivery stops; no other starts once stopping_ is set.
  if (redrive_thread_.joinable()) redrive_thread_.join();
  draining_ = true;  // ingest answers 503 from here on; what it took is stored below
  const auto deadline = std::chrono::steady_clock::now() + options_.writer.shutdown_deadline;
  // Handed-off finishes and rooms blocked on a full channel (the maintenance thread among them,
  // in a fallback tick) hand their results over as the writer drains it; a failing outbox keeps
  // them blocked until the deadline. Then the channel closes, which refuses them.
  if (!finisher_->WaitIdle(deadline) || !channel_->WaitForBlockedProducers(deadline)) {
    Log().error("shutdown: rooms still waiting on a full channel at the deadline");
  }
  // Store what is queued (the deliverers may still send some of it), then stop sending.
  size_t lost = writer_ ? writer_->Stop(deadline) : 0;
  channel_->Close();
  // Finishes still queued are refused by the closed channel, quickly; a room finishing from now
  // on is refused before it finishes (Room::Conclude).
  finisher_->Stop();
  // The close wakes every blocked producer; wait until each has left Push and been counted.
  channel_->WaitForBlockedProducers(std::chrono::steady_clock::now() + kWokenProducersWait);
  if (maintenance_.joinable()) maintenance_.join();
  lost += channel_->refused();
  if (deliverer_) deliverer_->Stop();
  if (replicator_) replicator_->Stop(std::chrono::steady_clock::now() + kReplicaDeletesWait);
  if (lease_) lease_->Stop();
  // Last: the writer has answered every request it took by now.
  if (server_) server_->Stop();
  if (lost > 0) {
    Log().error(
        "shutdown: {} result(s) could not be stored before the deadline; they are lost with "
        "this process (each room is named above)",
        lost);
  }
  return lost;
}

void BattleNode::ExportMetrics() {
  metrics::AddProcessMetrics(registry_);
  using Series = std::vector<std::pair<std::string, double>>;
  auto per_shard = [this](auto field) {
    return [this, field]() {
      std::lock_guard lock(mu_);
      Series out;
      for (const auto& s : last_stats_.shards) out.emplace_back(std::to_string(s.shard), field(s));
      return out;
    };
  };
  auto stat = [this](auto field) {
    return [this, field]() {
      std::lock_guard lock(mu_);
      return static_cast<double>(field(last_stats_));
    };
  };
  auto rate = [this](auto field) {
    return [this, field]() {
      std::lock_guard lock(mu_);
      return field(rates_);
    };
  };
  registry_.AddLabeledGauge("verdict_node_outbox_records", "Results waiting in each shard.",
                            "shard", per_shard([](const auto& s) { return double(s.records); }));
  registry_.AddLabeledGauge("verdict_node_outbox_bytes", "Bytes waiting in each shard.", "shard",
                            per_shard([](const auto& s) { return double(s.bytes); }));
  registry_.AddLabeledGauge("verdict_node_outbox_oldest_age_seconds",
                            "Age of the oldest waiting result in each shard.", "shard",
                            per_shard([](const auto& s) { return s.oldest_age_ms / 1000.0; }));
  registry_.AddLabeledGauge(
      "verdict_node_outbox_shard_damaged",
      "1 for a shard whose stored data cannot be read: it is stopped, the others deliver.", "shard",
      per_shard([](const auto& s) { return s.damage.empty() ? 0.0 : 1.0; }));
  registry_.AddGauge("verdict_node_outbox_quarantined", "Results in quarantine.",
                     stat([](const auto& s) { return s.quarantined; }));
  registry_.AddGauge("verdict_node_outbox_dead_lettered", "Results in dead letter.",
                     stat([](const auto& s) { return s.dead_lettered; }));
  registry_.AddGauge("verdict_node_outbox_free_disk_bytes", "Free space on the outbox volume.",
                     stat([](const auto& s) { return s.free_disk_bytes; }));
  registry_.AddGauge("verdict_node_result_channel_occupancy", "Results in the result channel.",
                     [this] { return static_cast<double>(channel_->size()); });
  registry_.AddGauge("verdict_node_result_channel_capacity", "Capacity of the result channel.",
                     [this] { return static_cast<double>(channel_->capacity()); });
  registry_.AddGauge("verdict_node_result_channel_blocked_producers",
                     "Rooms waiting to hand over their result because the channel is full.",
                     [this] { return static_cast<double>(channel_->waiting_producers()); });
  registry_.AddGauge("verdict_node_rooms_playing", "Rooms in battle.",
                     [this] { return static_cast<double>(rooms_->playing()); });
  registry_.AddGauge("verdict_node_rooms_finished", "Finished rooms kept for late clients.",
                     [this] { return static_cast<double>(rooms_->finished()); });
  registry_.AddGauge("verdict_node_finished_room_oldest_dwell_seconds",
                     "How long the oldest kept Finished room has been finished.",
                     [this] { return rooms_->oldest_finished_dwell_ms() / 1000.0; });
  registry_.AddGauge("verdict_node_ingest_rate", "R: results stored per second (10 s window).",
                     rate([](const NodeRates& r) { return r.ingest_per_s; }));
  registry_.AddGauge("verdict_node_delivery_rate", "C: results resolved per second (10 s window).",
                     rate([](const NodeRates& r) { return r.delivery_per_s; }));
  registry_.AddGauge("verdict_node_disk_full_eta_seconds",
                     "T = D / (S x R): seconds until the outbox volume fills at this rate.",
                     rate([](const NodeRates& r) { return r.disk_full_eta_s; }));
  registry_.AddGauge("verdict_node_backlog_drain_eta_seconds",
                     "N / (C - R): seconds until the backlog drains at these rates.",
                     rate([](const NodeRates& r) { return r.backlog_drain_eta_s; }));
}

}  // namespace verdict::node
