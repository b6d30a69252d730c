// ResultChannel: the bounded queue between finishing rooms and the OutboxWriter. Push blocks
// while the channel is full, which is how a stalled outbox pushes back on the battle host
// (P6): results wait, they are never dropped. It also counts the results its consumer has
// taken but not yet finished with (MarkDone), so "nothing waits anywhere" can be asked in one
// place. Results offered by a caller that must not block (the ingest listener) come with a
// completion that the consumer calls once it is done with each. Many producers, one consumer;
// thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "storage/outbox.h"
#include "verdict/v1/verdict.pb.h"

namespace verdict::node {

class ResultChannel {
 public:
  // Default capacity: 256 results.
  explicit ResultChannel(size_t capacity = 256);

  // Called by the consumer once for a result offered with Offer: with the outbox's answer once
  // that answer is durable, or with an UNAVAILABLE status if the result was given up (a shutdown
  // past its deadline with a failing outbox).
  using Completion = std::function<void(const storage::EnqueueResult&)>;

  // Adds a result, waiting while the channel is full. FAILED_PRECONDITION once the channel is
  // closed (the node is shutting down): the result was not taken.
  Status Push(v1::BattleResult result);

  // Adds results at once, beyond the capacity if need be, each with its completion: for a
  // caller that must not wait (an I/O thread) and bounds what it has in flight itself.
  // FAILED_PRECONDITION once the channel is closed: none was taken, no completion runs.
  Status Offer(std::vector<v1::BattleResult> results, std::vector<Completion> done);

  // Waits up to `wait` for at least one result, then takes up to `max` of them, and appends
  // their completions (empty for a pushed result) to `done` if given. Returns an empty batch on
  // timeout, or when the channel is closed and empty. The consumer calls MarkDone for every
  // result taken once it is stored or given up.
  std::vector<v1::BattleResult> PopBatch(size_t max, std::chrono::milliseconds wait,
                                         std::vector<Completion>* done = nullptr);
  void MarkDone(size_t results);

  // Waits until no producer is blocked in Push, or until `deadline`; false on the deadline.
  bool WaitForBlockedProducers(std::chrono::steady_clock::time_point deadline);

  // Refuses further pushes and wakes everyone; results already queued stay to be drained.
  void Close();

  bool closed() const;
  size_t size() const;
  size_t capacity() const { return capacity_; }
  // Producers currently blocked in Push because the channel is full.
  size_t waiting_producers() const;
  // Results somewhere between a producer and the end of the consumer's work: being pushed,
  // queued, or taken and not yet marked done. 0 means nothing is in flight.
  size_t unfinished() const;
  // Pushes refused because the channel was closed: results that never reached the outbox.
  size_t refused() const;

 private:
  const size_t capacity_;
  mutable Mutex mu_;
  CondVar not_full_{&mu_};
  CondVar not_empty_{&mu_};
  CondVar producers_gone_{&mu_};
  struct Queued {
    v1::BattleResult result;
    Completion done;
  };
  std::deque<Queued> queue_ GUARDED_BY(mu_);
  bool closed_ GUARDED_BY(mu_) = false;
  size_t waiting_ GUARDED_BY(mu_) = 0;
  size_t taken_ GUARDED_BY(mu_) = 0;  // popped, not yet marked done
  size_t refused_ GUARDED_BY(mu_) = 0;
};

}  // namespace verdict::node
