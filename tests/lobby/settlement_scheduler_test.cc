// The lobby's group commit (SettlementScheduler) on its own: a fake store that holds each
// transaction in flight until the test answers it, and a FakeClock for the coalescing wait. No
// database and no sleeps: every step waits for an event (a transaction reaching the store, an
// attempt answered, a call of Settle returning), each wait bounded so that a broken scheduler
// fails its test instead of hanging it.
#include "lobby/settlement_scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "lobby/settlement_service.h"
#include "tests/support/results.h"

namespace verdict::lobby {
namespace {

using namespace std::chrono_literals;
using Attempt = SettlementScheduler::Attempt;

// How long any one event may take before the test gives up on it: never reached unless broken.
constexpr auto kEventTimeout = 10s;

// One transaction as the store saw it. Different attempts at one room differ in their payload
// (the result's ended_at_ms).
struct Call {
  std::vector<uint64_t> rooms;
  std::vector<int64_t> payloads;
  bool wait = false;        // waits for each room's lock (a transaction of one attempt)
  bool cancelable = false;  // given the attempt's Cancellation
};

using Outcomes = std::vector<Result<SettleOutcome>>;

Outcomes AllSettled(const Call& call) {
  Outcomes outcomes;
  for (uint64_t room : call.rooms) {
    SettleOutcome settled;
    settled.receipt.set_match_id(room);
    outcomes.push_back(settled);
  }
  return outcomes;
}

Outcomes AllFailed(const Call& call, const Status& failure) {
  return Outcomes(call.rooms.size(), Result<SettleOutcome>(failure));
}

// Stands in for the store. While held (the default), each call is a transaction in flight until
// the test releases it; then it answers with `answer` (default: every room settled). It records
// every call, and every room it found in two transactions at once (or twice in one).
class FakeStore final : public BatchSettler {
 public:
  using Answer = std::function<Outcomes(const Call&, Cancellation*)>;

  // The DB workers it stands for; set before the scheduler is made.
  int workers() const override { return workers_; }
  void SetWorkers(int n) { workers_ = n; }

  Outcomes SettleBattles(const std::vector<SettleRequest>& requests, bool wait,
                         Cancellation* cancel) override {
    std::unique_lock lock(mu_);
    Call call;
    for (const SettleRequest& r : requests) {
      call.rooms.push_back(r.result->room_id());
      call.payloads.push_back(r.result->ended_at_ms());
    }
    call.wait = wait;
    call.cancelable = cancel != nullptr;
    for (uint64_t room : call.rooms) {
      if (in_flight_.count(room) > 0) overlapped_.push_back(room);
      in_flight_.insert(room);
    }
    const size_t n = calls_.size();
    calls_.push_back(call);
    changed_.notify_all();
    const std::function<void()> on_call = on_call_;
    lock.unlock();
    if (on_call) on_call();
    lock.lock();
    if (!changed_.wait_for(lock, kEventTimeout, [&] { return !hold_ || released_.count(n); })) {
      ADD_FAILURE() << "transaction " << n << " was never released";
    }
    for (uint64_t room : call.rooms) in_flight_.erase(in_flight_.find(room));
    const Answer answer = answer_;
    lock.unlock();
    return answer ? answer(call, cancel) : AllSettled(call);
  }

  void Hold(bool hold) {
    std::lock_guard lock(mu_);
    hold_ = hold;
    changed_.notify_all();
  }
  void Release(size_t call) {
    std::lock_guard lock(mu_);
    released_.insert(call);
    changed_.notify_all();
  }
  void AnswerWith(Answer answer) {
    std::lock_guard lock(mu_);
    answer_ = std::move(answer);
  }
  // Called (without the store's lock) each time a transaction reaches the store.
  void OnCall(std::function<void()> on_call) {
    std::lock_guard lock(mu_);
    on_call_ = std::move(on_call);
  }
  // Whether `n` transactions have reached the store (released or not).
  bool WaitForCalls(size_t n) {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, kEventTimeout, [&] { return calls_.size() >= n; });
  }

