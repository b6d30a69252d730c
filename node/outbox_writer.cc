#include "node/outbox_writer.h"

#include <spdlog/spdlog.h>

#include "common/failpoint.h"

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
                                      "Results made durable in the outbox.")),
      failures_counter_((registry ? *registry : fallback_registry_)
                            .AddCounter("verdict_node_outbox_write_failures_total",
                                        "Outbox writes that failed and will be retried.")),
      batch_seconds_((registry ? *registry : fallback_registry_)
                         .AddHistogram("verdict_node_outbox_write_seconds",
                                       "Duration of one synced outbox write (one batch).")) {}

OutboxWriter::~OutboxWriter() { Stop(); }

void OutboxWriter::Start() {
  thread_ = std::thread([this] { Run(); });
}

size_t OutboxWriter::Stop() {
  if (!thread_.joinable()) return abandoned_;
  stop_deadline_ = std::chrono::steady_clock::now() + options_.shutdown_deadline;
  stopping_ = true;
  channel_.Close();
  thread_.join();
  return abandoned_;
}

void OutboxWriter::Run() {
  for (;;) {
    std::vector<v1::BattleResult> batch =
        channel_.PopBatch(options_.max_batch, std::chrono::milliseconds(200));
    if (batch.empty()) {
      if (channel_.closed() && channel_.size() == 0) return;
      continue;
    }
    if (!StoreBatch(batch)) {
      abandoned_ += batch.size();
      // Shutting down past the deadline with a broken outbox: say exactly what is lost.
      for (const auto& r : batch) {
        spdlog::error("room={}: result could not be stored before shutdown; it is lost",
                      r.room_id());
      }
    }
  }
}

bool OutboxWriter::StoreBatch(const std::vector<v1::BattleResult>& batch) {
  for (bool logged = false;; logged = true) {
    const auto started = std::chrono::steady_clock::now();
    Result<std::vector<storage::EnqueueResult>> out =
        CheckFailpoint("writer.before_sync") == FailAction::kError
            ? Result<std::vector<storage::EnqueueResult>>(UnavailableError("failpoint"))
            : outbox_.Enqueue(batch);
    if (out.ok()) {
      CheckFailpoint("writer.after_sync");
      batch_seconds_.Observe(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
      for (size_t i = 0; i < batch.size(); ++i) {
        const Status& s = (*out)[i].status;
        if (!s.ok()) {
          spdlog::error("room={}: result refused by the outbox: {}", batch[i].room_id(),
                        s.ToString());
        }
      }
      stored_ += batch.size();
      stored_counter_.Add(batch.size());
      if (stalled_.exchange(false)) spdlog::info("outbox writes succeed again");
      if (on_stored_) on_stored_(batch);
      return true;
    }
    stalled_ = true;
    failures_counter_.Add();
    if (!logged) {
      spdlog::warn("outbox write of {} results failed: {}; holding them and retrying every {} ms",
                   batch.size(), out.status().ToString(), options_.retry_interval.count());
    }
    if (options_.unsafe_drop_failed_batches_for_test) return true;
    if (stopping_ && std::chrono::steady_clock::now() > stop_deadline_) return false;
    std::this_thread::sleep_for(options_.retry_interval);
  }
}

}  // namespace verdict::node
