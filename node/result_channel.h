// ResultChannel: the bounded queue between finishing rooms and the OutboxWriter. Push blocks
// while the channel is full, which is how a stalled outbox pushes back on the battle host
// (P6): results wait, they are never dropped. Many producers, one consumer; thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <vector>

#include "common/status.h"
#include "verdict/v1/verdict.pb.h"

namespace verdict::node {

class ResultChannel {
 public:
  // Default capacity: 256 results.
  explicit ResultChannel(size_t capacity = 256);

  // Adds a result, waiting while the channel is full. FAILED_PRECONDITION once the channel is
  // closed (the node is shutting down): the result was not taken.
  Status Push(v1::BattleResult result);

  // Waits up to `wait` for at least one result, then takes up to `max` of them. Returns an
  // empty batch on timeout, or when the channel is closed and empty.
  std::vector<v1::BattleResult> PopBatch(size_t max, std::chrono::milliseconds wait);

  // Refuses further pushes and wakes everyone; results already queued stay to be drained.
  void Close();

  bool closed() const;
  size_t size() const;
  size_t capacity() const { return capacity_; }
  // Producers currently blocked in Push because the channel is full.
  size_t waiting_producers() const;

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable not_full_;
  std::condition_variable not_empty_;
  std::deque<v1::BattleResult> queue_;
  bool closed_ = false;
  size_t waiting_ = 0;
};

}  // namespace verdict::node