  std::vector<Call> calls() const {
    std::lock_guard lock(mu_);
    return calls_;
  }
  std::vector<uint64_t> overlapped() const {
    std::lock_guard lock(mu_);
    return overlapped_;
  }
  // The payloads settled for `room`, in the order their transactions reached the store.
  std::vector<int64_t> PayloadsOf(uint64_t room) const {
    std::lock_guard lock(mu_);
    std::vector<int64_t> payloads;
    for (const Call& c : calls_) {
      for (size_t i = 0; i < c.rooms.size(); ++i) {
        if (c.rooms[i] == room) payloads.push_back(c.payloads[i]);
      }
    }
    return payloads;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable changed_;
  bool hold_ = true;
  int workers_ = 8;
  std::set<size_t> released_;
  Answer answer_;
  std::function<void()> on_call_;
  std::vector<Call> calls_;
  std::multiset<uint64_t> in_flight_;
  std::vector<uint64_t> overlapped_;
};

// A FakeClock that counts its reads: the scheduler reads the clock only to time its wait for
// company, so a read says that a transaction has begun that wait (its deadline is set).
class CountingClock final : public Clock {
 public:
  int64_t NowMs() const override { return clock_.NowMs(); }
  int64_t MonotonicMs() const override {
    {
      std::lock_guard lock(mu_);
      ++reads_;
    }
    read_.notify_all();
    return clock_.MonotonicMs();
  }
  void AdvanceMs(int64_t ms) { clock_.AdvanceMs(ms); }
  bool WaitForReads(int n) const {
    std::unique_lock lock(mu_);
    return read_.wait_for(lock, kEventTimeout, [&] { return reads_ >= n; });
  }

 private:
  FakeClock clock_;
  mutable std::mutex mu_;
  mutable std::condition_variable read_;
  mutable int reads_ = 0;
};

class SettlementSchedulerTest : public ::testing::Test {
 protected:
  SettlementSchedulerTest() {
    options_.clock = &clock_;
    options_.coalesce_wait = 2ms;
    options_.settle_concurrency = 1;
    store_.OnCall([this] {
      std::lock_guard lock(mu_);
      changed_.notify_all();
    });
  }

  // Whatever a failed test left waiting (a transaction held, a wait for company) ends.
  void TearDown() override {
    store_.Hold(false);
    clock_.AdvanceMs(3'600'000);
    for (std::thread& t : threads_) t.join();
  }

  void Start() { scheduler_ = std::make_unique<SettlementScheduler>(store_, options_, registry_); }

  // An attempt at `room` with payload `payload` (attempts with the same room and payload are
  // identical), answered into outcomes_ under `name`.
  Attempt At(uint64_t room, int64_t payload, const std::string& name,
             std::shared_ptr<Cancellation> cancel = nullptr) {
    Attempt a;
    a.result = testing::MakeResult(room, payload);
    a.node_id = "node-a";
    a.fingerprint = Fingerprint(a.result);
    a.cancel = std::move(cancel);
    a.finish = [this, name](const Result<SettleOutcome>& outcome) {
      std::lock_guard lock(mu_);
      finished_.push_back(name);
      outcomes_[name].push_back(outcome);
      changed_.notify_all();
    };
    return a;
  }

  // Calls Settle with one request's attempts on a thread of its own, as a DB worker does.
  void Submit(std::vector<Attempt> attempts) {
    threads_.emplace_back([this, attempts = std::move(attempts)]() mutable {
      scheduler_->Settle(std::move(attempts));
      std::lock_guard lock(mu_);
      ++returned_;
      changed_.notify_all();
    });
  }
  void Submit(Attempt attempt) {
    std::vector<Attempt> one;
    one.push_back(std::move(attempt));
    Submit(std::move(one));
  }
  // Submits a request that queues (another transaction runs, or its room's turn is taken) and
  // waits for its call to return, so that requests queue in the order submitted.
  void Queue(Attempt attempt) {
    int returned;
    {
      std::lock_guard lock(mu_);
      returned = returned_;
    }
    Submit(std::move(attempt));
    ASSERT_TRUE(WaitForReturned(returned + 1));
  }

