// SettlementScheduler: the lobby's group commit. It takes the validated settlement attempts of
// concurrent requests, gives each room its turn, and settles the rooms whose turn it is in as few
// transactions as it can through a BatchSettler (the store). It has no thread of its own: the
// transactions run on the threads that call Settle (the HTTP server's DB workers), so once every
// call of Settle has returned, every attempt has been finished; the lobby's shutdown, which joins
// its DB workers, answers every request that way. The SettlementService owns it; tests drive it
// with a fake settler and a FakeClock. Thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "common/status.h"
#include "lobby/cancellation.h"
#include "lobby/settlement_store.h"

namespace verdict::lobby {

struct SchedulerOptions {
  // Settlements from different requests that are ready together go into one transaction (group
  // commit): at most `settle_concurrency` transactions run at once, each taking up to
  // `max_batch_rooms` ready rooms, and one that finds fewer waits up to `coalesce_wait` for
  // more while another transaction is running (with none running it starts at once). A zero wait
  // turns coalescing off: each request's rooms then settle in their own transaction, up to one per
  // DB worker (the settler's workers()). Default: 2 ms, 4, 256.
  std::chrono::microseconds coalesce_wait{2000};
  int settle_concurrency = 4;
  size_t max_batch_rooms = 256;
  // Times the group commit's wait (its monotonic reading); tests give a FakeClock. Not owned.
  // Default: the system clock.
  const Clock* clock = SystemClock::Default();
  // Called each time the settlements go quiet: the last transaction running has ended and no
  // attempt is ready. On the thread of the call of Settle that ended it, without the scheduler's
  // lock; it must not block. verdict-lobby serve gives free memory back then
  // (lobby/allocator.h). Default: none.
  std::function<void()> on_quiet;

  // Test-only negative control: an attempt at a room whose turn a different attempt holds runs
  // at once beside it instead of waiting, so one room's settlements overlap and may finish out of
  // order. Default: false. Never set it outside tests.
  bool unsafe_ignore_room_turns_for_test = false;
};

class SettlementScheduler {
 public:
  // One room of a settlement request that passed validation.
  struct Attempt {
    v1::BattleResult result;
    std::string node_id;
    std::string fingerprint;  // Fingerprint(result)
    // May be null. Once cancelled, the attempt is skipped if it has not started, and its
    // statement is stopped if it runs in a transaction of its own.
    std::shared_ptr<Cancellation> cancel;
    // Called exactly once with the attempt's outcome, on the thread of some call of Settle,
    // without the scheduler's lock held.
    std::function<void(const Result<SettleOutcome>&)> finish;
    // Identical attempts (same node, same payload) have the same key.
    std::string key() const;
  };

  // The transactions at once without coalescing come from `settler.workers()`. `settler` and
  // `options.clock` must outlive the scheduler. `registry` gets its metrics; the rooms-in-turn
  // gauge reads the scheduler, so render the registry only while the scheduler lives.
  SettlementScheduler(BatchSettler& settler, const SchedulerOptions& options,
                      metrics::Registry& registry);
  SettlementScheduler(const SettlementScheduler&) = delete;
  SettlementScheduler& operator=(const SettlementScheduler&) = delete;

  // Settles the attempts of one request (distinct rooms). Attempts at one room take turns, in
  // arrival order: one whose room is free is ready; one identical to the room's running attempt
  // shares its outcome (a settled one as a duplicate); any other waits, without a thread, for
  // the running one to finish. Then, unless enough transactions already run (they take what is
  // ready after their own), settles ready rooms on this thread until none is left: with
  // coalescing, ready rooms of any request share a transaction; without, a request's rooms
  // share one. Some attempts, this request's or others', may be finished before this returns,
  // the rest on other callers' threads.
  void Settle(std::vector<Attempt> attempts);

  // Rooms with an attempt ready or running (the verdict_lobby_rooms_in_turn gauge).
  size_t rooms_in_turn() const;

 private:
  // An attempt as the scheduler queues it.
  struct Entry {
    Attempt attempt;
    uint64_t request =
        0;               // which Settle call it came from: without coalescing, they settle together
    bool alone = false;  // busy or refused in a batch: settle it on its own, waiting for its lock
    bool outside_turn = false;  // let past its room's turn (the negative control only)
  };
  // The attempts at one room: the one running, the identical ones sharing its outcome, and the
  // different ones that run after it in arrival order.
  struct Turn {
    std::string running_key;
    std::vector<Entry> sharing;
    std::deque<Entry> waiting;
  };

  // Settles ready attempts, a transaction at a time, while any are ready, unless enough
  // transactions already run.
  void Drain();
  // Whether ready rooms of different requests share transactions (group commit).
  bool Coalescing() const { return coalesce_wait_.count() > 0; }
  // Waits until the clock has moved on by coalesce_wait, or max_batch_rooms are ready.
  void WaitForCompany() REQUIRES(mu_);
  // The next transaction's attempts, taken from ready_.
  std::vector<Entry> TakeBatch() REQUIRES(mu_);
  // Runs one transaction for `batch`; one outcome per attempt.
  std::vector<Result<SettleOutcome>> SettleBatch(const std::vector<Entry>& batch);
  // After `ran` finished its turn with `outcome`: takes the attempts that share its outcome and
  // makes the room's next attempt, if any, ready.
  std::vector<Entry> EndTurn(const Entry& ran, const Result<SettleOutcome>& outcome) REQUIRES(mu_);

  BatchSettler& settler_;
  const std::chrono::microseconds coalesce_wait_;
  const int settle_concurrency_;
  const size_t max_batch_rooms_;
  const int db_workers_;
  const Clock* const clock_;
  const bool unsafe_ignore_room_turns_;
  const std::function<void()> on_quiet_;

  mutable Mutex mu_;
  CondVar more_ready_{&mu_};
  std::map<uint64_t, Turn> turns_ GUARDED_BY(mu_);  // rooms with an attempt ready or running
  std::deque<Entry> ready_ GUARDED_BY(mu_);  // attempts whose room's turn it is, not yet running
  int drainers_ GUARDED_BY(mu_) = 0;         // transactions being prepared or running
  int settling_ GUARDED_BY(mu_) = 0;         // transactions running in the database
  uint64_t next_request_ GUARDED_BY(mu_) = 0;

  metrics::Counter& coalesced_;
  metrics::Histogram& batch_rooms_;
};

}  // namespace verdict::lobby
