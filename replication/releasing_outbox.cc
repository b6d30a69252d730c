#include "replication/releasing_outbox.h"

namespace verdict::replication {
namespace {

class ReleasingOutbox final : public storage::Outbox {
 public:
  ReleasingOutbox(std::unique_ptr<storage::Outbox> inner, AckObserver on_ack)
      : inner_(std::move(inner)), on_ack_(std::move(on_ack)) {}

  uint32_t shard_count() const override { return inner_->shard_count(); }
  Result<std::vector<storage::EnqueueResult>> EnqueueBuffered(
      std::span<const v1::BattleResult> batch) override {
    return inner_->EnqueueBuffered(batch);
  }
  Status SyncEnqueued() override { return inner_->SyncEnqueued(); }
  Result<std::vector<storage::OutboxRecord>> ReadShard(uint32_t shard, uint64_t after_sequence,
                                                       size_t max_records) override {
    return inner_->ReadShard(shard, after_sequence, max_records);
  }
  Status AckAll(std::span<const storage::OutboxRecord> records) override {
    Status s = inner_->AckAll(records);
    if (s.ok()) {
      for (const storage::OutboxRecord& record : records) on_ack_(record);
    }
    return s;
  }
  Status DeadLetter(const storage::OutboxRecord& record, const std::string& code,
                    const std::string& message) override {
    return inner_->DeadLetter(record, code, message);
  }
  Result<std::vector<storage::SideRecord>> ListSidePage(storage::SideArea area,
                                                        std::optional<uint64_t> room_id,
                                                        uint64_t after_sequence,
                                                        size_t max_records) override {
    return inner_->ListSidePage(area, room_id, after_sequence, max_records);
  }
  Result<storage::RedriveReport> Redrive(storage::SideArea from,
                                         std::optional<uint64_t> room_id) override {
    return inner_->Redrive(from, room_id);
  }
  Result<storage::OutboxStats> Stats() override { return inner_->Stats(); }

 private:
  std::unique_ptr<storage::Outbox> inner_;
  AckObserver on_ack_;
};

}  // namespace

std::unique_ptr<storage::Outbox> ReleaseOnAck(std::unique_ptr<storage::Outbox> outbox,
                                              AckObserver on_ack) {
  return std::make_unique<ReleasingOutbox>(std::move(outbox), std::move(on_ack));
}

}  // namespace verdict::replication
