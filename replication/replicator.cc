#include "replication/replicator.h"

#include <algorithm>
#include <mutex>

#include "common/log.h"
#include "proto/wire.h"
#include "replication/etcd_client.h"
#include "replication/keys.h"

namespace verdict::replication {
namespace {

// Keys of released records remembered, so that a put racing with an ack is dropped. A put that
// still slips through leaves a copy whose record was acked: the next start enqueues it again and
// the lobby answers `duplicate`, so the bound costs at most a redelivery, never a result.
constexpr size_t kReleasedRemembered = 65536;
// Records the rebuild reads from one shard at a time, and copies listed per range request.
constexpr size_t kScanChunk = 256;
constexpr int64_t kListPage = 256;

}  // namespace

// The rebuild's progress through a read-only view of the outbox: the shards in order, then dead
// letter (whose records keep their copies until they are redriven and acked).
struct Replicator::Scan {
  std::unique_ptr<storage::Outbox> view;
  uint32_t shard = 0;
  uint64_t after = 0;
  uint64_t covers = 0;  // not_held_ when it began: the records it stands for
};

Replicator::Replicator(storage::Outbox& outbox, std::string outbox_dir, std::string node_id,
                       ReplicationOptions options, const Clock* clock,
                       ReplicatedCallback on_replicated, std::function<void()> wake_delivery,
                       metrics::Registry* registry)
    : outbox_(outbox),
      outbox_dir_(std::move(outbox_dir)),
      node_id_(std::move(node_id)),
      options_(std::move(options)),
      clock_(clock ? clock : SystemClock::Default()),
      on_replicated_(std::move(on_replicated)),
      wake_delivery_(std::move(wake_delivery)) {
  ExportMetrics(registry ? *registry : fallback_registry_);
}

Replicator::~Replicator() { Stop(std::chrono::steady_clock::now()); }

Status Replicator::Start() {
  if (options_.max_batch == 0) return InvalidArgumentError("replication max_batch must be > 0");
  auto client = EtcdClient::Create(options_.etcd);
  if (!client.ok()) return client.status();
  client_ = std::move(client).value();
  for (size_t i = 1; i < options_.max_in_flight; ++i) {
    auto extra = EtcdClient::Create(options_.etcd);
    if (!extra.ok()) return extra.status();
    put_clients_.push_back(std::move(extra).value());
  }
  // What the outbox holds now is unreplicated until the rebuild has put it.
  if (auto stats = outbox_.Stats(); stats.ok()) {
    int64_t oldest_age_ms = 0;
    for (const auto& s : stats->shards) oldest_age_ms = std::max(oldest_age_ms, s.oldest_age_ms);
    MutexLock lock(&mu_);
    not_held_ = stats->records;
    if (not_held_ > 0) not_held_since_ms_ = clock_->NowMs() - oldest_age_ms;
  }
  thread_ = std::thread([this] { Run(); });
  for (auto& client : put_clients_) {
    put_threads_.emplace_back([this, c = client.get()] { RunPuts(*c); });
  }
  return Status::Ok();
}

void Replicator::Stop(std::chrono::steady_clock::time_point deadline) {
  {
    MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    stop_deadline_ = deadline;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
  for (auto& t : put_threads_) t.join();
  put_threads_.clear();
  // Whoever still waits for a copy hears that it will not come from this process.
  std::vector<Waiter> waiters;
  {
    MutexLock lock(&mu_);
    for (Entry& e : queue_)
      std::move(e.waiters.begin(), e.waiters.end(), std::back_inserter(waiters));
    for (auto& [key, e] : in_flight_) {
      std::move(e.waiters.begin(), e.waiters.end(), std::back_inserter(waiters));
    }
    queue_.clear();
    queued_.clear();
    in_flight_.clear();
  }
  for (Waiter& w : waiters) w(UnavailableError("the node is shutting down before replicating"));
}

bool Replicator::ReleasedLocked(const std::string& key, uint64_t sequence) const {
  auto it = released_.find(key);
  return it != released_.end() && (sequence == 0 || it->second == sequence);
}

bool Replicator::KnownLocked(const std::string& key, uint64_t sequence) const {
  return queued_.count(key) || in_flight_.count(key) || ReleasedLocked(key, sequence);
}

void Replicator::QueueDeleteLocked(std::string key) {
  ++deleting_[key];
  deletes_.push_back(std::move(key));
}

bool Replicator::PuttableLocked() const {
  return adopted_ && !queue_.empty() && !deleting_.count(queue_.front().key);
}

bool Replicator::EnqueueLocked(Entry entry) {
  if (KnownLocked(entry.key, entry.sequence)) return false;
  queued_bytes_ += entry.value.size();
  const std::string key = entry.key;
  queue_.push_back(std::move(entry));
  queued_[key] = std::prev(queue_.end());
  return true;
}

void Replicator::Stored(const std::vector<v1::BattleResult>& batch,
                        const std::vector<storage::EnqueueResult>& outcomes) {
  const int64_t now = clock_->NowMs();
  bool added = false;
  {
    MutexLock lock(&mu_);
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!outcomes[i].status.ok()) continue;  // refused: never stored, nothing to copy
      // Stored before (a client's retry): held, counted, or replicated since, already. Counting
      // it again made a retried batch count twice in the unreplicated gauge.
      if (outcomes[i].already_present) continue;
      const v1::BattleResult& r = batch[i];
      const uint64_t sequence = outcomes[i].sequence;
      std::string key = ResultKey(options_.etcd.key_prefix, node_id_, r.room_id(), r.ended_at_ms());
      // A record stored anew under a key whose older record was released (acked): this one
      // needs its own copy, and an Await of it must wait for that copy.
      if (auto it = released_.find(key); it != released_.end() && it->second != sequence) {
        released_.erase(it);
      }
      if (auto q = queued_.find(key); q != queued_.end() && q->second->reput) {
        // Awaited before it was reported stored: it is this record, and counted from now on.
        Entry& e = *q->second;
        e.reput = false;
        e.live = true;
        e.sequence = sequence;
        e.stored_ms = now;
        continue;
      }
      if (KnownLocked(key, sequence)) continue;
      if (queued_bytes_ >= options_.max_buffered_bytes) {
        // Kept by the outbox alone; the next rebuild reads it back.
        if (not_held_++ == 0) not_held_since_ms_ = now;
        rescan_needed_ = true;
        continue;
      }
      added |= EnqueueLocked({.key = std::move(key),
                              .value = wire::DeterministicBytes(r),
                              .room_id = r.room_id(),
                              .ended_at_ms = r.ended_at_ms(),
                              .sequence = sequence,
                              .stored_ms = now,
                              .live = true});
    }
  }
  if (added) cv_.SignalAll();
}

