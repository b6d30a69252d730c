// OutboxWriter: the one thread that moves results from the ResultChannel into the outbox. It
// takes what the channel holds (up to a batch) and stores it with one synced write — explicit
// group commit, so a busy host pays one fsync per batch, not per result. When the outbox cannot
// write (disk full, I/O error) it keeps the batch, retries every retry_interval and stops
// draining, so the channel fills and rooms finishing wait (P6). Start/Stop from one thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "common/metrics.h"
#include "node/result_channel.h"
#include "storage/outbox.h"

namespace verdict::node {

struct OutboxWriterOptions {
  // Most results stored by one synced write. Default: 256.
  size_t max_batch = 256;
  // Wait between attempts while the outbox fails. Default: 1 s.
  std::chrono::milliseconds retry_interval{1000};
  // How long Stop keeps retrying a failing outbox before giving up on what is left (logged as
  // an error with every room id). Default: 30 s.
  std::chrono::milliseconds shutdown_deadline{30'000};
  // Test-only negative control: drops a batch whose write failed instead of holding it (P6
  // off). Default: false. Never set it outside tests.
  bool unsafe_drop_failed_batches_for_test = false;
};

class OutboxWriter {
 public:
  // Called on the writer thread with each batch once it is durable (the node wakes its
  // deliverers there; the benchmark measures enqueue latency).
  using StoredCallback = std::function<void(const std::vector<v1::BattleResult>&)>;

  // `channel` and `outbox` must outlive the writer. `registry` may be null.
  OutboxWriter(ResultChannel& channel, storage::Outbox& outbox, OutboxWriterOptions options,
               StoredCallback on_stored, metrics::Registry* registry);
  ~OutboxWriter();
  OutboxWriter(const OutboxWriter&) = delete;
  OutboxWriter& operator=(const OutboxWriter&) = delete;

  void Start();
  // Closes the channel, stores everything still in it, and joins. Returns how many results
  // could not be stored before the shutdown deadline (0 unless the outbox kept failing).
  size_t Stop();

  uint64_t stored() const { return stored_.load(); }
  // True while the last write failed and the writer is waiting to retry.
  bool stalled() const { return stalled_.load(); }

 private:
  void Run();
  // Stores one batch, retrying while the outbox fails; false if it gave up (shutdown deadline).
  bool StoreBatch(const std::vector<v1::BattleResult>& batch);

  ResultChannel& channel_;
  storage::Outbox& outbox_;
  const OutboxWriterOptions options_;
  StoredCallback on_stored_;
  metrics::Registry fallback_registry_;
  metrics::Counter& stored_counter_;
  metrics::Counter& failures_counter_;
  metrics::Histogram& batch_seconds_;
  std::atomic<uint64_t> stored_{0};
  std::atomic<bool> stalled_{false};
  std::atomic<bool> stopping_{false};
  std::chrono::steady_clock::time_point stop_deadline_;
  size_t abandoned_ = 0;
  std::thread thread_;
};

}  // namespace verdict::node
