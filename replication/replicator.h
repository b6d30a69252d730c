// Replicator: a node's replicated tier. After the outbox's fsync ("stored"), it copies each
// record to etcd under its key (replication/keys.h) with create-if-absent transactions of up to
// max_batch records ("replicated": Raft has fsynced it on a majority of the cluster); after the
// lobby's receipt has removed a record from the outbox (Released), it deletes the copy, in
// batches. It never holds back the outbox: while etcd is away or out of quota it counts what is
// unreplicated, raises its alert gauges, and catches up when etcd takes writes again; stored
// records beyond max_buffered_bytes are not kept in memory but read back from the outbox then.
//
// At start it rebuilds the replicated state: every record the outbox holds is put again
// (create-if-absent, so what etcd already has costs a read), and every copy of this node that
// etcd holds is enqueued into the outbox again (an identical record already there is a no-op): a
// copy whose record was acked just before a crash is delivered once more and answered
// `duplicate`, and a copy whose record died with a replaced disk is delivered for the first
// time. Nothing is deleted from etcd without the lobby's receipt for it.
//
// Owned by BattleNode. Stored, Released and Await may be called from any thread; Start and Stop
// from one. Callbacks run on the replicator's thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "common/status.h"
#include "replication/options.h"
#include "storage/outbox.h"

namespace verdict::replication {

class EtcdClient;

struct ReplicationStats {
  uint64_t unreplicated = 0;             // stored, not yet in etcd
  double oldest_unreplicated_age_s = 0;  // 0 when none
  bool etcd_unavailable = false;         // the last call found no endpoint able to act
  // etcd is out of its quota (NOSPACE alarm): from a put it refused until one it took, or until
  // its alarm list no longer has the alarm.
  bool etcd_nospace = false;
  // Records not held in memory are being read back from the outbox, or wait to be.
  bool reading_back = false;
};

class Replicator {
 public:
  using ReplicatedCallback = std::function<void(const std::vector<ReplicatedResult>&)>;

  // `outbox` is the node's, opened in `outbox_dir` (the rebuild reads a read-only view of the
  // directory, so it never competes with the deliverers for a shard); it must outlive the
  // replicator. `wake_delivery` is called after records were enqueued from etcd. `registry` may
  // be null.
  Replicator(storage::Outbox& outbox, std::string outbox_dir, std::string node_id,
             ReplicationOptions options, const Clock* clock, ReplicatedCallback on_replicated,
             std::function<void()> wake_delivery, metrics::Registry* registry);
  ~Replicator();  // stops
  Replicator(const Replicator&) = delete;
  Replicator& operator=(const Replicator&) = delete;

  // Checks the options (INVALID_ARGUMENT) and starts the thread; etcd need not be up.
  Status Start();
  // Stops: deletes still queued are tried until `deadline`, puts are abandoned (the outbox keeps
  // the records, and the next start puts them).
  void Stop(std::chrono::steady_clock::time_point deadline);

  // The outbox's writer stored these (OutboxWriter's callback): copy the ones stored OK.
  void Stored(const std::vector<v1::BattleResult>& batch,
              const std::vector<storage::EnqueueResult>& outcomes);
  // The record left the outbox with the lobby's receipt: delete its copy.
  void Released(const storage::OutboxRecord& record);
  // Calls `done` once each of `results` (stored already) is replicated, with one status each:
  // for ?durability=replicated. A result not known here is put again (create-if-absent). Nothing
  // is held for a result while etcd fails, nor beyond max_buffered_bytes: it is answered
  // UNAVAILABLE at once (stored, not replicated yet: retry later), and so are the waits of a put
  // that failed. An outage holds no more than the buffer, however many posts wait on it.
  void Await(const std::vector<v1::BattleResult>& results,
             std::function<void(std::vector<Status>)> done);

  ReplicationStats Stats() const;

 private:
  using Waiter = std::function<void(const Status&)>;
  struct Entry {
    std::string key;
    std::string value;
    uint64_t room_id = 0;
    int64_t ended_at_ms = 0;
    // The outbox record it copies (0 when not known: a result awaited that was not held). One
    // key may name a record acked long ago and a new one stored under it since.
    uint64_t sequence = 0;
    int64_t stored_ms = 0;  // wall time it was stored (or enqueued, for a record read back)
    bool live = false;      // came from Stored: its replication lag is measured
    // Put again for an Await of a record not held here: one counted in not_held_ already, or
    // one replicated already. Not counted as unreplicated by itself.
    bool reput = false;
    bool released = false;  // acked while its put was in flight: delete it once the put is back
    std::vector<Waiter> waiters = {};
  };
  struct Scan;