void Replicator::Released(const storage::OutboxRecord& record) {
  const std::string key = ResultKey(options_.etcd.key_prefix, node_id_, record.result.room_id(),
                                    record.result.ended_at_ms());
  const uint64_t sequence = record.sequence;
  // An entry of another (newer) record under the key is not this one's: it stays.
  auto ours = [sequence](const Entry& e) { return e.sequence == 0 || e.sequence == sequence; };
  std::vector<Waiter> waiters;
  {
    MutexLock lock(&mu_);
    if (auto it = queued_.find(key); it != queued_.end() && ours(*it->second)) {
      waiters = std::move(it->second->waiters);
      queued_bytes_ -= it->second->value.size();
      queue_.erase(it->second);
      queued_.erase(it);
    }
    // A put in flight queues the delete when it is back, so the delete cannot overtake it. A
    // newer record's put in flight found this copy (its own if identical, a conflict if not);
    // that record's release deletes the key.
    bool put_in_flight = false;
    if (auto it = in_flight_.find(key); it != in_flight_.end()) {
      put_in_flight = true;
      if (ours(it->second)) {
        std::move(it->second.waiters.begin(), it->second.waiters.end(),
                  std::back_inserter(waiters));
        it->second.waiters.clear();
        it->second.released = true;
      }
    }
    if (released_.insert_or_assign(key, sequence).second) {
      released_order_.push_back(key);
      if (released_order_.size() > kReleasedRemembered) {
        released_.erase(released_order_.front());
        released_order_.pop_front();
      }
    }
    if (!put_in_flight) QueueDeleteLocked(key);
  }
  cv_.SignalAll();
  // Settled at the lobby: stronger than replicated.
  for (Waiter& w : waiters) w(Status::Ok());
}

