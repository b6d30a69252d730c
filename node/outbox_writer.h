// OutboxWriter: moves results from the ResultChannel into the outbox with explicit group
// commit, in two stages so the fsync of some batches overlaps the work on the next:
//   the writer thread takes what the channel holds (up to a batch) and writes it unsynced
//   (Outbox::EnqueueBuffered: lookups, sequences, encoding, the log's buffer and the
//   memtables), in channel order, so sequences follow the order results were pushed;
//   the sync thread writes the log's buffer to disk and fsyncs it (Outbox::SyncEnqueued),
//   which makes every batch written before the sync began durable, and only then reports them
//   stored.
// A busy host pays one fsync per group of batches, not per result, and the CPU prepares the
// next batch while the disk syncs the last. When the outbox cannot prepare or write (disk
// full, I/O error) the failing stage keeps its batches and retries every retry_interval, and
// neither takes more: the channel fills and rooms finishing wait (P6).
// Start/Stop from one thread.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "common/metrics.h"
#include "common/mutex.h"
#include "node/options.h"
#include "node/result_channel.h"
#include "storage/outbox.h"

namespace verdict::node {

class OutboxWriter {
 public:
  // `channel` and `outbox` must outlive the writer. `on_stored` is called on the sync thread with
  // each batch, in write order, once the sync after its write succeeded (the node wakes its
  // deliverers there; the benchmark measures enqueue latency); see StoredCallback. stored()
  // counts only the newly durable results. `registry` may be null.
  OutboxWriter(ResultChannel& channel, storage::Outbox& outbox, OutboxWriterOptions options,
               StoredCallback on_stored, metrics::Registry* registry);
  ~OutboxWriter();
  OutboxWriter(const OutboxWriter&) = delete;
  OutboxWriter& operator=(const OutboxWriter&) = delete;

  void Start();
  // Closes the channel, stores everything still in it, and joins. Returns how many results
  // could not be stored durably before the shutdown deadline (0 unless the outbox kept failing).
  // Stop() gives up at now + shutdown_deadline, the other at `deadline`.
  size_t Stop();
  size_t Stop(std::chrono::steady_clock::time_point deadline);

  uint64_t stored() const { return stored_.load(); }
  // True while the last write or sync failed and the writer is waiting to retry.
  bool stalled() const { return write_failing_.load() || sync_failing_.load(); }

 private:
  struct Batch {
    std::vector<v1::BattleResult> results;
    std::vector<ResultChannel::Completion> done;   // one per result; empty for a pushed one
    std::vector<storage::EnqueueResult> outcomes;  // the outbox's answers, once written
  };

  void RunWriter();
  void RunSyncer();
  // Prepares one batch and fills its outcomes, retrying while the outbox fails; false if it gave
  // up (shutdown deadline).
  bool WriteBatch(Batch& batch);
  // Reports a synced batch: counts, the callback, the completions.
  void Report(const Batch& batch);
  // Writes what was prepared, retrying while the outbox fails; false if it gave up (shutdown
  // deadline).
  bool Sync();
  // Logs a failure once per stall and decides: true to retry after retry_interval, false to
  // give up (past the shutdown deadline).
  // `failing` is the flag of the stage that failed (write or sync); each stage clears its own on
  // success, so a succeeding write does not hide a failing sync.
  bool RetryAfterFailure(const Status& status, bool* logged, std::atomic<bool>* failing,
                         const char* what, size_t results);
  void Abandon(const Batch& batch, const char* why);

  ResultChannel& channel_;
  storage::Outbox& outbox_;
  const OutboxWriterOptions options_;
  StoredCallback on_stored_;
  metrics::Registry fallback_registry_;
  metrics::Counter& stored_counter_;
  metrics::Counter& failures_counter_;
  metrics::Histogram& sync_seconds_;
  std::atomic<uint64_t> stored_{0};
  std::atomic<bool> write_failing_{false};
  std::atomic<bool> sync_failing_{false};
  std::atomic<bool> stopping_{false};
  std::chrono::steady_clock::time_point stop_deadline_;
  std::atomic<size_t> abandoned_{0};

  // Batches prepared and waiting for the sync thread, in order.
  Mutex mu_;
  CondVar written_cv_{&mu_};  // a batch was added, or the writer finished
  CondVar synced_cv_{&mu_};   // unsynced_ shrank
  std::deque<Batch> unsynced_ GUARDED_BY(mu_);
  bool writer_done_ GUARDED_BY(mu_) = false;

  std::thread writer_thread_;
  std::thread sync_thread_;
};

}  // namespace verdict::node
