// FailingOutbox: wraps a real outbox and, while switched on, fails every enqueue the way a full
// disk does (RESOURCE_EXHAUSTED, nothing stored), or every ack likewise (nothing removed), or
// every sync the way a failing fsync does; or holds every enqueue (and redrive) until released (a
// writer caught mid-batch), or answers redrives as over a damaged side area, or every shard read
// after it has read (a read still in flight); or throws from shard reads (a bug that ends a
// delivery loop); or answers Stats with figures the test pinned. It counts shard reads and Stats
// calls, so a test can wait until a loop has looked again. Everything else goes straight through.
// The test seam for backpressure (P6), drain, loop restarts and the node's derived gauges.
// Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>

#include "storage/outbox.h"

namespace verdict::testing {

class FailingOutbox final : public storage::Outbox {
 public:
  explicit FailingOutbox(std::unique_ptr<storage::Outbox> inner) : inner_(std::move(inner)) {}

  void set_fail_writes(bool fail) { fail_writes_ = fail; }
  int failed_writes() const { return failed_writes_.load(); }
  // While on, every AckAll fails as on a full disk: the records stay.
  void set_fail_acks(bool fail) { fail_acks_ = fail; }
  int failed_acks() const { return failed_acks_.load(); }
  // While on, writes succeed (records become visible) but syncing them fails.
  void set_fail_syncs(bool fail) { fail_syncs_ = fail; }
  int failed_syncs() const { return failed_syncs_.load(); }
  // While on, each enqueue waits (its batch in hand) until switched off; held_writes() counts
  // the enqueues that began waiting.
  void set_hold_writes(bool hold) {
    {
      std::lock_guard lock(hold_mu_);
      hold_writes_ = hold;
    }
    released_.notify_all();
  }
  int held_writes() const { return held_writes_.load(); }
  // While on, Redrive answers DATA_LOSS, as over a damaged side area.
  void set_damaged_side_areas(bool on) { damaged_side_areas_ = on; }
  // While on, ReadShard throws.
  void set_throw_on_reads(bool on) { throw_on_reads_ = on; }
  // While on, each shard read reads first and then waits, its page in hand, until switched off
  // (a read still on the disk thread when new records arrive); held_reads() counts them.
  void set_hold_reads(bool hold) {
    {
      std::lock_guard lock(hold_mu_);
      hold_reads_ = hold;
    }
    released_.notify_all();
  }
  int held_reads() const { return held_reads_.load(); }
  // Shard reads of `shard` begun so far.
  int reads_of(uint32_t shard) const {
    std::lock_guard lock(hold_mu_);
    auto it = reads_.find(shard);
    return it == reads_.end() ? 0 : it->second;
  }
  // While set, Stats answers `stats` instead of the outbox's own figures.
  void set_stats(std::optional<storage::OutboxStats> stats) {
    std::lock_guard lock(hold_mu_);
    pinned_stats_ = std::move(stats);
  }
  // Stats calls begun so far.
  int stats_calls() const { return stats_calls_.load(); }

  uint32_t shard_count() const override { return inner_->shard_count(); }
  Result<std::vector<storage::EnqueueResult>> EnqueueBuffered(
      std::span<const v1::BattleResult> batch) override {
    VERDICT_RETURN_IF_ERROR(BeforeWrite());
    return inner_->EnqueueBuffered(batch);
  }
  Status SyncEnqueued() override {
    if (fail_syncs_) {
      ++failed_syncs_;
      return UnavailableError("simulated: fsync failed");
    }
    return inner_->SyncEnqueued();
  }
  Result<std::vector<storage::OutboxRecord>> ReadShard(uint32_t shard, uint64_t after,
                                                       size_t max) override {
    {
      std::lock_guard lock(hold_mu_);
      ++reads_[shard];
    }
    if (throw_on_reads_) throw std::runtime_error("simulated: a bug in the read path");
    auto page = inner_->ReadShard(shard, after, max);
    std::unique_lock lock(hold_mu_);
    if (hold_reads_) {
      ++held_reads_;
      released_.wait(lock, [&] { return !hold_reads_; });
    }
    return page;
  }
  Status AckAll(std::span<const storage::OutboxRecord> r) override {
    if (fail_acks_) {
      ++failed_acks_;
      return ResourceExhaustedError("simulated: no space left on device");
    }
    return inner_->AckAll(r);
  }
  Status DeadLetter(const storage::OutboxRecord& r, const std::string& code,
                    const std::string& message) override {
    return inner_->DeadLetter(r, code, message);
  }
  Result<std::vector<storage::SideRecord>> ListSidePage(storage::SideArea area,
                                                        std::optional<uint64_t> room,
                                                        uint64_t after, size_t max) override {
    return inner_->ListSidePage(area, room, after, max);
  }
  // A redrive writes as an enqueue does: held and failed by the same switches.
  Result<storage::RedriveReport> Redrive(storage::SideArea from,
                                         std::optional<uint64_t> room) override {
    VERDICT_RETURN_IF_ERROR(BeforeWrite());
    if (damaged_side_areas_) return DataLossError("simulated: dead letter is damaged");
    return inner_->Redrive(from, room);
  }
  Result<storage::OutboxStats> Stats() override {
    ++stats_calls_;
    {
      std::lock_guard lock(hold_mu_);
      if (pinned_stats_) return *pinned_stats_;
    }
    return inner_->Stats();
  }

 private:
  // What the switches do to a write (an enqueue or a redrive) before it reaches the outbox: held
  // while hold_writes_, then refused as a full disk would while fail_writes_.
  Status BeforeWrite() {
    {
      std::unique_lock lock(hold_mu_);
      if (hold_writes_) {
        ++held_writes_;
        released_.wait(lock, [&] { return !hold_writes_; });
      }
    }
    if (fail_writes_) {
      ++failed_writes_;
      return ResourceExhaustedError("simulated: no space left on device");
    }
    return Status::Ok();
  }

  std::unique_ptr<storage::Outbox> inner_;
  std::atomic<bool> fail_writes_{false};
  std::atomic<bool> damaged_side_areas_{false};
  std::atomic<int> failed_writes_{0};
  std::atomic<bool> fail_acks_{false};
  std::atomic<int> failed_acks_{0};
  std::atomic<bool> fail_syncs_{false};
  std::atomic<int> failed_syncs_{0};
  mutable std::mutex hold_mu_;
  std::condition_variable released_;
  bool hold_writes_ = false;  // guarded by hold_mu_
  std::atomic<int> held_writes_{0};
  bool hold_reads_ = false;  // guarded by hold_mu_
  std::atomic<int> held_reads_{0};
  std::atomic<bool> throw_on_reads_{false};
  std::map<uint32_t, int> reads_;                     // guarded by hold_mu_
  std::optional<storage::OutboxStats> pinned_stats_;  // guarded by hold_mu_
  std::atomic<int> stats_calls_{0};
};

}  // namespace verdict::testing