void Replicator::Await(const std::vector<v1::BattleResult>& results,
                       std::function<void(std::vector<Status>)> done) {
  struct Pending {
    std::mutex mu;
    std::vector<Status> statuses;
    size_t left = 0;
    std::function<void(std::vector<Status>)> done;
  };
  if (results.empty()) return done({});
  auto pending = std::make_shared<Pending>();
  pending->statuses.resize(results.size());
  pending->left = results.size();
  pending->done = std::move(done);
  std::vector<Waiter> settled;
  std::vector<Waiter> etcd_failing, over_budget;
  const int64_t now = clock_->NowMs();
  {
    MutexLock lock(&mu_);
    // While etcd fails, a wait would hold the post's answer (and what it captured) until etcd
    // is back; the client's retry finds the record replicated then.
    const bool failing = unavailable_ || nospace_;
    for (size_t i = 0; i < results.size(); ++i) {
      Waiter w = [pending, i](const Status& s) {
        std::unique_lock plock(pending->mu);
        pending->statuses[i] = s;
        if (--pending->left > 0) return;
        plock.unlock();
        pending->done(std::move(pending->statuses));
      };
      const v1::BattleResult& r = results[i];
      std::string key = ResultKey(options_.etcd.key_prefix, node_id_, r.room_id(), r.ended_at_ms());
      if (ReleasedLocked(key, 0)) {
        settled.push_back(std::move(w));
      } else if (failing) {
        etcd_failing.push_back(std::move(w));
      } else if (auto q = queued_.find(key); q != queued_.end()) {
        q->second->waiters.push_back(std::move(w));
      } else if (auto f = in_flight_.find(key); f != in_flight_.end()) {
        f->second.waiters.push_back(std::move(w));
      } else {
        // Replicated already, or not held in memory: put it again, which answers at once if
        // etcd has it; within the buffer, as the records Stored holds.
        std::string value = wire::DeterministicBytes(r);
        if (queued_bytes_ + value.size() > options_.max_buffered_bytes) {
          over_budget.push_back(std::move(w));
          continue;
        }
        Entry e{.key = std::move(key),
                .value = std::move(value),
                .room_id = r.room_id(),
                .ended_at_ms = r.ended_at_ms(),
                .stored_ms = now,
                .reput = true};
        e.waiters.push_back(std::move(w));
        EnqueueLocked(std::move(e));
      }
    }
  }
  cv_.SignalAll();
  for (Waiter& w : settled) w(Status::Ok());
  if (!etcd_failing.empty()) {
    const Status away = UnavailableError(
        "etcd is unavailable or out of space: the result is stored on this node only; retry "
        "later");
    for (Waiter& w : etcd_failing) w(away);
  }
  if (!over_budget.empty()) {
    const Status full = UnavailableError(
        "more results than the replication buffer holds (" +
        std::to_string(options_.max_buffered_bytes) +
        " bytes) wait for etcd: the result is stored on this node only; retry later");
    for (Waiter& w : over_budget) w(full);
  }
}