  // Whether `n` calls of Settle have returned.
  bool WaitForReturned(int n) {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, kEventTimeout, [&] { return returned_ >= n; });
  }
  // Whether `n` attempts have been answered.
  bool WaitForFinished(size_t n) {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, kEventTimeout, [&] { return finished_.size() >= n; });
  }
  // Ends the test's threads, as the lobby's shutdown joins its DB workers.
  void JoinAll() {
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

  // The one outcome `name` was answered with (a failure if it was answered more or less often).
  Result<SettleOutcome> OutcomeOf(const std::string& name) {
    std::lock_guard lock(mu_);
    const auto& all = outcomes_[name];
    if (all.size() != 1) {
      return InternalError(name + " was answered " + std::to_string(all.size()) + " times");
    }
    return all.front();
  }
  // Where `name` is in the order of answers (-1 if not answered).
  int AnsweredAt(const std::string& name) {
    std::lock_guard lock(mu_);
    auto it = std::find(finished_.begin(), finished_.end(), name);
    return it == finished_.end() ? -1 : static_cast<int>(it - finished_.begin());
  }
  size_t Answered() {
    std::lock_guard lock(mu_);
    return finished_.size();
  }

  // Holds an unrelated room's transaction in flight (the store's call 0), so that requests
  // submitted meanwhile queue up behind it and return (one transaction at a time runs).
  // Rooms 1 ("one") and 2 ("two") batched behind an occupied transaction, room 2 answered busy:
  // by a call that does not wait only (as PostgreSQL does), or by every call (`even_waiting`).
  // Returns the store's calls once every attempt is finished.
  std::vector<Call> SettleWithRoomTwoBusy(bool even_waiting) {
    store_.AnswerWith([even_waiting](const Call& call, Cancellation*) {
      Outcomes outcomes = AllSettled(call);
      for (size_t i = 0; i < call.rooms.size(); ++i) {
        if (call.rooms[i] == 2 && (even_waiting || !call.wait)) {
          outcomes[i]->status = SettleStatus::kBusy;
        }
      }
      return outcomes;
    });
    Start();
    OccupyTheOnlyTransaction();
    Submit(At(1, 1, "one"));
    Submit(At(2, 1, "two"));
    EXPECT_TRUE(WaitForReturned(2));
    store_.Hold(false);
    EXPECT_TRUE(WaitForFinished(3));
    JoinAll();
    return store_.calls();
  }

  void OccupyTheOnlyTransaction() {
    Submit(At(99, 1, "occupier"));
    ASSERT_TRUE(store_.WaitForCalls(1));
  }

  // Room 1 gets A, then a different B, while room 2 gets C, all queued behind another
  // transaction; then they settle. What a room's turn must guarantee: B is neither in A's
  // transaction nor in one beside it, and settles after A.
  struct TurnsSeen {
    std::vector<uint64_t> overlapped;
    std::vector<int64_t> room1_payloads;
    bool b_after_a = false;
  };
  TurnsSeen QueueTwoAttemptsAtOneRoom() {
    Start();
    OccupyTheOnlyTransaction();
    Queue(At(1, 1, "A"));
    Queue(At(1, 2, "B"));
    Queue(At(2, 1, "C"));
    store_.Hold(false);
    EXPECT_TRUE(WaitForFinished(4));
    JoinAll();
    return {store_.overlapped(), store_.PayloadsOf(1), AnsweredAt("A") < AnsweredAt("B")};
  }

  // Room 1's attempt A is in flight when a different B arrives, and two transactions may run at
  // once: B must wait for A, not run beside it.
  TurnsSeen OverlapTwoAttemptsAtOneRoom() {
    options_.coalesce_wait = 0us;  // no group commit: a transaction per request
    store_.SetWorkers(2);
    Start();
    Submit(At(1, 1, "A"));
    EXPECT_TRUE(store_.WaitForCalls(1));
    Submit(At(1, 2, "B"));
    // B's call returns at once if B waits its turn; else B's transaction reaches the store.
    {
      std::unique_lock lock(mu_);
      EXPECT_TRUE(changed_.wait_for(lock, kEventTimeout,
                                    [&] { return returned_ >= 1 || store_.calls().size() >= 2; }));
    }
    store_.Hold(false);
    EXPECT_TRUE(WaitForFinished(2));
    JoinAll();
    return {store_.overlapped(), store_.PayloadsOf(1), AnsweredAt("A") < AnsweredAt("B")};
  }

  FakeStore store_;
  CountingClock clock_;
  SchedulerOptions options_;
  metrics::Registry registry_;
  std::unique_ptr<SettlementScheduler> scheduler_;
  std::vector<std::thread> threads_;

  std::mutex mu_;
  std::condition_variable changed_;
  int returned_ = 0;
  std::vector<std::string> finished_;
  std::map<std::string, std::vector<Result<SettleOutcome>>> outcomes_;
};

TEST_F(SettlementSchedulerTest, ARoomsSecondAttemptIsNotBatchedWithItsFirst) {
  const TurnsSeen seen = QueueTwoAttemptsAtOneRoom();
  EXPECT_TRUE(seen.overlapped.empty())
      << "room " << seen.overlapped.front() << " ran twice at once";
  EXPECT_EQ(seen.room1_payloads, (std::vector<int64_t>{1, 2})) << "B overtook A";
  EXPECT_TRUE(seen.b_after_a);
  // A went with room 2's C; B waited for A's transaction to end.
  const std::vector<Call> calls = store_.calls();
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[1].rooms, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(calls[2].rooms, (std::vector<uint64_t>{1}));
  EXPECT_EQ(scheduler_->rooms_in_turn(), 0u);
}

TEST_F(SettlementSchedulerTest, ARoomIsNeverInTwoTransactionsAtOnce) {
  const TurnsSeen seen = OverlapTwoAttemptsAtOneRoom();
  EXPECT_TRUE(seen.overlapped.empty())
      << "room " << seen.overlapped.front() << " ran twice at once";
  EXPECT_EQ(seen.room1_payloads, (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(seen.b_after_a);
  EXPECT_EQ(scheduler_->rooms_in_turn(), 0u);
}

// Negative control: letting an attempt past its room's turn puts one room in two transactions,
// and the checks above see it.
TEST_F(SettlementSchedulerTest, NegativeControlIgnoringRoomTurnsIsCaughtInOneBatch) {
  options_.unsafe_ignore_room_turns_for_test = true;
  EXPECT_EQ(QueueTwoAttemptsAtOneRoom().overlapped, (std::vector<uint64_t>{1}));
}

TEST_F(SettlementSchedulerTest, NegativeControlIgnoringRoomTurnsIsCaughtInTwoTransactions) {
  options_.unsafe_ignore_room_turns_for_test = true;
  EXPECT_EQ(OverlapTwoAttemptsAtOneRoom().overlapped, (std::vector<uint64_t>{1}));
}

// The settlements go quiet (on_quiet, when the lobby gives memory back) once, when the last
// transaction ends with nothing ready: not while one runs, nor between transactions that queued.
TEST_F(SettlementSchedulerTest, TheSettlementsGoQuietOnceTheLastTransactionEnds) {
  std::atomic<int> quiet{0};
  options_.on_quiet = [&quiet] { ++quiet; };
  Start();
  OccupyTheOnlyTransaction();
  Queue(At(1, 1, "one"));
  Queue(At(2, 1, "two"));
  EXPECT_EQ(quiet, 0) << "quiet while a transaction runs";
  store_.Hold(false);
  ASSERT_TRUE(WaitForFinished(3));
  JoinAll();
  EXPECT_EQ(store_.calls().size(), 2u);
  EXPECT_EQ(quiet, 1);
  // A lone request later: quiet again when it ends.
  Submit(At(3, 1, "three"));
  ASSERT_TRUE(WaitForFinished(4));
  JoinAll();
  EXPECT_EQ(quiet, 2);
}

TEST_F(SettlementSchedulerTest, ConcurrentRequestsForDifferentRoomsShareOneTransaction) {
  Start();
  OccupyTheOnlyTransaction();
  Submit(At(1, 1, "one"));
  Submit(At(2, 1, "two"));
  std::vector<Attempt> batch;
  batch.push_back(At(3, 1, "three"));
  batch.push_back(At(4, 1, "four"));
  Submit(std::move(batch));
  ASSERT_TRUE(WaitForReturned(3));
  store_.Hold(false);
  ASSERT_TRUE(WaitForFinished(5));
  const std::vector<Call> calls = store_.calls();
  ASSERT_EQ(calls.size(), 2u) << "the requests did not share a transaction";
  EXPECT_EQ(std::set<uint64_t>(calls[1].rooms.begin(), calls[1].rooms.end()),
            (std::set<uint64_t>{1, 2, 3, 4}));
  EXPECT_FALSE(calls[1].wait) << "a batch must leave locked rooms for later";
  for (const char* name : {"one", "two", "three", "four"}) {
    auto outcome = OutcomeOf(name);
    ASSERT_TRUE(outcome.ok()) << name << ": " << outcome.status().ToString();
    EXPECT_EQ(outcome->status, SettleStatus::kSettled) << name;
  }
}

TEST_F(SettlementSchedulerTest, WithoutCoalescingEachRequestHasItsOwnTransaction) {
  options_.coalesce_wait = 0us;
  store_.SetWorkers(1);
  Start();
  OccupyTheOnlyTransaction();
  Submit(At(1, 1, "one"));
  std::vector<Attempt> batch;
  batch.push_back(At(2, 1, "two"));
  batch.push_back(At(3, 1, "three"));
  Submit(std::move(batch));
  ASSERT_TRUE(WaitForReturned(2));
  store_.Hold(false);
  ASSERT_TRUE(WaitForFinished(4));
  std::set<std::vector<uint64_t>> transactions;
  for (const Call& c : store_.calls()) transactions.insert(c.rooms);
  EXPECT_EQ(transactions, (std::set<std::vector<uint64_t>>{{99}, {1}, {2, 3}}));
}

// With another transaction running, a lone ready room waits on the clock for company; once the
// clock has moved on by the coalescing wait it goes with whoever joined.
TEST_F(SettlementSchedulerTest, ALoneRoomWaitsOnTheClockForCompanyWhileAnotherTransactionRuns) {
  options_.settle_concurrency = 2;
  Start();
  OccupyTheOnlyTransaction();
  Submit(At(1, 1, "one"));
  ASSERT_TRUE(clock_.WaitForReads(1)) << "room 1 did not wait for company";
  Submit(At(2, 1, "two"));
  ASSERT_TRUE(WaitForReturned(1));  // the second transaction is taken: room 2 joins room 1's
  EXPECT_EQ(store_.calls().size(), 1u) << "room 1 went before the clock moved";
  clock_.AdvanceMs(2);
  ASSERT_TRUE(store_.WaitForCalls(2));
  EXPECT_EQ(store_.calls()[1].rooms, (std::vector<uint64_t>{1, 2}));
  store_.Hold(false);
  ASSERT_TRUE(WaitForFinished(3));
}

TEST_F(SettlementSchedulerTest, AFullBatchGoesWithoutWaitingForTheClock) {
  options_.settle_concurrency = 2;
  options_.max_batch_rooms = 2;
  Start();
  OccupyTheOnlyTransaction();
  Submit(At(1, 1, "one"));
  Submit(At(2, 1, "two"));
  ASSERT_TRUE(store_.WaitForCalls(2)) << "a full batch waited for the clock";
  const std::vector<uint64_t> rooms = store_.calls()[1].rooms;
  EXPECT_EQ(std::set<uint64_t>(rooms.begin(), rooms.end()), (std::set<uint64_t>{1, 2}));
  store_.Hold(false);
  ASSERT_TRUE(WaitForFinished(3));
}

TEST_F(SettlementSchedulerTest, IdenticalAttemptsShareTheRunningOnesOutcome) {
  Start();
  Submit(At(1, 1, "first"));
  ASSERT_TRUE(store_.WaitForCalls(1));
  Submit(At(1, 1, "again"));
  ASSERT_TRUE(WaitForReturned(1));
  store_.Release(0);
  ASSERT_TRUE(WaitForFinished(2));
  EXPECT_EQ(store_.calls().size(), 1u);
  auto first = OutcomeOf("first");
  auto again = OutcomeOf("again");
  ASSERT_TRUE(first.ok() && again.ok());
  EXPECT_EQ(first->status, SettleStatus::kSettled);
  EXPECT_EQ(again->status, SettleStatus::kDuplicate);
  EXPECT_TRUE(again->receipt.duplicate());
  EXPECT_NE(registry_.RenderText().find("verdict_lobby_settlements_coalesced_total 1\n"),
            std::string::npos);
}

// A transaction that fails (the connection lost, say) fails every attempt in it, and the ones
// sharing their outcomes, alike; their rooms' turns pass on to the attempts waiting.
TEST_F(SettlementSchedulerTest, AFailedTransactionAnswersEveryAttemptAndPassesTheTurns) {
  store_.AnswerWith([](const Call& call, Cancellation*) {
    if (call.rooms.size() > 1) return AllFailed(call, UnavailableError("connection lost"));
    return AllSettled(call);
  });
  Start();
  OccupyTheOnlyTransaction();
  Queue(At(1, 1, "A"));
  Queue(At(1, 1, "A again"));
  Queue(At(1, 2, "B"));
  Queue(At(2, 1, "C"));
  store_.Hold(false);
  ASSERT_TRUE(WaitForFinished(5));
  JoinAll();
  for (const char* name : {"A", "A again", "C"}) {
    EXPECT_EQ(OutcomeOf(name).status().code(), StatusCode::kUnavailable) << name;
  }
  auto b = OutcomeOf("B");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->status, SettleStatus::kSettled);
  EXPECT_EQ(store_.PayloadsOf(1), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(scheduler_->rooms_in_turn(), 0u) << "a room kept its turn";
}

// The database refusing one room (INTERNAL) fails its whole transaction: each room then settles
// on its own, first in the queue, so only the room refused is answered with the refusal.
TEST_F(SettlementSchedulerTest, ARefusedTransactionRetriesEachRoomAlone) {
  store_.AnswerWith([](const Call& call, Cancellation*) {
    const bool refused = std::count(call.rooms.begin(), call.rooms.end(), 2) > 0;
    if (refused) return AllFailed(call, InternalError("check violation"));
    return AllSettled(call);
  });
  Start();
  OccupyTheOnlyTransaction();
  Submit(At(1, 1, "one"));
  Submit(At(2, 1, "two"));
  Submit(At(3, 1, "three"));
  ASSERT_TRUE(WaitForReturned(3));
  store_.Hold(false);
  ASSERT_TRUE(WaitForFinished(4));
  JoinAll();
  const std::vector<Call> calls = store_.calls();
  ASSERT_EQ(calls.size(), 5u);  // the occupier, the batch, then each room alone
  EXPECT_EQ(calls[1].rooms.size(), 3u);
  std::set<uint64_t> alone;
  for (size_t i = 2; i < calls.size(); ++i) {
    ASSERT_EQ(calls[i].rooms.size(), 1u);
    EXPECT_TRUE(calls[i].wait) << "a room on its own waits for its lock";
    alone.insert(calls[i].rooms[0]);
  }
  EXPECT_EQ(alone, (std::set<uint64_t>{1, 2, 3}));
  EXPECT_EQ(OutcomeOf("two").status().code(), StatusCode::kInternal);
  EXPECT_TRUE(OutcomeOf("one").ok());
  EXPECT_TRUE(OutcomeOf("three").ok());
}

// A batch leaves a room that another transaction holds (busy); the room keeps its turn and
// settles on its own, waiting for the lock. Its client never hears "busy".
TEST_F(SettlementSchedulerTest, ABusyRoomSettlesAloneWaitingForItsLock) {
  const std::vector<Call> calls = SettleWithRoomTwoBusy(/*even_waiting=*/false);
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[2].rooms, (std::vector<uint64_t>{2}));
  EXPECT_TRUE(calls[2].wait);
  auto two = OutcomeOf("two");
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->status, SettleStatus::kSettled);
}

// A room still busy when it settles alone (a store whose waiting call answers busy: PostgreSQL's
// does not) is answered busy, which its client retries; it is not queued alone again forever.
TEST_F(SettlementSchedulerTest, ARoomStillBusyAloneIsAnsweredNotRequeued) {
  const std::vector<Call> calls = SettleWithRoomTwoBusy(/*even_waiting=*/true);
  ASSERT_EQ(calls.size(), 3u) << "the busy room went to the store once in its batch, once alone";
  EXPECT_TRUE(calls[2].wait);
  auto two = OutcomeOf("two");
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->status, SettleStatus::kBusy);
}

