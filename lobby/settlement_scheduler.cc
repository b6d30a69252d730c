#include "lobby/settlement_scheduler.h"

#include <algorithm>
#include <utility>

namespace verdict::lobby {

std::string SettlementScheduler::Attempt::key() const { return node_id + '/' + fingerprint; }

SettlementScheduler::SettlementScheduler(BatchSettler& settler, const SchedulerOptions& options,
                                         metrics::Registry& registry)
    : settler_(settler),
      coalesce_wait_(options.coalesce_wait),
      settle_concurrency_(options.settle_concurrency),
      max_batch_rooms_(options.max_batch_rooms),
      db_workers_(settler.workers()),
      clock_(options.clock ? options.clock : SystemClock::Default()),
      unsafe_ignore_room_turns_(options.unsafe_ignore_room_turns_for_test),
      on_quiet_(options.on_quiet),
      coalesced_(registry.AddCounter(
          "verdict_lobby_settlements_coalesced_total",
          "Settlement requests answered by another identical request's transaction.")),
      batch_rooms_(registry.AddHistogram("verdict_lobby_settle_batch_rooms",
                                         "Rooms settled per settlement transaction.",
                                         {1, 2, 4, 8, 16, 32, 64, 128, 256})) {
  registry.AddGauge("verdict_lobby_rooms_in_turn",
                    "Rooms with a settlement attempt running (others wait behind it).",
                    [this] { return static_cast<double>(rooms_in_turn()); });
}

size_t SettlementScheduler::rooms_in_turn() const {
  MutexLock lock(&mu_);
  return turns_.size();
}

void SettlementScheduler::Settle(std::vector<Attempt> attempts) {
  {
    MutexLock lock(&mu_);
    const uint64_t request = ++next_request_;
    for (Attempt& attempt : attempts) {
      Entry entry{std::move(attempt), request};
      auto [turn, free] = turns_.try_emplace(entry.attempt.result.room_id());
      if (free) {
        turn->second.running_key = entry.attempt.key();
        ready_.push_back(std::move(entry));
      } else if (turn->second.running_key == entry.attempt.key()) {
        coalesced_.Add();
        turn->second.sharing.push_back(std::move(entry));
      } else if (unsafe_ignore_room_turns_) {
        entry.outside_turn = true;
        ready_.push_back(std::move(entry));
      } else {
        turn->second.waiting.push_back(std::move(entry));
      }
    }
  }
  more_ready_.SignalAll();
  Drain();
}

void SettlementScheduler::Drain() {
  MutexLock lock(&mu_);
  const bool coalescing = Coalescing();
  const int limit = coalescing ? settle_concurrency_ : db_workers_;
  if (drainers_ >= limit) return;  // the running transactions take what is ready after theirs
  ++drainers_;
  while (!ready_.empty()) {
    if (coalescing && settling_ > 0 && ready_.size() < max_batch_rooms_ && !ready_.front().alone) {
      // Group commit: while another transaction runs, the database is busy anyway, so a moment
      // for concurrent requests to join this one costs little. With none running there is
      // nothing to wait for: a lone request (a serial sender, a quiet lobby) goes at once.
      WaitForCompany();
      if (ready_.empty()) break;  // another transaction took them meanwhile
    }
    std::vector<Entry> batch = TakeBatch();
    ++settling_;
    lock.Unlock();
    std::vector<Result<SettleOutcome>> outcomes = SettleBatch(batch);
    lock.Lock();
    --settling_;
    std::vector<size_t> finished;
    std::vector<std::vector<Entry>> sharing(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      const bool busy = outcomes[i].ok() && outcomes[i]->status == SettleStatus::kBusy;
      // One room's refused settlement (a check violation, say) fails the whole transaction, and
      // so every room in it with the same INTERNAL error: only on its own does a room show
      // whether the refusal is its own.
      const bool refused_together = batch.size() > 1 && !outcomes[i].ok() &&
                                    outcomes[i].status().code() == StatusCode::kInternal;
      // An attempt that ran alone already is answered with what it got: a room still busy
      // while its transaction waited for the lock is the client's to retry (503), never a loop.
      if ((busy || refused_together) && !batch[i].alone) {
        // It keeps its turn and goes first, to settle on its own (waiting for its lock).
        batch[i].alone = true;
        ready_.push_front(std::move(batch[i]));
        continue;
      }
      if (!batch[i].outside_turn) sharing[i] = EndTurn(batch[i], outcomes[i]);
      finished.push_back(i);
    }
    lock.Unlock();
    more_ready_.SignalAll();
    for (size_t i : finished) {
      batch[i].attempt.finish(outcomes[i]);
      // The attempt settled it; for the identical ones it is a duplicate delivery.
      Result<SettleOutcome> shared = outcomes[i];
      if (shared.ok() && shared->status == SettleStatus::kSettled) {
        shared->status = SettleStatus::kDuplicate;
        shared->receipt.set_duplicate(true);
      }
      for (Entry& e : sharing[i]) e.attempt.finish(shared);
    }
    lock.Lock();
  }
  --drainers_;
  const bool quiet = drainers_ == 0 && ready_.empty();
  lock.Unlock();
  if (quiet && on_quiet_) on_quiet_();
}

void SettlementScheduler::WaitForCompany() {
  // Timed on the injected clock, so a test moves the deadline with a FakeClock; each wait for
  // the condition variable lasts at most what is left of it.
  const int64_t deadline_us = clock_->MonotonicUs() + coalesce_wait_.count();
  while (ready_.size() < max_batch_rooms_) {
    const int64_t left_us = deadline_us - clock_->MonotonicUs();
    if (left_us <= 0) return;
    more_ready_.WaitFor(std::chrono::microseconds(left_us));
  }
}

std::vector<SettlementScheduler::Entry> SettlementScheduler::TakeBatch() {
  std::vector<Entry> batch;
  batch.push_back(std::move(ready_.front()));
  ready_.pop_front();
  if (batch.front().alone) return batch;
  // Coalescing takes any ready rooms; without it, only the rest of the same request's.
  const bool coalescing = Coalescing();
  for (auto it = ready_.begin(); it != ready_.end() && batch.size() < max_batch_rooms_;) {
    if (it->alone || (!coalescing && it->request != batch.front().request)) {
      ++it;
      continue;
    }
    batch.push_back(std::move(*it));
    it = ready_.erase(it);
  }
  return batch;
}

std::vector<Result<SettleOutcome>> SettlementScheduler::SettleBatch(
    const std::vector<Entry>& batch) {
  std::vector<Result<SettleOutcome>> outcomes(
      batch.size(), Result<SettleOutcome>(UnavailableError("the client went away")));
  std::vector<SettleRequest> requests;
  std::vector<size_t> index;
  for (size_t i = 0; i < batch.size(); ++i) {
    const Attempt& a = batch[i].attempt;
    if (a.cancel && a.cancel->cancelled()) continue;  // nobody waits for it
    requests.push_back({&a.result, a.node_id, a.fingerprint});
    index.push_back(i);
  }
  if (requests.empty()) return outcomes;
  // One attempt alone waits for its room's lock and may be cancelled by its client; a batch
  // leaves locked rooms for later and runs for all its clients.
  const bool one = requests.size() == 1;
  auto settled = settler_.SettleBattles(requests, /*wait=*/one,
                                        one ? batch[index[0]].attempt.cancel.get() : nullptr);
  batch_rooms_.Observe(static_cast<double>(requests.size()));
  for (size_t k = 0; k < index.size(); ++k) outcomes[index[k]] = std::move(settled[k]);
  return outcomes;
}

std::vector<SettlementScheduler::Entry> SettlementScheduler::EndTurn(
    const Entry& ran, const Result<SettleOutcome>& outcome) {
  const uint64_t room = ran.attempt.result.room_id();
  Turn& turn = turns_.at(room);
  std::vector<Entry> sharing;
  sharing.swap(turn.sharing);
  if (!outcome.ok() && ran.attempt.cancel && ran.attempt.cancel->cancelled()) {
    // Cancelled because its own client left: that says nothing about the identical attempts
    // whose clients still wait. They go first in the queue, to run for themselves.
    for (auto it = sharing.rbegin(); it != sharing.rend(); ++it) {
      turn.waiting.push_front(std::move(*it));
    }
    sharing.clear();
  }
  if (turn.waiting.empty()) {
    turns_.erase(room);
    return sharing;
  }
  Entry next = std::move(turn.waiting.front());
  turn.waiting.pop_front();
  turn.running_key = next.attempt.key();
  // Waiting attempts identical to the next one share its outcome instead of running after it.
  for (auto it = turn.waiting.begin(); it != turn.waiting.end();) {
    if (it->attempt.key() != turn.running_key) {
      ++it;
      continue;
    }
    turn.sharing.push_back(std::move(*it));
    it = turn.waiting.erase(it);
  }
  ready_.push_back(std::move(next));
  return sharing;
}

}  // namespace verdict::lobby