void Replicator::NoteOutcome(const Status& s, Call call) {
  // NOSPACE is an alarm that etcd keeps until an operator disarms it, and it takes reads and
  // deletes meanwhile: only a put that works says it is over (or the alarm list, NoteAlarm).
  const bool refused_for_space = s.code() == StatusCode::kResourceExhausted;
  const bool nospace = refused_for_space || (nospace_ && !(s.ok() && call == Call::kPut));
  const bool unavailable = !s.ok() && !refused_for_space;
  const bool was_failing = nospace_.exchange(nospace) | unavailable_.exchange(unavailable);
  const bool failing = nospace || unavailable;
  if (failing && !was_failing) {
    Log().warn(
        "replication to etcd is failing: {}; results are stored locally and replicated when it "
        "works again",
        s.ToString());
  } else if (!failing && was_failing) {
    Log().info("replication to etcd works again");
  }
}

void Replicator::NoteAlarm(bool nospace_raised) {
  if (nospace_raised || !nospace_.exchange(false)) return;
  if (!unavailable_) Log().info("etcd's NOSPACE alarm is disarmed; replication works again");
}

Status Replicator::Adopt() {
  const std::string prefix = NodeResultsPrefix(options_.etcd.key_prefix, node_id_);
  const std::string end = PrefixEnd(prefix);
  std::string from = prefix;
  uint64_t listed = 0, adopted = 0;
  while (true) {
    auto page = client_->Range(from, end, kListPage, /*keys_only=*/false);
    if (!page.ok()) return page.status();
    std::vector<v1::BattleResult> results;
    for (const KeyValue& kv : page->kvs) {
      v1::BattleResult r;
      if (!r.ParseFromString(kv.value)) {
        Log().error("etcd key {} does not hold a result; left alone", wire::ValidUtf8(kv.key));
        continue;
      }
      results.push_back(std::move(r));
    }
    listed += page->kvs.size();
    if (!results.empty()) {
      auto outcomes = outbox_.Enqueue(results);
      if (!outcomes.ok()) return outcomes.status();
      for (size_t i = 0; i < results.size(); ++i) {
        const storage::EnqueueResult& o = (*outcomes)[i];
        if (o.status.ok() && !o.already_present) ++adopted;
        if (!o.status.ok()) {
          Log().error("room={}: the copy in etcd cannot go back into the outbox: {}",
                      results[i].room_id(), o.status.ToString());
        }
      }
    }
    if (!page->more || page->kvs.empty()) break;
    from = page->kvs.back().key + '\0';
  }
  adopted_total_->Add(adopted);
  if (adopted > 0) {
    Log().warn(
        "{} result(s) found only in etcd were put back into the outbox (acked just before a "
        "crash, or lost with the disk); they are delivered again",
        adopted);
    wake_delivery_();
  } else {
    Log().info("etcd holds {} copies of this node's results; the outbox has each", listed);
  }
  return Status::Ok();
}