// A client that hangs up while its attempt waits for the room's turn: when the turn comes the
// attempt is skipped (it never reaches the store) and the turn passes to the next.
TEST_F(SettlementSchedulerTest, ACancelledWaitingAttemptIsSkippedAndPassesItsTurn) {
  Start();
  Submit(At(1, 1, "A"));
  ASSERT_TRUE(store_.WaitForCalls(1));
  auto gone = std::make_shared<Cancellation>();
  Queue(At(1, 2, "B", gone));
  Queue(At(1, 3, "C"));
  gone->Cancel();
  store_.Hold(false);
  ASSERT_TRUE(WaitForFinished(3));
  JoinAll();
  EXPECT_EQ(store_.PayloadsOf(1), (std::vector<int64_t>{1, 3})) << "B reached the store";
  auto b = OutcomeOf("B");
  EXPECT_EQ(b.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(b.status().message().find("went away"), std::string::npos) << b.status().message();
  EXPECT_TRUE(OutcomeOf("C").ok());
  EXPECT_LT(AnsweredAt("B"), AnsweredAt("C"));
  EXPECT_EQ(scheduler_->rooms_in_turn(), 0u);
}

// A cancelled attempt in a batch is left out of the transaction; the others settle.
TEST_F(SettlementSchedulerTest, ACancelledAttemptIsLeftOutOfItsBatch) {
  Start();
  OccupyTheOnlyTransaction();
  auto gone = std::make_shared<Cancellation>();
  Submit(At(1, 1, "one"));
  Submit(At(2, 1, "two", gone));
  ASSERT_TRUE(WaitForReturned(2));
  gone->Cancel();
  store_.Hold(false);
  ASSERT_TRUE(WaitForFinished(3));
  JoinAll();
  const std::vector<Call> calls = store_.calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].rooms, (std::vector<uint64_t>{1}));
  EXPECT_EQ(OutcomeOf("two").status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(OutcomeOf("one").ok());
}

