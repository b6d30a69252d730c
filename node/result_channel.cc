#include "node/result_channel.h"

namespace verdict::node {

ResultChannel::ResultChannel(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

Status ResultChannel::Push(v1::BattleResult result) {
  {
    MutexLock lock(&mu_);
    ++waiting_;
    while (!closed_ && queue_.size() >= capacity_) not_full_.Wait();
    if (closed_) {
      --waiting_;
      ++refused_;
      producers_gone_.SignalAll();
      return FailedPreconditionError("the node is shutting down; result for room " +
                                     std::to_string(result.room_id()) + " was not taken");
    }
    queue_.push_back({std::move(result), nullptr});
    --waiting_;
  }
  producers_gone_.SignalAll();
  not_empty_.Signal();
  return Status::Ok();
}

Status ResultChannel::Offer(std::vector<v1::BattleResult> results, std::vector<Completion> done) {
  {
    MutexLock lock(&mu_);
    if (closed_) return FailedPreconditionError("the node is shutting down");
    for (size_t i = 0; i < results.size(); ++i) {
      queue_.push_back({std::move(results[i]), i < done.size() ? std::move(done[i]) : nullptr});
    }
  }
  not_empty_.Signal();
  return Status::Ok();
}

std::vector<v1::BattleResult> ResultChannel::PopBatch(size_t max, std::chrono::milliseconds wait,
                                                      std::vector<Completion>* done) {
  std::vector<v1::BattleResult> batch;
  {
    MutexLock lock(&mu_);
    const auto deadline = std::chrono::steady_clock::now() + wait;
    while (!closed_ && queue_.empty()) {
      if (not_empty_.WaitUntil(deadline)) break;
    }
    while (!queue_.empty() && batch.size() < max) {
      batch.push_back(std::move(queue_.front().result));
      if (done) done->push_back(std::move(queue_.front().done));
      queue_.pop_front();
    }
    taken_ += batch.size();
  }
  if (!batch.empty()) not_full_.SignalAll();
  return batch;
}

void ResultChannel::MarkDone(size_t results) {
  MutexLock lock(&mu_);
  taken_ -= std::min(taken_, results);
}

bool ResultChannel::WaitForBlockedProducers(std::chrono::steady_clock::time_point deadline) {
  MutexLock lock(&mu_);
  while (waiting_ != 0) {
    if (producers_gone_.WaitUntil(deadline)) break;
  }
  return waiting_ == 0;
}

void ResultChannel::Close() {
  {
    MutexLock lock(&mu_);
    closed_ = true;
  }
  not_full_.SignalAll();
  not_empty_.SignalAll();
}

bool ResultChannel::closed() const {
  MutexLock lock(&mu_);
  return closed_;
}

size_t ResultChannel::size() const {
  MutexLock lock(&mu_);
  return queue_.size();
}

size_t ResultChannel::waiting_producers() const {
  MutexLock lock(&mu_);
  return waiting_;
}

size_t ResultChannel::unfinished() const {
  MutexLock lock(&mu_);
  return waiting_ + queue_.size() + taken_;
}

size_t ResultChannel::refused() const {
  MutexLock lock(&mu_);
  return refused_;
}

}  // namespace verdict::node