Status Replicator::ScanSome() {
  uint64_t covers = 0;
  {
    MutexLock lock(&mu_);
    if (!scan_) {
      if (!rescan_needed_) return Status::Ok();
      rescan_needed_ = false;
      reading_back_ = true;
      covers = not_held_;
    }
  }
  if (!scan_) {
    auto view = storage::OpenOutbox(outbox_dir_, {.read_only = true});
    if (!view.ok()) {
      MutexLock lock(&mu_);
      rescan_needed_ = true;
      reading_back_ = false;
      return view.status();
    }
    scan_ = std::make_unique<Scan>();
    scan_->view = std::move(view).value();
    scan_->covers = covers;
  }
  std::vector<storage::OutboxRecord> records;
  bool finished = false;
  if (scan_->shard < scan_->view->shard_count()) {
    auto read = scan_->view->ReadShard(scan_->shard, scan_->after, kScanChunk);
    if (!read.ok()) return read.status();
    records = std::move(read).value();
    if (records.empty()) {
      ++scan_->shard;
      scan_->after = 0;
    }
  } else {
    // Dead letters are copied too (an operator may redrive them), a page at a time like the
    // shards; a record that cannot be decoded has nothing to copy and is passed over.
    auto side = scan_->view->ListSidePage(storage::SideArea::kDeadLetter, std::nullopt,
                                          scan_->after, kScanChunk);
    if (!side.ok()) return side.status();
    finished = side->empty();
    for (storage::SideRecord& s : *side) {
      storage::OutboxRecord& r = records.emplace_back();
      r.sequence = s.sequence;
      r.enqueued_at_ms = s.enqueued_at_ms;
      if (s.decodable) r.result = std::move(s.result);
    }
  }
  MutexLock lock(&mu_);
  for (storage::OutboxRecord& r : records) {
    if (queued_bytes_ >= options_.max_buffered_bytes) break;  // this record comes next time
    scan_->after = r.sequence;
    if (r.result.room_id() == 0) continue;  // no result: an undecodable dead letter
    const v1::BattleResult& result = r.result;
    std::string key =
        ResultKey(options_.etcd.key_prefix, node_id_, result.room_id(), result.ended_at_ms());
    if (EnqueueLocked({.key = std::move(key),
                       .value = wire::DeterministicBytes(result),
                       .room_id = result.room_id(),
                       .ended_at_ms = result.ended_at_ms(),
                       .sequence = r.sequence,
                       .stored_ms = r.enqueued_at_ms}) &&
        scan_->covers > 0 && not_held_ > 0) {
      --scan_->covers;
      --not_held_;
    }
  }
  if (finished) {
    not_held_ -= std::min(scan_->covers, not_held_);
    if (not_held_ == 0) {
      not_held_since_ms_ = 0;
    } else {
      rescan_needed_ = true;  // more overflowed while it ran
    }
    scan_.reset();
    reading_back_ = false;
  }
  return Status::Ok();
}

Status Replicator::PutSome(EtcdClient& client) {
  std::vector<KeyValue> kvs;
  size_t bytes = 0;
  while (PuttableLocked() && kvs.size() < options_.max_batch) {
    Entry& e = queue_.front();
    if (!kvs.empty() && bytes + e.value.size() > options_.max_batch_bytes) break;
    bytes += e.value.size();
    queued_bytes_ -= e.value.size();
    kvs.push_back({e.key, e.value, 0});
    queued_.erase(e.key);
    const std::string key = e.key;
    in_flight_.emplace(key, std::move(e));
    queue_.pop_front();
  }
  if (kvs.empty()) return Status::Ok();  // the head waits for its key's delete
  mu_.Unlock();
  auto outcomes = client.CreateIfAbsent(kvs);
  mu_.Lock();
  if (!outcomes.ok()) {
    // Back to the head of the queue, in their order; those released meanwhile are deleted. Who
    // waits for them hears of the failure now rather than hold on until etcd is back.
    std::vector<Waiter> waiters;
    for (auto kv = kvs.rbegin(); kv != kvs.rend(); ++kv) {
      auto f = in_flight_.find(kv->key);
      if (f == in_flight_.end()) continue;
      if (f->second.released) {
        QueueDeleteLocked(kv->key);
        in_flight_.erase(f);
        continue;
      }
      std::move(f->second.waiters.begin(), f->second.waiters.end(), std::back_inserter(waiters));
      f->second.waiters.clear();
      queued_bytes_ += f->second.value.size();
      queue_.push_front(std::move(f->second));
      queued_[kv->key] = queue_.begin();
      in_flight_.erase(f);
    }
    if (!waiters.empty()) {
      mu_.Unlock();
      for (Waiter& w : waiters) w(outcomes.status());
      mu_.Lock();
    }
    return outcomes.status();
  }
  const int64_t now = clock_->NowMs();
  std::vector<ReplicatedResult> done;
  std::vector<std::pair<std::vector<Waiter>, Status>> calls;
  for (size_t i = 0; i < kvs.size(); ++i) {
    auto f = in_flight_.find(kvs[i].key);
    if (f == in_flight_.end()) continue;
    Entry e = std::move(f->second);
    in_flight_.erase(f);
    if (e.released) {  // acked meanwhile: its waiters have their answer; now the delete
      QueueDeleteLocked(e.key);
      continue;
    }
    Status s;
    if ((*outcomes)[i] == CreateOutcome::kConflict) {
      conflicts_total_->Add();
      s = AlreadyExistsError("etcd holds a different result under " + e.key);
      Log().error(
          "room={}: {}; this record is not replicated (the copy in etcd is another "
          "result for the same room and ended_at_ms)",
          e.room_id, s.message());
    } else {
      replicated_total_->Add();
      if (e.live) lag_seconds_->Observe(std::max<int64_t>(0, now - e.stored_ms) / 1000.0);
    }
    done.push_back({e.room_id, e.ended_at_ms, s});
    calls.emplace_back(std::move(e.waiters), s);
  }
  mu_.Unlock();
  cv_.SignalAll();  // deletes of keys acked meanwhile may be queued
  if (on_replicated_ && !done.empty()) on_replicated_(done);
  for (auto& [waiters, s] : calls) {
    for (Waiter& w : waiters) w(s);
  }
  mu_.Lock();
  return Status::Ok();
}