// The running attempt's own client hangs up and its statement is cancelled: that failure is its
// own, so an identical attempt sharing its outcome runs for itself instead.
TEST_F(SettlementSchedulerTest, ACancelledRunningAttemptLeavesItsSharersToRunForThemselves) {
  store_.AnswerWith([](const Call& call, Cancellation* cancel) {
    if (cancel && cancel->cancelled()) {
      return AllFailed(call, UnavailableError("canceling statement due to user request"));
    }
    return AllSettled(call);
  });
  Start();
  auto gone = std::make_shared<Cancellation>();
  Submit(At(1, 1, "first", gone));
  ASSERT_TRUE(store_.WaitForCalls(1));
  EXPECT_TRUE(store_.calls()[0].cancelable) << "an attempt on its own is cancellable";
  Submit(At(1, 1, "same"));
  ASSERT_TRUE(WaitForReturned(1));
  gone->Cancel();
  store_.Hold(false);
  ASSERT_TRUE(WaitForFinished(2));
  JoinAll();
  EXPECT_EQ(OutcomeOf("first").status().code(), StatusCode::kUnavailable);
  auto same = OutcomeOf("same");
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(same->status, SettleStatus::kSettled);
  EXPECT_EQ(store_.PayloadsOf(1), (std::vector<int64_t>{1, 1}));
}

