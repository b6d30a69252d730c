#include "replication/rescue.h"

#include <filesystem>
#include <mutex>

#include "common/log.h"
#include "replication/etcd_client.h"
#include "replication/keys.h"
#include "replication/releasing_outbox.h"
#include "storage/outbox.h"

namespace verdict::replication {
namespace {

constexpr int64_t kListPage = 256;
// Results enqueued into the scratch outbox per synced batch.
// How often a rescue looks whether the scratch outbox is empty, and sends the deletes of the
// copies acked since.
constexpr std::chrono::milliseconds kPollInterval{50};
// After the deadline (or a cancel), how long the deletes of copies already acked may still take.
constexpr std::chrono::seconds kFinalDeletesWait{10};

// Sends the deletes queued in `keys` in transactions of `max_batch`; what fails stays queued.
Status FlushDeletes(EtcdClient& client, std::mutex& mu, std::vector<std::string>& keys,
                    size_t max_batch) {
  std::vector<std::string> batch;
  {
    std::lock_guard lock(mu);
    const size_t n = std::min(keys.size(), max_batch);
    batch.assign(keys.begin(), keys.begin() + n);
  }
  if (batch.empty()) return Status::Ok();
  VERDICT_RETURN_IF_ERROR(client.Delete(batch));
  std::lock_guard lock(mu);
  keys.erase(keys.begin(), keys.begin() + batch.size());  // others only append
  return Status::Ok();
}

}  // namespace

Result<RescueReport> RescueNode(const std::string& node_id, const std::string& token,
                                const RescueOptions& options, const std::atomic<bool>* cancel) {
  if (options.work_dir.empty()) return InvalidArgumentError("a rescue needs a work directory");
  const auto deadline = std::chrono::steady_clock::now() + options.deadline;
  auto cancelled = [cancel] { return cancel && cancel->load(); };
  auto client = EtcdClient::Create(options.etcd);
  if (!client.ok()) return client.status();
  const std::string prefix = options.etcd.key_prefix;

  // Every copy of the node goes into a scratch outbox a page at a time (memory stays bounded by
  // the page, whatever etcd holds), and is deleted from etcd only as its receipt comes.
  RescueReport report;
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::path(options.work_dir) /
                                    ("rescue-" + NodeLivenessKey("", node_id).substr(6));
  std::filesystem::remove_all(dir, ec);  // a scratch outbox of an earlier rescue: etcd has it all
  std::filesystem::create_directories(options.work_dir, ec);
  std::mutex deletes_mu;
  std::vector<std::string> deletes;
  {
    auto opened = storage::OpenOutbox(dir.string(), {});
    if (!opened.ok()) return opened.status();
    auto outbox = ReleaseOnAck(std::move(opened).value(), [&](const storage::OutboxRecord& record) {
      std::lock_guard lock(deletes_mu);
      deletes.push_back(
          ResultKey(prefix, node_id, record.result.room_id(), record.result.ended_at_ms()));
    });
    const std::string from_prefix = NodeResultsPrefix(prefix, node_id);
    const std::string end = PrefixEnd(from_prefix);
    for (std::string from = from_prefix;;) {
      auto page = (*client)->Range(from, end, kListPage, /*keys_only=*/false);
      if (!page.ok()) return page.status();
      std::vector<v1::BattleResult> results;
      for (const KeyValue& kv : page->kvs) {
        v1::BattleResult r;
        if (!r.ParseFromString(kv.value) || r.node_id() != node_id) {
          ++report.undecodable;
          Log().error("rescue of {}: etcd key {} does not hold one of its results; left alone",
                      node_id, kv.key);
          continue;
        }
        results.push_back(std::move(r));
      }
      if (!results.empty()) {
        auto outcomes = outbox->Enqueue(results);
        if (!outcomes.ok()) return outcomes.status();
        report.found += results.size();
      }
      if (!page->more || page->kvs.empty()) break;
      from = page->kvs.back().key + '\0';
    }
    if (report.found == 0) {
      outbox.reset();
      std::filesystem::remove_all(dir, ec);
      return report;
    }
    delivery::DelivererOptions delivery = options.delivery;
    delivery.token = token;
    delivery::Deliverer deliverer(*outbox, delivery, nullptr);
    VERDICT_RETURN_IF_ERROR(deliverer.Start());
    Log().info("rescue of {}: delivering {} replicated result(s) to the lobby", node_id,
               report.found);
    bool logged_delete_failure = false;
    while (std::chrono::steady_clock::now() < deadline && !cancelled()) {
      if (Status s = FlushDeletes(**client, deletes_mu, deletes, 128);
          !s.ok() && !logged_delete_failure) {
        logged_delete_failure = true;
        Log().warn("rescue of {}: cannot delete delivered copies yet: {}", node_id, s.ToString());
      }
      auto stats = outbox->Stats();
      if (stats.ok() && stats->records == 0) break;
      std::this_thread::sleep_for(kPollInterval);
    }
    deliverer.Stop();
    auto stats = outbox->Stats();
    if (stats.ok()) {
      report.left = stats->records;
      report.refused = stats->dead_lettered;
    }
    if (report.refused > 0) {
      auto refused = outbox->ListSide(storage::SideArea::kDeadLetter, std::nullopt);
      if (refused.ok()) {
        for (const storage::SideRecord& r : *refused) {
          Log().error("rescue of {}: room={} refused by the lobby ({}: {}); its copy stays in etcd",
                      node_id, r.result.room_id(), r.reason, r.detail);
        }
      }
    }
  }
  const auto final_deadline = std::chrono::steady_clock::now() + kFinalDeletesWait;
  while (true) {
    {
      std::lock_guard lock(deletes_mu);
      if (deletes.empty()) break;
    }
    if (std::chrono::steady_clock::now() >= final_deadline) {
      Log().warn(
          "rescue of {}: {} delivered copies could not be deleted from etcd; a later "
          "rescue delivers them again (answered duplicate)",
          node_id, deletes.size());
      break;
    }
    if (!FlushDeletes(**client, deletes_mu, deletes, 128).ok()) {
      std::this_thread::sleep_for(kPollInterval * 10);
    }
  }
  report.delivered = report.found - report.left - report.refused;
  std::filesystem::remove_all(dir, ec);
  return report;
}

RescueWatcher::RescueWatcher(RescueWatcherOptions options, metrics::Registry* registry)
    : options_(std::move(options)),
      rescued_((registry ? *registry : fallback_registry_)
                   .AddCounter("verdict_node_rescued_results_total",
                               "Results of dead nodes delivered by this node's rescues.")),
      rescues_((registry ? *registry : fallback_registry_)
                   .AddCounter("verdict_node_rescues_total",
                               "Rescues of dead nodes started by this node.")) {}

RescueWatcher::~RescueWatcher() { Stop(); }

Status RescueWatcher::Start() {
  auto client = EtcdClient::Create(options_.rescue.etcd);  // checks the options
  if (!client.ok()) return client.status();
  if (options_.rescue.work_dir.empty()) return InvalidArgumentError("rescue needs a work dir");
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void RescueWatcher::Stop() {
  {
    // Under the lock: set between Run's look at cancel_ and its wait, the signal would be lost
    // and Stop would wait out the interval.
    MutexLock lock(&mu_);
    cancel_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

Status RescueWatcher::Look() {
  auto client = EtcdClient::Create(options_.rescue.etcd);
  if (!client.ok()) return client.status();
  const std::string& prefix = options_.rescue.etcd.key_prefix;
  // The nodes with copies, one range request each: after finding a node, skip past its keys.
  std::set<std::string> with_copies;
  const std::string all = AllResultsPrefix(prefix);
  const std::string all_end = PrefixEnd(all);
  for (std::string from = all; !cancel_;) {
    auto page = (*client)->Range(from, all_end, 1, /*keys_only=*/true);
    if (!page.ok()) return page.status();
    if (page->kvs.empty()) break;
    auto node = NodeOfResultKey(prefix, page->kvs.front().key);
    if (!node) break;
    with_copies.insert(*node);
    from = PrefixEnd(NodeResultsPrefix(prefix, *node));
  }
  if (with_copies.empty()) return Status::Ok();
  std::set<std::string> alive;
  const std::string nodes = NodesPrefix(prefix);
  auto live = (*client)->Range(nodes, PrefixEnd(nodes), 0, /*keys_only=*/true);
  if (!live.ok()) return live.status();
  for (const KeyValue& kv : live->kvs) {
    if (auto node = NodeOfLivenessKey(prefix, kv.key)) alive.insert(*node);
  }
  for (const std::string& node : with_copies) {
    if (cancel_) break;
    if (node == options_.self_node_id || alive.count(node)) continue;
    auto token = options_.tokens.find(node);
    if (token == options_.tokens.end()) {
      if (warned_no_token_.insert(node).second) {
        Log().warn(
            "node {} has no live lease and results in etcd, but no rescue token is "
            "given for it; not rescued",
            node);
      }
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (auto last = last_attempt_.find(node);
        last != last_attempt_.end() && now - last->second < options_.retry_after) {
      continue;
    }
    Log().warn("node {} has no live lease: rescuing its replicated results", node);
    rescues_.Add();
    auto report = RescueNode(node, token->second, options_.rescue, &cancel_);
    if (!report.ok()) {
      Log().error("rescue of {} failed: {}", node, report.status().ToString());
      last_attempt_[node] = now;
      continue;
    }
    rescued_.Add(report->delivered);
    Log().info("rescue of {}: {} found, {} delivered, {} refused, {} left", node, report->found,
               report->delivered, report->refused, report->left);
    if (report->refused + report->left + report->undecodable > 0) {
      last_attempt_[node] = now;
    } else {
      last_attempt_.erase(node);
    }
  }
  return Status::Ok();
}

void RescueWatcher::Run() {
  bool logged = false;
  MutexLock lock(&mu_);
  while (!cancel_) {
    lock.Unlock();
    Status s = Look();
    lock.Lock();
    if (!s.ok() && !logged) Log().warn("rescue watch cannot read etcd: {}", s.ToString());
    logged = !s.ok();
    const auto deadline = std::chrono::steady_clock::now() + options_.interval;
    while (!cancel_) {
      if (cv_.WaitUntil(deadline)) break;
    }
  }
}

}  // namespace verdict::replication