Status Replicator::DeleteSome() {
  const size_t n = std::min(deletes_.size(), options_.max_batch);
  std::vector<std::string> keys(deletes_.begin(), deletes_.begin() + n);
  mu_.Unlock();
  Status s = client_->Delete(keys);
  mu_.Lock();
  if (s.ok()) {
    for (const std::string& key : keys) {
      if (--deleting_[key] == 0) deleting_.erase(key);
    }
    deletes_.erase(deletes_.begin(), deletes_.begin() + n);  // others only append
    deleted_total_->Add(n);
    cv_.SignalAll();  // puts of those keys may go now
  }
  return s;
}

void Replicator::Run() {
  MutexLock lock(&mu_);
  while (true) {
    if (stopping_) {
      // Deletes are worth a last try (each one spares a redelivery); puts are not (the outbox
      // keeps the records and the next start puts them).
      if (deletes_.empty() || std::chrono::steady_clock::now() >= stop_deadline_) break;
      if (!DeleteSome().ok()) break;
      continue;
    }
    Status s;
    bool contacted = false;  // whether `s` says something about etcd
    if (!adopted_) {
      contacted = true;
      lock.Unlock();
      s = Adopt();
      lock.Lock();
      adopted_ = s.ok();
    } else if (!deletes_.empty()) {
      contacted = true;
      s = DeleteSome();
    } else if ((scan_ || rescan_needed_) &&
               (queue_.empty() || queued_bytes_ < options_.max_buffered_bytes / 2)) {
      // Read back while etcd is away too: the queue's bound holds it, and puts start at once
      // when etcd returns.
      lock.Unlock();
      Status read = ScanSome();
      lock.Lock();
      if (!read.ok()) Log().error("replication cannot read the outbox back: {}", read.ToString());
      s = read;
    }
    Call call = Call::kOther;
    if (s.ok() && deletes_.empty() && PuttableLocked()) {
      s = PutSome(*client_);
      contacted = true;
      call = Call::kPut;
    }
    if (contacted) NoteOutcome(s, call);
    if (!s.ok()) {
      const auto deadline = std::chrono::steady_clock::now() + options_.retry_interval;
      while (!stopping_) {
        if (cv_.WaitUntil(deadline)) break;
      }
      continue;
    }
    while (!stopping_ && adopted_ && deletes_.empty() && queue_.empty() && !scan_ &&
           !rescan_needed_) {
      if (!nospace_) {
        cv_.Wait();
        continue;
      }
      // Out of quota with nothing to put: only etcd's alarm list can say it was disarmed.
      if (!cv_.WaitUntil(std::chrono::steady_clock::now() + options_.retry_interval)) continue;
      lock.Unlock();
      auto raised = client_->NoSpaceAlarmRaised();
      lock.Lock();
      if (raised.ok()) NoteAlarm(*raised);
    }
  }
}