// Shutdown: the lobby stops by joining its DB workers. A request queued behind a running
// transaction returns at once, and the worker still in Settle answers it before returning.
TEST_F(SettlementSchedulerTest, QueuedAttemptsAreAnsweredBeforeTheLastSettleCallReturns) {
  Start();
  Submit(At(1, 1, "running"));
  ASSERT_TRUE(store_.WaitForCalls(1));
  Queue(At(1, 2, "waiting"));
  Queue(At(2, 1, "ready"));
  EXPECT_EQ(Answered(), 0u);
  store_.Hold(false);
  JoinAll();
  EXPECT_EQ(Answered(), 3u) << "a worker returned with attempts unanswered";
  EXPECT_EQ(scheduler_->rooms_in_turn(), 0u);
}

// Many workers, few rooms, every kind of outcome: once every call of Settle has returned, every
// attempt has been answered exactly once, no room was in two transactions at once, and no room
// is left in turn.
TEST_F(SettlementSchedulerTest, EveryAttemptIsAnsweredOnceEverySettleCallHasReturned) {
  options_.coalesce_wait = 1ms;
  options_.settle_concurrency = 3;
  options_.max_batch_rooms = 4;
  std::atomic<int> transactions{0};
  store_.Hold(false);
  store_.AnswerWith([&](const Call& call, Cancellation*) {
    // Each transaction takes the coalescing wait's time, so no wait for company outlasts the
    // transaction it waits beside.
    clock_.AdvanceMs(1);
    const int n = ++transactions;
    if (n % 7 == 0) return AllFailed(call, UnavailableError("connection lost"));
    if (n % 11 == 0 && call.rooms.size() > 1) return AllFailed(call, InternalError("refused"));
    Outcomes outcomes = AllSettled(call);
    if (n % 5 == 0 && !call.wait) outcomes[0]->status = SettleStatus::kBusy;
    return outcomes;
  });
  Start();
  constexpr int kWorkers = 6;
  constexpr int kRequests = 40;
  for (int w = 0; w < kWorkers; ++w) {
    threads_.emplace_back([this, w] {
      for (int r = 0; r < kRequests; ++r) {
        std::vector<Attempt> request;
        request.push_back(
            At(1 + (w + r) % 5, r % 3, "w" + std::to_string(w) + "r" + std::to_string(r)));
        if (r % 4 == 0)
          request.push_back(At(6 + w, r, "w" + std::to_string(w) + "r" + std::to_string(r) + "b"));
        scheduler_->Settle(std::move(request));
      }
    });
  }
  JoinAll();
  EXPECT_EQ(Answered(), static_cast<size_t>(kWorkers * (kRequests + kRequests / 4)));
  std::lock_guard lock(mu_);
  for (const auto& [name, outcomes] : outcomes_) {
    EXPECT_EQ(outcomes.size(), 1u) << name;
  }
  EXPECT_TRUE(store_.overlapped().empty());
  EXPECT_EQ(scheduler_->rooms_in_turn(), 0u);
}

}  // namespace
}  // namespace verdict::lobby
