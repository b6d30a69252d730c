#include "node/outbox_writer.h"

#include <spdlog/spdlog.h>

#include "common/failpoint.h"
#include "common/log.h"

namespace verdict::node {

OutboxWriter::OutboxWriter(ResultChannel& channel, storage::Outbox& outbox,
                           OutboxWriterOptions options, StoredCallback on_stored,
                           metrics::Registry* registry)
    : channel_(channel),
      outbox_(outbox),
      options_(options),
      on_stored_(std::move(on_stored)),
      stored_counter_((registry ? *registry : fallback_registry_)
                          .AddCounter("verdict_node_results_stored_total",
                                      "Results newly durable in the outbox (repeats of a stored "
                                      "result and refused ones, such as oversize or a different "
                                      "record of the same room, are not counted).")),
      failures_counter_(
          (registry ? *registry : fallback_registry_)
              .AddCounter("verdict_node_outbox_write_failures_total",
                          "Outbox writes and syncs that failed and will be retried.")),
      sync_seconds_((registry ? *registry : fallback_registry_)
                        .AddHistogram("verdict_node_outbox_write_seconds",
                                      "Duration of one outbox log sync, which makes every "
                                      "batch written before it durable.")) {}

OutboxWriter::~OutboxWriter() { Stop(); }

void OutboxWriter::Start() {
  writer_thread_ = std::thread([this] { RunWriter(); });
  sync_thread_ = std::thread([this] { RunSyncer(); });
}

size_t OutboxWriter::Stop() {
  return Stop(std::chrono::steady_clock::now() + options_.shutdown_deadline);
}

size_t OutboxWriter::Stop(std::chrono::steady_clock::time_point deadline) {
  if (!writer_thread_.joinable()) return abandoned_;
  stop_deadline_ = deadline;
  stopping_ = true;
  channel_.Close();
  writer_thread_.join();
  sync_thread_.join();
  return abandoned_;
}

void OutboxWriter::RunWriter() {
  for (;;) {
    Batch batch;
    batch.results =
        channel_.PopBatch(options_.max_batch, std::chrono::milliseconds(200), &batch.done);
    if (batch.results.empty()) {
      if (channel_.closed() && channel_.size() == 0) break;
      continue;
    }
    if (!WriteBatch(batch)) {
      Abandon(batch, "could not be written");
      continue;
    }
    {
      MutexLock lock(&mu_);
      // Bounded: a sync that keeps failing stops the writer, and so the channel (P6).
      while (unsynced_.size() >= options_.max_unsynced_batches) synced_cv_.Wait();
      unsynced_.push_back(std::move(batch));
    }
    written_cv_.Signal();
  }
  {
    MutexLock lock(&mu_);
    writer_done_ = true;
  }
  written_cv_.Signal();
}

void OutboxWriter::RunSyncer() {
  for (;;) {
    std::deque<Batch> group;
    {
      MutexLock lock(&mu_);
      while (unsynced_.empty() && !writer_done_) written_cv_.Wait();
      if (unsynced_.empty()) return;  // the writer is done and everything is synced
      // Everything written so far: one fsync makes all of it durable.
      group.swap(unsynced_);
    }
    synced_cv_.Signal();
    if (!Sync()) {
      for (const Batch& batch : group) Abandon(batch, "could not be synced");
      continue;
    }
    CheckFailpoint("writer.after_sync");
    for (const Batch& batch : group) Report(batch);
  }
}

void OutboxWriter::Report(const Batch& batch) {
  size_t durable = 0;  // newly
  for (const storage::EnqueueResult& r : batch.outcomes) {
    durable += r.status.ok() && !r.already_present;
  }
  stored_ += durable;
  stored_counter_.Add(durable);
  if (on_stored_) on_stored_(batch.results, batch.outcomes);
  for (size_t i = 0; i < batch.done.size(); ++i) {
    if (batch.done[i]) batch.done[i](batch.outcomes[i]);
  }
  channel_.MarkDone(batch.results.size());
}

bool OutboxWriter::WriteBatch(Batch& batch) {
  for (bool logged = false;;) {
    Result<std::vector<storage::EnqueueResult>> out =
        CheckFailpoint("writer.before_sync") == FailAction::kError
            ? Result<std::vector<storage::EnqueueResult>>(UnavailableError("failpoint"))
            : outbox_.EnqueueBuffered(batch.results);
    if (out.ok()) {
      for (size_t i = 0; i < batch.results.size(); ++i) {
        const Status& s = (*out)[i].status;
        if (!s.ok()) {
          Log().error("room={}: result refused by the outbox: {}", batch.results[i].room_id(),
                      s.ToString());
        }
      }
      batch.outcomes = std::move(out).value();
      if (write_failing_.exchange(false)) Log().info("outbox writes succeed again");
      return true;
    }
    if (options_.unsafe_drop_failed_batches_for_test) {
      failures_counter_.Add();
      Log().warn(
          "outbox write of {} results failed: {}; UNSAFE: reporting the results stored "
          "anyway",
          batch.results.size(), out.status().ToString());
      batch.outcomes.assign(batch.results.size(), storage::EnqueueResult{});
      return true;
    }
    if (!RetryAfterFailure(out.status(), &logged, &write_failing_, "write", batch.results.size())) {
      return false;
    }
  }
}

bool OutboxWriter::Sync() {
  for (bool logged = false;;) {
    const auto started = std::chrono::steady_clock::now();
    Status s = outbox_.SyncEnqueued();
    if (s.ok()) {
      sync_seconds_.Observe(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
      if (sync_failing_.exchange(false)) Log().info("outbox syncs succeed again");
      return true;
    }
    if (options_.unsafe_drop_failed_batches_for_test) {
      failures_counter_.Add();
      Log().warn("outbox sync failed: {}; UNSAFE: reporting the results stored anyway",
                 s.ToString());
      return true;
    }
    if (!RetryAfterFailure(s, &logged, &sync_failing_, "sync", 0)) return false;
  }
}

bool OutboxWriter::RetryAfterFailure(const Status& status, bool* logged, std::atomic<bool>* failing,
                                     const char* what, size_t results) {
  *failing = true;
  failures_counter_.Add();
  if (!*logged) {
    Log().warn("outbox {}{} failed: {}; holding the results and retrying every {} ms", what,
               results ? " of " + std::to_string(results) + " results" : std::string(),
               status.ToString(), options_.retry_interval.count());
    *logged = true;
  }
  if (stopping_ && std::chrono::steady_clock::now() > stop_deadline_) return false;
  std::this_thread::sleep_for(options_.retry_interval);
  return true;
}

void OutboxWriter::Abandon(const Batch& batch, const char* why) {
  abandoned_ += batch.results.size();
  // Shutting down past the deadline with a broken outbox: say exactly what is lost.
  for (const auto& r : batch.results) {
    Log().error("room={}: result {} before shutdown; it is lost", r.room_id(), why);
  }
  const storage::EnqueueResult given_up{
      UnavailableError(std::string("the node is shutting down and the result ") + why)};
  for (const auto& done : batch.done) {
    if (done) done(given_up);
  }
  channel_.MarkDone(batch.results.size());
}

}  // namespace verdict::node