void Replicator::RunPuts(EtcdClient& client) {
  MutexLock lock(&mu_);
  while (true) {
    while (!stopping_ && !PuttableLocked()) cv_.Wait();
    if (stopping_) return;
    Status s = PutSome(client);
    NoteOutcome(s, Call::kPut);
    if (!s.ok()) {
      const auto deadline = std::chrono::steady_clock::now() + options_.retry_interval;
      while (!stopping_) {
        if (cv_.WaitUntil(deadline)) break;
      }
    }
  }
}

ReplicationStats Replicator::Stats() const {
  MutexLock lock(&mu_);
  ReplicationStats s;
  // Each stored record once: a record put again for an Await is in not_held_ already (or was
  // replicated before).
  s.unreplicated = not_held_;
  int64_t oldest = not_held_ > 0 ? not_held_since_ms_ : INT64_MAX;
  for (const Entry& e : queue_) {
    if (e.reput) continue;
    ++s.unreplicated;
    oldest = std::min(oldest, e.stored_ms);
  }
  for (const auto& [key, e] : in_flight_) {
    if (e.released || e.reput) continue;  // settled: nothing left to replicate
    ++s.unreplicated;
    oldest = std::min(oldest, e.stored_ms);
  }
  if (oldest != INT64_MAX)
    s.oldest_unreplicated_age_s = std::max<int64_t>(0, clock_->NowMs() - oldest) / 1000.0;
  s.etcd_unavailable = unavailable_;
  s.etcd_nospace = nospace_;
  s.reading_back = reading_back_ || rescan_needed_;
  return s;
}

void Replicator::ExportMetrics(metrics::Registry& registry) {
  replicated_total_ =
      &registry.AddCounter("verdict_node_replication_replicated_total",
                           "Results whose copy was written to etcd (or found there already).");
  deleted_total_ = &registry.AddCounter("verdict_node_replication_deleted_total",
                                        "Copies deleted from etcd after the lobby's receipt.");
  conflicts_total_ = &registry.AddCounter(
      "verdict_node_replication_conflicts_total",
      "Results not replicated because etcd holds a different result under their key.");
  adopted_total_ = &registry.AddCounter(
      "verdict_node_replication_adopted_total",
      "Copies found in etcd at start that the outbox no longer held, enqueued again.");
  lag_seconds_ = &registry.AddHistogram("verdict_node_replication_lag_seconds",
                                        "From stored to replicated, per result.");
  auto stat = [this](auto field) { return [this, field] { return field(Stats()); }; };
  registry.AddGauge("verdict_node_replication_unreplicated_records",
                    "Results stored on this node and not yet replicated to etcd.",
                    stat([](const ReplicationStats& s) { return double(s.unreplicated); }));
  registry.AddGauge("verdict_node_replication_oldest_unreplicated_age_seconds",
                    "Age of the oldest result not yet replicated; 0 when none.",
                    stat([](const ReplicationStats& s) { return s.oldest_unreplicated_age_s; }));
  registry.AddGauge(
      "verdict_node_replication_etcd_unavailable",
      "1 while etcd cannot be reached or cannot act (alert: results are stored on this host only).",
      stat([](const ReplicationStats& s) { return s.etcd_unavailable ? 1.0 : 0.0; }));
  registry.AddGauge(
      "verdict_node_replication_etcd_nospace",
      "1 while etcd refuses writes for lack of space (NOSPACE alarm; alert: an operator must "
      "compact, defragment and disarm).",
      stat([](const ReplicationStats& s) { return s.etcd_nospace ? 1.0 : 0.0; }));
}

}  // namespace verdict::replication