  void Run();
  // Enqueues into the outbox every copy of this node that etcd holds (see the file comment).
  Status Adopt();
  // Moves up to a chunk of records from the rebuild's read-only view into the queue.
  Status ScanSome();
  // Puts a batch from the head of the queue through `client`; lets go of mu_ meanwhile.
  Status PutSome(EtcdClient& client) REQUIRES(mu_);
  // The extra put threads (max_in_flight - 1): PutSome whenever there is something to put.
  void RunPuts(EtcdClient& client);
  Status DeleteSome() REQUIRES(mu_);
  // What an etcd call came to, for the alert gauges; a put's success alone ends NOSPACE.
  enum class Call { kPut, kOther };
  void NoteOutcome(const Status& s, Call call);
  // What etcd's alarm list says while NOSPACE is up and nothing waits to be put.
  void NoteAlarm(bool nospace_raised);
  // Adds an entry to the queue unless its key is queued or in flight, or its record was
  // released; false if it was not added.
  bool EnqueueLocked(Entry entry) REQUIRES(mu_);
  bool KnownLocked(const std::string& key, uint64_t sequence) const REQUIRES(mu_);
  // Whether record `sequence` (0: any) under `key` was released lately.
  bool ReleasedLocked(const std::string& key, uint64_t sequence) const REQUIRES(mu_);
  // A delete of `key`'s copy, to go before any later put of the key.
  void QueueDeleteLocked(std::string key) REQUIRES(mu_);
  // The head of the queue may be put now: its key has no delete still to go.
  bool PuttableLocked() const REQUIRES(mu_);
  void ExportMetrics(metrics::Registry& registry);

  storage::Outbox& outbox_;
  const std::string outbox_dir_;
  const std::string node_id_;
  const ReplicationOptions options_;
  const Clock* clock_;
  ReplicatedCallback on_replicated_;
  std::function<void()> wake_delivery_;
  std::unique_ptr<EtcdClient> client_;                    // the main thread's
  std::vector<std::unique_ptr<EtcdClient>> put_clients_;  // one per extra put thread

  mutable Mutex mu_;
  CondVar cv_{&mu_};
  std::list<Entry> queue_ GUARDED_BY(mu_);  // to put, oldest first
  std::unordered_map<std::string, std::list<Entry>::iterator> queued_ GUARDED_BY(mu_);  // by key
  std::unordered_map<std::string, Entry> in_flight_ GUARDED_BY(mu_);  // being put now
  size_t queued_bytes_ GUARDED_BY(mu_) = 0;
  // Stored records not held in memory (beyond max_buffered_bytes, or stored before the start):
  // how many, the wall time of the oldest, and whether a rebuild must read them back.
  uint64_t not_held_ GUARDED_BY(mu_) = 0;
  int64_t not_held_since_ms_ GUARDED_BY(mu_) = 0;
  bool rescan_needed_ GUARDED_BY(mu_) = true;
  bool reading_back_ GUARDED_BY(mu_) = false;  // scan_ is set (for Stats, which cannot read it)
  // The rebuild in progress: the main thread's; it sets and reads it without mu_, and resets it
  // (and the waits read it) with mu_ held.
  std::unique_ptr<Scan> scan_;
  std::vector<std::string> deletes_ GUARDED_BY(mu_);               // keys whose records were acked
  std::unordered_map<std::string, int> deleting_ GUARDED_BY(mu_);  // deletes_ by key
  // Keys released lately, with the record released, so that a put racing with the ack does not
  // bring a copy back (and a new record stored under the key since is told apart).
  std::unordered_map<std::string, uint64_t> released_ GUARDED_BY(mu_);
  std::deque<std::string> released_order_ GUARDED_BY(mu_);
  bool adopted_ GUARDED_BY(mu_) = false;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::chrono::steady_clock::time_point stop_deadline_ GUARDED_BY(mu_);
  std::atomic<bool> unavailable_{false};
  std::atomic<bool> nospace_{false};

  metrics::Registry fallback_registry_;
  metrics::Counter* replicated_total_ = nullptr;
  metrics::Counter* deleted_total_ = nullptr;
  metrics::Counter* conflicts_total_ = nullptr;
  metrics::Counter* adopted_total_ = nullptr;
  metrics::Histogram* lag_seconds_ = nullptr;
  std::thread thread_;
  std::vector<std::thread> put_threads_;
};

}  // namespace verdict::replication
