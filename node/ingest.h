// IngestService: what the node's listeners answer (the HttpHandler of its server::HttpServer).
// On every listener: GET /metrics, /healthz (503 while outbox writes fail or a delivery loop
// keeps failing) and /readyz (200 while results are taken). On the ingest listeners also POST
// /v1/results and POST /v1/results:batch, through which a battle host in any language hands results
// to a running verdict-node, and POST /v1/outbox:redrive, through which an operator moves
// dead-lettered results back to delivery. A 2xx means the result is fsync-durable in the outbox
// (P1): the answer is sent from the writer's completion, after the group commit that made it
// durable, never before. Errors follow the lobby's contract (server/problem.h). Thread-safe; no
// Beast, so it is tested with plain values.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/metrics.h"
#include "common/mutex.h"
#include "common/status.h"
#include "node/options.h"
#include "node/result_channel.h"
#include "server/http_server.h"
#include "storage/outbox.h"

namespace verdict::node {

// What the service needs of the node; every function may be called from any thread.
struct IngestHooks {
  // Queues results for the outbox (ResultChannel::Offer).
  std::function<Status(std::vector<v1::BattleResult>, std::vector<ResultChannel::Completion>)>
      offer;
  // OK while results are taken; UNAVAILABLE saying why not (draining, outbox failing).
  std::function<Status()> ready;
  // OK while the node is healthy (BattleNode::Health).
  std::function<Status()> health;
  // The Prometheus text of /metrics.
  std::function<std::string()> metrics;
  // Calls its second argument once each of the stored results is replicated, with a status each
  // (Replicator::Await); null when the node does not replicate (?durability=replicated is then
  // refused).
  std::function<void(const std::vector<v1::BattleResult>&,
                     std::function<void(std::vector<Status>)>)>
      replicate;
  // Starts moving the records of a room (all when unset) from a side area back to delivery
  // (BattleNode::Redrive) off the calling thread, and calls `done` with the report once done.
  // UNAVAILABLE, and `done` is never called, if a redrive is running or the node shuts down.
  std::function<Status(storage::SideArea, std::optional<uint64_t>,
                       std::function<void(Result<storage::RedriveReport>)>)>
      redrive;
};

class IngestService final : public server::HttpHandler {
 public:
  // `node_id` fills a result's empty node_id; a result naming another node is refused.
  // Listeners with an index of at least `first_ingest_listener` serve the ingest endpoints.
  // `registry` must outlive the service.
  IngestService(IngestOptions options, std::string node_id, uint32_t shard_count,
                size_t first_ingest_listener, IngestHooks hooks, metrics::Registry& registry);

  server::HeaderVerdict OnHeader(const server::RequestHead& head) override;
  void OnRequest(const server::RequestHead& head, server::HttpRequest request,
                 std::shared_ptr<server::Exchange> exchange) override;

  // Replaces the TCP listeners' token (SIGHUP); requests already admitted are unaffected.
  void SetToken(std::string token);

 private:
  struct Pending;

  // The result as it will be stored (node_id filled in), or INVALID_ARGUMENT.
  Status Prepare(v1::BattleResult& result) const;
  // `replicated`: answer only once the results are replicated too (?durability=replicated).
  void PostResult(const server::HttpRequest& request, std::shared_ptr<server::Exchange> exchange,
                  bool replicated);
  void PostBatch(const server::HttpRequest& request, std::shared_ptr<server::Exchange> exchange,
                 bool replicated);
  // Offers `results` and arranges for `answer` to run once every one of them has its outbox
  // answer; the problem to reply with if they cannot be taken now.
  std::optional<server::HttpReply> Store(
      std::vector<v1::BattleResult> results,
      std::function<void(std::vector<storage::EnqueueResult>)> answer, const std::string& path);
  // POST /v1/outbox:redrive?from=dead-letter|quarantine&room_id=N (or &all=true).
  void PostRedrive(const std::string& target, std::shared_ptr<server::Exchange> exchange);
  bool TokenMatches(const std::string& authorization) const;
  server::HttpReply Unavailable(const std::string& detail, const std::string& path) const;

  const IngestOptions options_;
  const std::string node_id_;
  const uint32_t shard_count_;
  const size_t first_ingest_listener_;
  const IngestHooks hooks_;
  mutable Mutex token_mu_;
  std::string token_ GUARDED_BY(token_mu_);
  // The answers to a request whose results are not durable in time, built once: encoding a
  // problem costs more than the rest of a request.
  const server::HttpReply result_not_durable_;
  const server::HttpReply batch_not_durable_;
  const server::HttpReply result_not_replicated_;
  const server::HttpReply batch_not_replicated_;
  std::atomic<size_t> pending_{0};
  metrics::LabeledCounter& answers_;
};

}  // namespace verdict::node
