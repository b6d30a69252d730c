#include "node/result_channel.h"

namespace verdict::node {

ResultChannel::ResultChannel(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

Status ResultChannel::Push(v1::BattleResult result) {
  std::unique_lock lock(mu_);
  ++waiting_;
  not_full_.wait(lock, [&] { return closed_ || queue_.size() < capacity_; });
  if (closed_) {
    --waiting_;
    ++refused_;
    producers_gone_.notify_all();
    return FailedPreconditionError("the node is shutting down; result for room " +
                                   std::to_string(result.room_id()) + " was not taken");
  }
  queue_.push_back({std::move(result), nullptr});
  --waiting_;
  lock.unlock();
  producers_gone_.notify_all();
  not_empty_.notify_one();
  return Status::Ok();
}

Status ResultChannel::Offer(std::vector<v1::BattleResult> results, std::vector<Completion> done) {
  {
    std::lock_guard lock(mu_);
    if (closed_) return FailedPreconditionError("the node is shutting down");
    for (size_t i = 0; i < results.size(); ++i) {
      queue_.push_back({std::move(results[i]), i < done.size() ? std::move(done[i]) : nullptr});
    }
  }
  not_empty_.notify_one();
  return Status::Ok();
}

std::vector<v1::BattleResult> ResultChannel::PopBatch(size_t max, std::chrono::milliseconds wait,
                                                      std::vector<Completion>* done) {
  std::vector<v1::BattleResult> batch;
  std::unique_lock lock(mu_);
  not_empty_.wait_for(lock, wait, [&] { return closed_ || !queue_.empty(); });
  while (!queue_.empty() && batch.size() < max) {
    batch.push_back(std::move(queue_.front().result));
    if (done) done->push_back(std::move(queue_.front().done));
    queue_.pop_front();
  }
  taken_ += batch.size();
  lock.unlock();
  if (!batch.empty()) not_full_.notify_all();
  return batch;
}

void ResultChannel::MarkDone(size_t results) {
  std::lock_guard lock(mu_);
  taken_ -= std::min(taken_, results);
}

bool ResultChannel::WaitForBlockedProducers(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mu_);
  return producers_gone_.wait_until(lock, deadline, [&] { return waiting_ == 0; });
}

void ResultChannel::Close() {
  {
    std::lock_guard lock(mu_);
    closed_ = true;
  }
  not_full_.notify_all();
  not_empty_.notify_all();
}

bool ResultChannel::closed() const {
  std::lock_guard lock(mu_);
  return closed_;
}

size_t ResultChannel::size() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

size_t ResultChannel::waiting_producers() const {
  std::lock_guard lock(mu_);
  return waiting_;
}

size_t ResultChannel::unfinished() const {
  std::lock_guard lock(mu_);
  return waiting_ + queue_.size() + taken_;
}

size_t ResultChannel::refused() const {
  std::lock_guard lock(mu_);
  return refused_;
}

}  // namespace verdict::node
