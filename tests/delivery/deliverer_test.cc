// The deliverer against a scripted in-process fake lobby: what is acked, dead-lettered or
// retried, backoff on a simulated clock, per-room order, parallelism across shards, idle
// behaviour, failover and stop; 2xx answers that are not receipts, a refused token, and a shard
// loop that throws. Most tests pin the single endpoint (batch 1); the Batch tests send batches:
// one record per room, per-item outcomes, replies that do not match, and the fallback to single
// requests.
#include "delivery/deliverer.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <future>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include <spdlog/sinks/ostream_sink.h>

#include "common/log.h"
#include "tests/support/failing_outbox.h"
#include "tests/support/fake_lobby.h"
#include "tests/support/results.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace verdict::delivery {
namespace {

using namespace std::chrono_literals;
using testing::FakeLobby;
using testing::FakeReply;
using testing::FakeRequest;
using testing::MakeResult;
using testing::TempDir;

using testing::WaitUntil;

// A simulated clock that counts its reads. Every pass of a shard loop reads the clock at its
// start, and no pass reads it more than a few times, so a count that moved on by a score says
// that whole passes ran since; an idle loop (asleep until woken) does not read it at all.
class CountingClock final : public Clock {
 public:
  int64_t NowMs() const override {
    ++reads_;
    return clock_.NowMs();
  }
  int64_t MonotonicMs() const override {
    ++reads_;
    return clock_.MonotonicMs();
  }
  void AdvanceMs(int64_t ms) { clock_.AdvanceMs(ms); }
  void StepWallMs(int64_t ms) { clock_.StepWallMs(ms); }
  int reads() const { return reads_.load(); }

 private:
  FakeClock clock_;
  mutable std::atomic<int> reads_{0};
};

class DelivererTest : public ::testing::Test {
 protected:
  void OpenOutbox(uint32_t shards = 16) {
    auto opened = storage::OpenOutbox(dir_.path(), {.shard_count = shards});
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    outbox_ = std::move(opened).value();
  }

  void StartDeliverer(std::vector<std::string> urls = {}) {
    DelivererOptions options;
    options.lobby_urls = urls.empty() ? std::vector<std::string>{lobby_.url()} : urls;
    options.token = "token-a";
    options.clock = &clock_;
    options.jitter = jitter_;
    options.initial_backoff = initial_backoff_;
    options.max_backoff = max_backoff_;
    options.attempt_timeout = attempt_timeout_;
    options.unsafe_ignore_room_order_for_test = unsafe_ignore_room_order_;
    options.unsafe_ack_whole_batch_for_test = unsafe_ack_whole_batch_;
    options.batch = batch_;
    options.stop_timeout = stop_timeout_;
    deliverer_ = std::make_unique<Deliverer>(*outbox_, options, &registry_);
    ASSERT_TRUE(deliverer_->Start().ok());
  }

  void Enqueue(const std::vector<v1::BattleResult>& results) {
    auto out = outbox_->Enqueue(results);
    ASSERT_TRUE(out.ok());
    for (const auto& r : *out) ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    if (deliverer_) deliverer_->Wake();
  }

  uint64_t Pending() { return outbox_->Stats()->records; }
  uint64_t DeadLettered() { return outbox_->Stats()->dead_lettered; }

  // Moves simulated time on and tells the deliverer to look again.
  void Advance(std::chrono::milliseconds by) {
    clock_.AdvanceMs(by.count());
    deliverer_->Wake();
  }

  // Wakes a one-shard deliverer until its loop has run at least two whole passes since this
  // call, each of which looked at the clock as it is now: what the loop does at this time, it
  // has done (an attempt it makes is at the lobby) when this returns. Instead of waiting a while
  // for something not to happen, however slow the machine is.
  bool LetTheLoopLookAgain() {
    const int reads = clock_.reads();
    return WaitUntil([&] {
      deliverer_->Wake();
      return clock_.reads() >= reads + 20;
    });
  }

  // Room 7's first record fails twice; room 8 shares the shard and goes out meanwhile.
  // Returns the order in which room 7's records were accepted.
  std::vector<int64_t> DeliverRoomWhoseFirstRecordFailsTwice() {
    lobby_.SetHandler([](const FakeRequest& r) {
      if (r.result.room_id() == 7 && r.result.ended_at_ms() == 1 && r.attempt <= 2) {
        return testing::ProblemReply(503, "UNAVAILABLE", true);
      }
      return FakeReply{};
    });
    OpenOutbox(/*shards=*/1);
    StartDeliverer();
    Enqueue({MakeResult(7, 1), MakeResult(7, 2), MakeResult(7, 3), MakeResult(8, 1)});
    EXPECT_TRUE(WaitUntil([&] { return RetriesOf503() == 1; }));
    Advance(1100ms);  // second failure: backoff doubles to 2 s
    EXPECT_TRUE(WaitUntil([&] { return RetriesOf503() == 2; }));
    Advance(2100ms);
    EXPECT_TRUE(WaitUntil([&] { return Pending() == 0; }));
    std::vector<int64_t> room7;
    for (const auto& r : lobby_.accepted()) {
      if (r.room_id() == 7) room7.push_back(r.ended_at_ms());
    }
    return room7;
  }

  // Rooms 300-302 in one batch: 300 gets its receipt, 301 a retryable problem, 302 a terminal
  // one. Returns {records pending, records dead-lettered} once the batch is acted on.
  std::pair<uint64_t, uint64_t> DeliverABatchWithProblemItems() {
    batch_ = 64;
    lobby_.SetHandler([](const FakeRequest& r) {
      if (r.result.room_id() == 301) return testing::ProblemReply(503, "UNAVAILABLE", true);
      if (r.result.room_id() == 302) return testing::ProblemReply(404, "ROOM_UNKNOWN", false);
      return FakeReply{};
    });
    OpenOutbox(1);
    Enqueue({MakeResult(300), MakeResult(301), MakeResult(302)});
    StartDeliverer();
    // Every record accounted for: resolved (acked or dead-lettered) or its room backing off.
    EXPECT_TRUE(
        WaitUntil([&] { return deliverer_->resolved() + deliverer_->RoomsInBackoff() == 3; }));
    EXPECT_EQ(lobby_.requests().front().batch, 1);
    return {Pending(), DeadLettered()};
  }

  // Rooms 200-202 in one batch, answered 200 by `answer`; waits until all three were retried as
  // bad_receipt.
  void DeliverABatchAnswered(testing::FakeLobby::BatchHandler answer) {
    batch_ = 64;
    lobby_.SetBatchHandler(std::move(answer));
    OpenOutbox(1);
    Enqueue({MakeResult(200), MakeResult(201), MakeResult(202)});
    StartDeliverer();
    ASSERT_TRUE(WaitUntil(
        [&] { return Metric("verdict_node_delivery_retries_total{cause=\"bad_receipt\"}") == 3; }));
    EXPECT_EQ(deliverer_->RoomsInBackoff(), 3u);
    EXPECT_EQ(Pending(), 3u);
    EXPECT_EQ(DeadLettered(), 0u);
    EXPECT_EQ(Metric("verdict_node_delivered_total{result=\"settled\"}"), 0);
  }

  int RetriesOf503() { return Metric("verdict_node_delivery_retries_total{cause=\"http_503\"}"); }

  // The value of one metric series, 0 while it is absent.
  int Metric(const std::string& series) {
    const std::string text = "\n" + registry_.RenderText();
    const size_t at = text.find("\n" + series + " ");
    return at == std::string::npos ? 0 : std::stoi(text.substr(at + series.size() + 2));
  }

  // Puts a FailingOutbox around the opened outbox; `failing_` points into it.
  void WrapOutbox() {
    auto wrapped = std::make_unique<testing::FailingOutbox>(std::move(outbox_));
    failing_ = wrapped.get();
    outbox_ = std::move(wrapped);
  }

  // Rooms 60-62 meet a lobby that refuses the token with `status` until `refuse` is cleared.
  void DeliverPastARefusedToken(int status) {
    std::atomic<bool> refuse{true};
    lobby_.SetHandler([&](const FakeRequest&) {
      return refuse ? testing::ProblemReply(status, "UNAUTHENTICATED", false) : FakeReply{};
    });
    OpenOutbox();
    StartDeliverer();
    Enqueue({MakeResult(60), MakeResult(61), MakeResult(62)});
    ASSERT_TRUE(WaitUntil([&] { return deliverer_->auth_failing(); }));
    EXPECT_EQ(Metric("verdict_node_lobby_auth_failing"), 1);
    ASSERT_TRUE(lobby_.WaitForRequests(1, 5s));
    EXPECT_EQ(DeadLettered(), 0u) << "a refused token dead-lettered results";
    EXPECT_EQ(Pending(), 3u);
    EXPECT_EQ(deliverer_->RoomsInBackoff(), 0u) << "the node pauses, not the rooms";

    refuse = false;  // the token works again (rotation finished)
    // Time moves on past every pause (a refusal still in flight may have started another).
    ASSERT_TRUE(WaitUntil([&] {
      Advance(31s);
      return Pending() == 0;
    }));
    EXPECT_EQ(DeadLettered(), 0u);
    EXPECT_FALSE(deliverer_->auth_failing());
    EXPECT_EQ(Metric("verdict_node_lobby_auth_failing"), 0);
    deliverer_.reset();  // before `refuse` goes out of scope
  }

  TempDir dir_;
  CountingClock clock_;
  FakeLobby lobby_;
  metrics::Registry registry_;
  std::chrono::milliseconds attempt_timeout_ = 5s;
  std::chrono::milliseconds initial_backoff_ = 1s;
  std::chrono::milliseconds max_backoff_ = 30s;
  double jitter_ = 0;
  testing::FailingOutbox* failing_ = nullptr;
  bool unsafe_ignore_room_order_ = false;
  bool unsafe_ack_whole_batch_ = false;
  size_t batch_ = 1;  // today's single requests unless a test asks for batches
  std::chrono::milliseconds stop_timeout_ = 2s;
  std::unique_ptr<storage::Outbox> outbox_;
  std::unique_ptr<Deliverer> deliverer_;
};

TEST_F(DelivererTest, UnavailableThenOkKeepsTheRecordThenDeletesIt) {
  lobby_.SetHandler([](const FakeRequest& r) {
    return r.attempt == 1 ? testing::ProblemReply(503, "UNAVAILABLE", true) : FakeReply{};
  });
  OpenOutbox();
  StartDeliverer();
  Enqueue({MakeResult(1)});
  ASSERT_TRUE(WaitUntil([&] { return deliverer_->RoomsInBackoff() == 1; }));
  EXPECT_EQ(Pending(), 1u) << "a 503 must not remove the record";
  Advance(1500ms);
  ASSERT_TRUE(WaitUntil([&] { return Pending() == 0; }));
  EXPECT_EQ(lobby_.requests().size(), 2u);
  EXPECT_EQ(lobby_.requests()[0].authorization, "Bearer token-a");
  EXPECT_EQ(DeadLettered(), 0u);
}

// Backoffs are waits on the monotonic reading: an operator or NTP stepping the system clock
// neither releases a backed-off room early nor holds it for the size of the step.
TEST_F(DelivererTest, BackoffIgnoresStepsOfTheWallClock) {
  lobby_.SetHandler([](const FakeRequest& r) {
    return r.attempt == 1 ? testing::ProblemReply(503, "UNAVAILABLE", true) : FakeReply{};
  });
  OpenOutbox(/*shards=*/1);
  StartDeliverer();
  Enqueue({MakeResult(4)});
  ASSERT_TRUE(WaitUntil([&] { return deliverer_->RoomsInBackoff() == 1; }));
  clock_.StepWallMs(3'600'000);  // an hour ahead: the 1 s backoff has not passed
  ASSERT_TRUE(LetTheLoopLookAgain());
  EXPECT_EQ(lobby_.requests().size(), 1u) << "a forward step of the wall clock ended the backoff";
  clock_.StepWallMs(-7'200'000);  // an hour behind where it started
  Advance(1500ms);                // past the backoff
  EXPECT_TRUE(WaitUntil([&] { return Pending() == 0; }))
      << "a backward step of the wall clock stretched the backoff";
  EXPECT_EQ(lobby_.requests().size(), 2u);
}

TEST_F(DelivererTest, RecordKeptAfterUnavailableIsDeliveredByTheNextProcess) {
  lobby_.SetHandler([](const FakeRequest& r) {
    return r.attempt == 1 ? testing::ProblemReply(503, "UNAVAILABLE", true) : FakeReply{};
  });
  OpenOutbox();
  StartDeliverer();
  Enqueue({MakeResult(2)});
  ASSERT_TRUE(WaitUntil([&] { return deliverer_->RoomsInBackoff() == 1; }));
  // Restart: the deliverer and the outbox go away and come back; nothing else is kept.
  deliverer_.reset();
  outbox_.reset();
  OpenOutbox();
  EXPECT_EQ(Pending(), 1u);
  StartDeliverer();
  ASSERT_TRUE(WaitUntil([&] { return Pending() == 0; }));
  EXPECT_EQ(lobby_.accepted().size(), 1u);
}

TEST_F(DelivererTest, RetryAfterLongerThanTheBackoffIsRespected) {
  lobby_.SetHandler([](const FakeRequest& r) {
    FakeReply reply = testing::ProblemReply(503, "UNAVAILABLE", true);
    reply.headers.emplace_back("Retry-After", "7");
    return r.attempt == 1 ? reply : FakeReply{};
  });
  OpenOutbox(/*shards=*/1);
  StartDeliverer();
  Enqueue({MakeResult(3)});
  ASSERT_TRUE(WaitUntil([&] { return deliverer_->RoomsInBackoff() == 1; }));
  Advance(5s);  // past the 1 s backoff, short of Retry-After
  ASSERT_TRUE(LetTheLoopLookAgain());
  EXPECT_EQ(lobby_.requests().size(), 1u) << "retried before Retry-After";
  Advance(2500ms);
  ASSERT_TRUE(WaitUntil([&] { return Pending() == 0; }));
  EXPECT_EQ(lobby_.requests().size(), 2u);
}

// A Retry-After of days (a misconfigured lobby or proxy) parked every room of its batch for
// that long, though the lobby was back in seconds: it is obeyed up to the longest backoff.
TEST_F(DelivererTest, RetryAfterIsCappedAtTheLongestBackoff) {
  max_backoff_ = 10s;
  lobby_.SetHandler([](const FakeRequest& r) {
    FakeReply reply = testing::ProblemReply(503, "UNAVAILABLE", true);
    reply.headers.emplace_back("Retry-After", "999999");  // 11.6 days
    return r.attempt == 1 ? reply : FakeReply{};
  });
  OpenOutbox(/*shards=*/1);
  StartDeliverer();
  Enqueue({MakeResult(5)});
  ASSERT_TRUE(WaitUntil([&] { return deliverer_->RoomsInBackoff() == 1; }));
  Advance(9s);  // past the 1 s backoff, short of the cap: Retry-After still counts
  ASSERT_TRUE(LetTheLoopLookAgain());
  EXPECT_EQ(lobby_.requests().size(), 1u) << "retried before the capped Retry-After";
  Advance(1500ms);  // past the cap, days short of the Retry-After
  ASSERT_TRUE(WaitUntil([&] { return Pending() == 0; })) << "Retry-After was not capped";
  EXPECT_EQ(lobby_.requests().size(), 2u);
}

// Jitter spreads retries, but never past the longest backoff (--max-backoff): a room backing
// off at the longest backoff is due again once that much time has passed, every time.
TEST_F(DelivererTest, JitterNeverTakesABackoffPastTheLongest) {
  initial_backoff_ = max_backoff_ = 1s;
  jitter_ = 0.5;  // 0.5 s to 1.5 s before the cap: half the draws would go past it
  lobby_.SetHandler(
      [](const FakeRequest&) { return testing::ProblemReply(503, "UNAVAILABLE", true); });
  OpenOutbox(/*shards=*/1);
  StartDeliverer();
  Enqueue({MakeResult(6)});
  ASSERT_TRUE(WaitUntil([&] { return RetriesOf503() == 1; }));
  for (int retry = 2; retry <= 16; ++retry) {
    Advance(1s);
    ASSERT_TRUE(LetTheLoopLookAgain());
    ASSERT_EQ(RetriesOf503(), retry) << "a backoff went past --max-backoff";
  }
}

// A drain on exit after an outage: the rooms wait out a Retry-After longer than any drain
// deadline. RetryNow probes each at once: a lobby still failing gets one attempt per room and
// then the usual backoff, not a loop; a lobby that is back gets everything, with no time passing.
TEST_F(DelivererTest, RetryNowProbesEveryBackedOffRoomOnceAndDeliversToALobbyThatIsBack) {
  std::atomic<bool> failing{true};
  lobby_.SetHandler([&](const FakeRequest&) {
    if (!failing) return FakeReply{};
    FakeReply reply = testing::ProblemReply(503, "UNAVAILABLE", true);
    reply.headers.emplace_back("Retry-After", "30");
    return reply;
  });
  OpenOutbox(/*shards=*/1);
  StartDeliverer();
  Enqueue({MakeResult(20), MakeResult(21), MakeResult(22)});
  ASSERT_TRUE(WaitUntil([&] { return RetriesOf503() == 3; }));
  deliverer_->RetryNow();
  ASSERT_TRUE(WaitUntil([&] { return RetriesOf503() == 6; })) << "a backed-off room was not probed";
  ASSERT_TRUE(LetTheLoopLookAgain());
  EXPECT_EQ(RetriesOf503(), 6) << "a lobby that still fails was tried in a loop";
  EXPECT_EQ(deliverer_->RoomsInBackoff(), 3u);
  failing = false;
  deliverer_->RetryNow();
  EXPECT_TRUE(WaitUntil([&] { return Pending() == 0; }));
  EXPECT_EQ(lobby_.accepted().size(), 3u);
  deliverer_.reset();  // before `failing` goes out of scope
}

// RetryNow while a request is in flight: its answer was given by a lobby from before the call,
// so the wait it asks for is cut too, and the room goes again at once, with no time passing. (A
// drain on exit began while one attempt was out; its 503 with Retry-After: 30 came back after
// the drain's RetryNow, and the room waited past the drain's deadline.)
TEST_F(DelivererTest, RetryNowAlsoCutsTheWaitOfAnAttemptInFlightAtTheCall) {
  std::promise<void> retried;
  std::shared_future<void> answer = retried.get_future().share();
  std::atomic<int> calls{0};
  lobby_.SetHandler([&calls, answer](const FakeRequest&) {
    if (++calls > 1) return FakeReply{};
    answer.wait();  // the lobby answers once RetryNow has been called
    FakeReply reply = testing::ProblemReply(503, "UNAVAILABLE", true);
    reply.headers.emplace_back("Retry-After", "30");
    return reply;
  });
  OpenOutbox(/*shards=*/1);
  StartDeliverer();
  Enqueue({MakeResult(23)});
  ASSERT_TRUE(WaitUntil([&] { return calls == 1; }));
  deliverer_->RetryNow();
  retried.set_value();
  EXPECT_TRUE(WaitUntil([&] { return Pending() == 0; }))
      << "the room waited out what the answer in flight asked for";
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(lobby_.accepted().size(), 1u);
  deliverer_.reset();  // before the handler's captures go out of scope
}

// What the lobby says goes into the node's log escaped: an ANSI sequence does not reach the
// terminal and a newline in a problem's detail cannot forge a log line of its own.
TEST_F(DelivererTest, TheLobbysProblemDetailIsEscapedInTheLog) {
  std::ostringstream captured;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(captured);
  const std::vector<spdlog::sink_ptr> saved = Log().sinks();
  Log().sinks() = {sink};
  const std::string hostile = "gone\\u001b[2J\\nroom=99 shard=0: FORGED";
  lobby_.SetHandler([&](const FakeRequest& r) {
    const bool terminal = r.result.room_id() == 30;
    const std::string code = terminal ? "ROOM_UNKNOWN" : "UNAVAILABLE";
    FakeReply reply;
    reply.status = terminal ? 404 : 503;
    reply.content_type = "application/problem+json";
    reply.body = "{\"status\":" + std::to_string(reply.status) + ",\"detail\":\"" + hostile +
                 "\",\"code\":\"" + code + "\",\"retryable\":" + (terminal ? "false" : "true") +
                 "}";
    return reply;
  });
  OpenOutbox(/*shards=*/1);
  StartDeliverer();
  Enqueue({MakeResult(30), MakeResult(31)});
  ASSERT_TRUE(WaitUntil([&] { return DeadLettered() == 1 && RetriesOf503() == 1; }));
  deliverer_.reset();
  Log().flush();
  Log().sinks() = saved;
  const std::string log = captured.str();
  EXPECT_NE(log.find("lobby refused the result as final"), std::string::npos) << log;
  EXPECT_EQ(log.find('\x1b'), std::string::npos) << "an escape sequence reached the log";
  EXPECT_EQ(log.find("\nroom=99 shard=0: FORGED"), std::string::npos) << log;
  EXPECT_NE(log.find("gone\\x1b[2J\\nroom=99 shard=0: FORGED"), std::string::npos) << log;
}

// A lobby answering 503 to every result: each room's retry warning goes through the deliverer's
// rate limit (common/log_rate_limit.h), a burst and then a line a second, the next line let
// through saying how many were held back. 10,000 results used to write a line each per attempt.
TEST_F(DelivererTest, RetryWarningsOfAFloodAreRateLimited) {
  std::ostringstream captured;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(captured);
  const std::vector<spdlog::sink_ptr> saved = Log().sinks();
  Log().sinks() = {sink};
  lobby_.SetHandler(
      [](const FakeRequest&) { return testing::ProblemReply(503, "UNAVAILABLE", true); });
  batch_ = 64;
  OpenOutbox(/*shards=*/1);
  StartDeliverer();
  std::vector<v1::BattleResult> results;
  for (uint64_t room = 1; room <= 200; ++room) results.push_back(MakeResult(room));
  Enqueue(results);
  ASSERT_TRUE(WaitUntil([&] { return RetriesOf503() == 200; }));
  Advance(2s);  // every room's backoff (1 s) is over, and two lines' worth of the limit
  ASSERT_TRUE(WaitUntil([&] { return RetriesOf503() == 400; }));
  deliverer_.reset();
  Log().flush();
  Log().sinks() = saved;
  std::istringstream lines(captured.str());
  int retry_lines = 0;
  std::vector<std::string> reporting;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("retrying in") == std::string::npos) continue;
    ++retry_lines;
    if (line.find("suppressed=") != std::string::npos) reporting.push_back(line);
  }
  EXPECT_EQ(retry_lines, 50 + 2) << "the burst, then a line a second for two seconds";
  ASSERT_EQ(reporting.size(), 1u) << captured.str();
  EXPECT_NE(reporting[0].find("shard=0 suppressed=150: "), std::string::npos) << reporting[0];
}

// A full disk under the outbox: the lobby's receipts cannot be acked. What the lobby settled is
// never sent again (2,000 results used to be sent 14,970 times in 8 s): the records wait in
// memory as settled and only their acks are retried, with a backoff up to the longest; Health
// (/healthz) says outbox writes are failing until the acks are written.
TEST_F(DelivererTest, ASettledRecordWhoseAckFailsIsNeverSentAgain) {
  batch_ = 64;
  OpenOutbox(/*shards=*/1);
  WrapOutbox();
  failing_->set_fail_acks(true);
  StartDeliverer();
  std::vector<v1::BattleResult> results;
  for (uint64_t room = 1; room <= 20; ++room) results.push_back(MakeResult(room));
  Enqueue(results);
  ASSERT_TRUE(WaitUntil([&] { return lobby_.requests().size() == 20u; }));
  EXPECT_TRUE(WaitUntil([&] { return !deliverer_->Health().ok(); }));
  EXPECT_NE(deliverer_->Health().message().find("outbox writes are failing"), std::string::npos)
      << deliverer_->Health().ToString();
  // Ten of the longest backoffs pass, the loop looking again after each.
  for (int i = 0; i < 10; ++i) {
    Advance(31s);
    ASSERT_TRUE(LetTheLoopLookAgain());
  }
  EXPECT_EQ(lobby_.requests().size(), 20u) << "a result the lobby settled was sent again";
  EXPECT_GE(failing_->failed_acks(), 10) << "the acks were not retried";
  EXPECT_EQ(Pending(), 20u);
  EXPECT_FALSE(deliverer_->Health().ok());

  failing_->set_fail_acks(false);
  Advance(31s);
  ASSERT_TRUE(WaitUntil([&] { return Pending() == 0; }));
  EXPECT_TRUE(WaitUntil([&] { return deliverer_->Health().ok(); }))
      << deliverer_->Health().ToString();
  EXPECT_EQ(lobby_.requests().size(), 20u);
  EXPECT_EQ(Metric("verdict_node_delivered_total{result=\"settled\"}"), 20);
  EXPECT_EQ(deliverer_->acked(), 20u);
}

// A loop restarted while acks were failing drops what waited for its ack, reads the shard again
// and resends it (the lobby answers duplicate): once those acks are written by the ordinary path,
// the shard is healthy again. It stayed "outbox writes are failing" for good.
TEST_F(DelivererTest, ALoopRestartedWhileAcksFailedIsHealthyOnceTheyAreWritten) {
  initial_backoff_ = 5ms;  // the restart backoff, in real time
  OpenOutbox(/*shards=*/1);
  WrapOutbox();
  failing_->set_fail_acks(true);
  StartDeliverer();
  std::vector<v1::BattleResult> results;
  for (uint64_t room = 1; room <= 5; ++room) results.push_back(MakeResult(room));
  Enqueue(results);
  ASSERT_TRUE(WaitUntil([&] { return lobby_.requests().size() == 5u; }));
  ASSERT_TRUE(WaitUntil([&] { return !deliverer_->Health().ok(); }));
  failing_->set_fail_acks(false);
  failing_->set_throw_on_reads(true);
  Enqueue({MakeResult(6)});  // the loop reads the shard, and throws
  const std::string restarts = "verdict_node_delivery_loop_restarts_total{shard=\"0\"}";
  ASSERT_TRUE(WaitUntil([&] { return Metric(restarts) >= 1; }));
  failing_->set_throw_on_reads(false);
  ASSERT_TRUE(WaitUntil([&] { return Pending() == 0; }, 30s));
  EXPECT_TRUE(WaitUntil([&] { return deliverer_->Health().ok(); }))
      << deliverer_->Health().ToString();
}

TEST_F(DelivererTest, TimeoutKeepsTheRecord) {
  attempt_timeout_ = 200ms;
  lobby_.SetHandler([](const FakeRequest& r) {
    FakeReply reply;
    if (r.attempt == 1) reply.delay = 1000ms;  // answers long after the client gave up
    return reply;
  });
  OpenOutbox();
  StartDeliverer();
  Enqueue({MakeResult(4)});
  ASSERT_TRUE(WaitUntil([&] { return deliverer_->RoomsInBackoff() == 1; }));
  EXPECT_EQ(Pending(), 1u);
  Advance(1500ms);
  ASSERT_TRUE(WaitUntil([&] { return Pending() == 0; }));
  EXPECT_NE(registry_.RenderText().find("verdict_node_delivery_retries_total{cause=\"timeout\"} 1"),
            std::string::npos)
      << registry_.RenderText();
}

TEST_F(DelivererTest, TerminalProblemIsDeadLetteredWithItsCode) {
  lobby_.SetHandler(
      [](const FakeRequest&) { return testing::ProblemReply(409, "OUTCOME_CONFLICT", false); });
  OpenOutbox();
  StartDeliverer();
  Enqueue({MakeResult(5)});
  ASSERT_TRUE(WaitUntil([&] { return DeadLettered() == 1; }));
  EXPECT_EQ(Pending(), 0u);
  auto letters = outbox_->ListSide(storage::SideArea::kDeadLetter, 5);
  ASSERT_TRUE(letters.ok());
  ASSERT_EQ(letters->size(), 1u);
  EXPECT_EQ(letters->front().reason, "OUTCOME_CONFLICT");
  EXPECT_EQ(letters->front().detail, "scripted OUTCOME_CONFLICT");
  EXPECT_EQ(lobby_.requests().size(), 1u) << "a terminal answer is not retried";
  // Counted once the move is durable, on the loop's thread after the disk thread's write.
  EXPECT_TRUE(WaitUntil(
      [&] { return Metric("verdict_node_dead_lettered_total{code=\"OUTCOME_CONFLICT\"}") == 1; }));
}

// A room the lobby settled so long ago that its receipt is past retention: 410 ORIGINAL_EXPIRED
// (retryable false) says the result was delivered then. It is acked and counted, never
// dead-lettered, whether it came alone or as a batch's item.
TEST_F(DelivererTest, OriginalExpiredIsAckedAndCountedNeverDeadLettered) {
  for (size_t batch : {size_t{1}, size_t{64}}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    TempDir dir;
    FakeLobby lobby;
    lobby.SetHandler([](const FakeRequest& r) {
      if (r.result.room_id() == 5) return testing::ProblemReply(410, "ORIGINAL_EXPIRED", false);
      return FakeReply{};
    });
    auto opened = storage::OpenOutbox(dir.path(), {.shard_count = 1});
    ASSERT_TRUE(opened.ok());
    metrics::Registry registry;
    DelivererOptions options;
    options.lobby_urls = {lobby.url()};
    options.token = "token-a";
    options.clock = &clock_;
    options.batch = batch;
    Deliverer deliverer(**opened, options, &registry);
    const std::vector<v1::BattleResult> results = {MakeResult(5), MakeResult(6)};
    ASSERT_TRUE((*opened)->Enqueue(results).ok());
    ASSERT_TRUE(deliverer.Start().ok());
    ASSERT_TRUE(WaitUntil([&] { return (*opened)->Stats()->records == 0; }));
    deliverer.Stop();
    EXPECT_EQ((*opened)->Stats()->dead_lettered, 0u);
    const std::string text = registry.RenderText();
    EXPECT_NE(text.find("verdict_node_delivery_expired_total 1\n"), std::string::npos) << text;
    EXPECT_NE(text.find("verdict_node_delivered_total{result=\"settled\"} 1\n"), std::string::npos)
        << text;
    EXPECT_EQ(text.find("verdict_node_dead_lettered_total{"), std::string::npos) << text;
  }
}

TEST_F(DelivererTest, AnswersWithoutATerminalProblemAreRetried) {
  // A proxy's bare 404, a 429 and a 502, and a problem that says it is retryable.
  std::vector<FakeReply> replies(4);
  replies[0].status = 404;
  replies[0].content_type = "text/html";
  replies[0].body = "<html>not found</html>";
  replies[1].status = 429;
  replies[1].content_type = "text/plain";
  replies[2].status = 502;
  replies[3] = testing::ProblemReply(409, "SOMETHING", true);
  std::map<uint64_t, FakeReply> by_room;
  for (uint64_t i = 0; i < 4; ++i) by_room[10 + i] = replies[i];
  lobby_.SetHandler([&](const FakeRequest& r) { return by_room.at(r.result.room_id()); });
  OpenOutbox();
  StartDeliverer();
  Enqueue({MakeResult(10), MakeResult(11), MakeResult(12), MakeResult(13)});
  ASSERT_TRUE(WaitUntil([&] { return deliverer_->RoomsInBackoff() == 4; }));
  EXPECT_EQ(Pending(), 4u);
  EXPECT_EQ(DeadLettered(), 0u);
}

TEST_F(DelivererTest, PerRoomOrderHoldsWhileAnotherRoomFlows) {
  EXPECT_EQ(DeliverRoomWhoseFirstRecordFailsTwice(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(lobby_.accepted()[0].room_id(), 8u) << "the other room waited behind room 7";
  // Nothing of room 7 was even attempted before its first record got through.
  for (const auto& req : lobby_.requests()) {
    if (req.result.room_id() != 7) continue;
    if (req.result.ended_at_ms() == 1 && req.attempt == 3) break;  // its first success
    EXPECT_EQ(req.result.ended_at_ms(), 1) << "a later record overtook the first";
  }
}

// Negative control: holding back only the failed record lets the room's later records
// overtake it, and the same check sees the order broken.
TEST_F(DelivererTest, NegativeControlIgnoringRoomOrderIsCaught) {
  unsafe_ignore_room_order_ = true;
  EXPECT_NE(DeliverRoomWhoseFirstRecordFailsTwice(), (std::vector<int64_t>{1, 2, 3}));
}

TEST_F(DelivererTest, SixteenShardsDeliverInParallel) {
  lobby_.SetHandler([](const FakeRequest&) {
    FakeReply reply;
    reply.delay = 50ms;
    return reply;
  });
  OpenOutbox(16);
  // Three rooms for every shard.
  std::vector<v1::BattleResult> results;
  std::map<uint32_t, int> per_shard;
  for (uint64_t room = 1; results.size() < 48; ++room) {
    if (per_shard[storage::RoomShard(room, 16)]++ < 3) results.push_back(MakeResult(room));
  }
  Enqueue(results);
  StartDeliverer();
  ASSERT_TRUE(WaitUntil([&] { return Pending() == 0; }, 30s));
  EXPECT_GE(lobby_.max_in_flight(), 12);
  EXPECT_EQ(lobby_.accepted().size(), 48u);
}

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// Idle, every loop sleeps until woken: from the moment each has read its empty shard, none
// runs another pass (none reads the clock or its shard) for as long as the test watches.
TEST_F(DelivererTest, IdleDelivererUsesNoCpuAndWakesOnEnqueue) {
  OpenOutbox();
  WrapOutbox();
  StartDeliverer();
  const auto every_shard_read = [&](int times) {
    for (uint32_t s = 0; s < outbox_->shard_count(); ++s) {
      if (failing_->reads_of(s) != times) return false;
    }
    return true;
  };
  // A loop reads the clock at the start of its pass, before it reads its shard.
  ASSERT_TRUE(WaitUntil([&] { return every_shard_read(1); })) << "a loop did not start";
  const int clock_reads = clock_.reads();
  const double before = CpuSeconds();
  std::this_thread::sleep_for(2s);  // the watch: what must not happen has this long to happen
  const double used = CpuSeconds() - before;
  EXPECT_EQ(clock_.reads(), clock_reads) << "an idle loop ran another pass";
  EXPECT_TRUE(every_shard_read(1)) << "an idle loop read its shard again";
  EXPECT_LT(used, 0.05) << "an idle deliverer burned " << used << " s of CPU in 2 s";
  Enqueue({MakeResult(9)});
  EXPECT_TRUE(lobby_.WaitForAccepted(1, 2s)) << "an enqueue did not wake the deliverer";
}

TEST_F(DelivererTest, UnreachableLobbyBacksOffTheShardAndFailsOver) {
  OpenOutbox(/*shards=*/1);
  StartDeliverer({testing::UnreachableUrl()});
  Enqueue({MakeResult(20)});
  const std::string once = "verdict_node_delivery_retries_total{cause=\"connect\"} 1\n";
  ASSERT_TRUE(WaitUntil([&] { return registry_.RenderText().find(once) != std::string::npos; }));
  // The whole shard now waits: no second connection attempt until time moves on, however often
  // its loop looks.
  ASSERT_TRUE(LetTheLoopLookAgain());
  EXPECT_NE(registry_.RenderText().find(once), std::string::npos) << "hammered a dead lobby";
  EXPECT_EQ(Pending(), 1u);

  deliverer_.reset();
  StartDeliverer({testing::UnreachableUrl(), lobby_.url()});  // the second URL answers
  ASSERT_TRUE(WaitUntil([&] { return Pending() == 0; }));
}

TEST_F(DelivererTest, StaleKeepAliveConnectionIsRetriedOnAFreshOne) {
  // The fake drops every connection after answering, without saying so.
  lobby_.SetHandler([](const FakeRequest&) {
    FakeReply reply;
    reply.close_after_reply = true;
    return reply;
  });
  OpenOutbox(1);
  StartDeliverer();
  Enqueue({MakeResult(30)});
  ASSERT_TRUE(WaitUntil([&] { return Pending() == 0; }));
  std::this_thread::sleep_for(100ms);  // let the dropped connection's FIN arrive
  Enqueue({MakeResult(31)});
  ASSERT_TRUE(WaitUntil([&] { return Pending() == 0; }));
  EXPECT_EQ(deliverer_->RoomsInBackoff(), 0u);
  EXPECT_EQ(registry_.RenderText().find("verdict_node_delivery_retries_total{"), std::string::npos)
      << "a stale connection should cost a reconnect, not a retry: " << registry_.RenderText();
}

// A Wake that comes while a shard read is on the disk thread announces records the read may
// have missed: the loop must read again rather than sleep until the next Wake. The loop's
// first read is held with its (empty) page until the record is enqueued and the Wake posted;
// the strand runs that Wake before the read's continuation, so without the fix the record would
// wait for another Wake that never comes.
TEST_F(DelivererTest, WakeDuringAShardReadIsNotForgotten) {
  OpenOutbox(/*shards=*/1);
  WrapOutbox();
  failing_->set_hold_reads(true);
  StartDeliverer();
  ASSERT_TRUE(WaitUntil([&] { return failing_->held_reads() == 1; }));
  Enqueue({MakeResult(45)});
  failing_->set_hold_reads(false);
  EXPECT_TRUE(lobby_.WaitForAccepted(1, 10s)) << "the Wake during the read was forgotten";
  EXPECT_TRUE(WaitUntil([&] { return Pending() == 0; }));
}

TEST_F(DelivererTest, StopAbandonsAnAttemptInFlightWithoutLosingTheRecord) {
  // The lobby holds the request until the test lets it go (30 s at most) and then answers with
  // the room's receipt; the attempt and Stop would both wait a minute. A Stop that waited for the
  // attempt instead of abandoning it would return only after the lobby had answered.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  lobby_.SetHandler([released](const FakeRequest&) {
    released.wait_for(30s);
    return FakeReply{};
  });
  stop_timeout_ = 60s;
  attempt_timeout_ = 60s;
  OpenOutbox();
  StartDeliverer();
  Enqueue({MakeResult(40)});
  ASSERT_TRUE(lobby_.WaitForRequests(1, 5s));
  deliverer_->Stop();
  EXPECT_TRUE(lobby_.accepted().empty()) << "Stop waited for the lobby's answer";
  release.set_value();
  EXPECT_EQ(Pending(), 1u);
  EXPECT_TRUE(lobby_.WaitForAccepted(1, 5s)) << "the lobby never answered the held request";
  EXPECT_EQ(Pending(), 1u) << "an answer that came after Stop acked the record";
}

// A proxy, a health page or a misrouted ingress answering 200 settles nothing: only the lobby's
// receipt for the same room and outcome acks a record.
TEST_F(DelivererTest, TwoHundredWithoutTheRoomsReceiptAcksNothing) {
  lobby_.SetHandler([](const FakeRequest& r) {
    FakeReply reply;
    if (r.result.room_id() == 70) {  // an HTML page
      reply.content_type = "text/html";
      reply.body = "<html><body>Welcome</body></html>";
    } else if (r.result.room_id() == 71) {  // another room's receipt
      v1::SettlementReceipt other;
      other.set_room_id(999);
      other.set_outcome(v1::SETTLED);
      reply.body = other.SerializeAsString();
    } else if (r.result.room_id() == 72) {  // the room's receipt with the other outcome
      reply.content_type = "application/json";
      reply.body = R"({"room_id": "72", "outcome": "ABORTED"})";
    }
    return reply;  // room 73: the fake's own receipt for it
  });
  OpenOutbox();
  StartDeliverer();
  Enqueue({MakeResult(70), MakeResult(71), MakeResult(72), MakeResult(73)});
  ASSERT_TRUE(WaitUntil([&] {
    return deliverer_->RoomsInBackoff() == 3 &&
           Metric("verdict_node_delivered_total{result=\"settled\"}") == 1;
  }));
  EXPECT_EQ(Metric("verdict_node_delivery_retries_total{cause=\"bad_receipt\"}"), 3);
  EXPECT_EQ(Pending(), 3u);
  auto kept = outbox_->ListSide(storage::SideArea::kDeadLetter, std::nullopt);
  EXPECT_TRUE(kept.ok() && kept->empty());

  Advance(1500ms);  // they are retried, and kept again
  ASSERT_TRUE(WaitUntil(
      [&] { return Metric("verdict_node_delivery_retries_total{cause=\"bad_receipt\"}") == 6; }));
  EXPECT_EQ(Pending(), 3u);
  EXPECT_EQ(DeadLettered(), 0u);
}

TEST_F(DelivererTest, UnauthorizedPausesDeliveryDeadLettersNothingAndResumes) {
  DeliverPastARefusedToken(401);
}

TEST_F(DelivererTest, ForbiddenPausesDeliveryDeadLettersNothingAndResumes) {
  DeliverPastARefusedToken(403);
}

// The token is swapped at runtime (SIGHUP in verdict-node): delivery resumes at once, without
// waiting out the pause (the simulated clock never moves here).
TEST_F(DelivererTest, ReplacedTokenResumesDeliveryAtOnce) {
  lobby_.SetHandler([](const FakeRequest& r) {
    return r.authorization == "Bearer token-b"
               ? FakeReply{}
               : testing::ProblemReply(401, "UNAUTHENTICATED", false);
  });
  OpenOutbox();
  StartDeliverer();  // with token-a
  Enqueue({MakeResult(80), MakeResult(81)});
  ASSERT_TRUE(WaitUntil([&] { return deliverer_->auth_failing(); }));
  EXPECT_EQ(Pending(), 2u);

  ASSERT_TRUE(deliverer_->SetToken("token-b").ok());
  ASSERT_TRUE(WaitUntil([&] { return Pending() == 0; }));
  EXPECT_EQ(lobby_.requests().back().authorization, "Bearer token-b");
  EXPECT_EQ(DeadLettered(), 0u);
  EXPECT_FALSE(deliverer_->auth_failing());
}

// With lobby URLs A,B where A refuses the token (its token list is behind during a rotation)
// and B takes it, every shard moves on to B at once: nothing pauses, no alert, all delivered.
// Without moving on, every shard paused on A's refusal and never tried B.
TEST_F(DelivererTest, ATokenRefusedByOneLobbyUrlIsTriedAtTheNext) {
  FakeLobby refusing;
  refusing.SetHandler(
      [](const FakeRequest&) { return testing::ProblemReply(401, "UNAUTHENTICATED", false); });
  OpenOutbox();
  StartDeliverer({refusing.url(), lobby_.url()});
  std::vector<v1::BattleResult> results;
  for (uint64_t room = 100; room < 140; ++room) results.push_back(MakeResult(room));
  Enqueue(results);
  // The simulated clock never moves: a pause would never end.
  ASSERT_TRUE(WaitUntil([&] { return Pending() == 0; })) << "results waited on the refusing URL";
  EXPECT_EQ(lobby_.accepted().size(), results.size());
  EXPECT_GE(refusing.requests().size(), 1u) << "the first URL was never tried";
  EXPECT_FALSE(deliverer_->auth_failing());
  EXPECT_EQ(Metric("verdict_node_lobby_auth_failing"), 0);
  EXPECT_EQ(DeadLettered(), 0u);
}

// When every URL refuses the token it is about the node: every shard pauses, with the alert.
TEST_F(DelivererTest, ATokenRefusedByEveryLobbyUrlPausesTheNode) {
  FakeLobby refusing;
  refusing.SetHandler(
      [](const FakeRequest&) { return testing::ProblemReply(403, "UNAUTHENTICATED", false); });
  lobby_.SetHandler(
      [](const FakeRequest&) { return testing::ProblemReply(401, "UNAUTHENTICATED", false); });
  OpenOutbox(/*shards=*/1);
  StartDeliverer({refusing.url(), lobby_.url()});
  Enqueue({MakeResult(150)});
  ASSERT_TRUE(WaitUntil([&] { return deliverer_->auth_failing(); }));
  ASSERT_TRUE(LetTheLoopLookAgain());
  EXPECT_EQ(refusing.requests().size() + lobby_.requests().size(), 2u)
      << "the paused shard kept asking";
  EXPECT_EQ(Pending(), 1u);
  EXPECT_EQ(DeadLettered(), 0u);
}

// A token with a stray newline (read from a file) made every request malformed: the lobby
// answered 400 to each, retried forever while lobby_auth_failing said 0. It is refused where it
// enters: at start, and when replaced (the old one stays).
TEST_F(DelivererTest, ATokenThatCannotGoInAHeaderIsRefusedAtStartAndWhenReplaced) {
  OpenOutbox(/*shards=*/1);
  for (const std::string bad : {"token-a\n", "token a", "", "t\xc3\xa9"}) {
    DelivererOptions options;
    options.lobby_urls = {lobby_.url()};
    options.token = bad;
    Deliverer deliverer(*outbox_, options, nullptr);
    const Status started = deliverer.Start();
    EXPECT_EQ(started.code(), StatusCode::kInvalidArgument)
        << "token of " << bad.size() << " bytes";
    EXPECT_NE(started.message().find("lobby token"), std::string::npos) << started.message();
    EXPECT_EQ(started.message().find(bad.empty() ? "\x01" : bad), std::string::npos)
        << "the message quotes the token";
  }
  StartDeliverer();
  const Status replaced = deliverer_->SetToken("token-b\r\n");
  EXPECT_EQ(replaced.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(replaced.message().find("0x0d at offset 7"), std::string::npos) << replaced.message();
  Enqueue({MakeResult(160)});
  ASSERT_TRUE(WaitUntil([&] { return Pending() == 0; }));
  EXPECT_EQ(lobby_.requests().back().authorization, "Bearer token-a") << "the old token stays";
}

// A batch the lobby refuses as a whole with a 4xx (its HTTP core could not read the request, as
// with a stray newline in the token) is about the node, not a result: every record is kept and
// none dead-lettered, and the node reports itself unhealthy until a request gets through,
// instead of retrying for ever with nothing but warnings.
TEST_F(DelivererTest, ABatchRefusedWholeKeepsItsRecordsAndTheNodeIsUnhealthyUntilOneGetsThrough) {
  batch_ = 64;
  std::atomic<bool> refuse{true};
  lobby_.SetBatchHandler([&](const std::vector<FakeRequest>&) -> std::optional<FakeReply> {
    if (refuse) return testing::ProblemReply(400, "INVALID_ARGUMENT", false);
    return std::nullopt;  // item by item: receipts
  });
  OpenOutbox(/*shards=*/1);
  Enqueue({MakeResult(170), MakeResult(171)});
  StartDeliverer();
  ASSERT_TRUE(WaitUntil([&] { return !deliverer_->Health().ok(); })) << "refused in silence";
  const Status health = deliverer_->Health();
  EXPECT_EQ(health.code(), StatusCode::kUnavailable);
  EXPECT_NE(health.message().find("refuses this node's requests as a whole (http_400"),
            std::string::npos)
      << health.message();
  EXPECT_EQ(Pending(), 2u);
  EXPECT_EQ(DeadLettered(), 0u);
  EXPECT_FALSE(deliverer_->auth_failing());

  refuse = false;
  ASSERT_TRUE(WaitUntil([&] {
    Advance(1500ms);
    return Pending() == 0;
  }));
  EXPECT_TRUE(deliverer_->Health().ok());
  EXPECT_EQ(DeadLettered(), 0u);
  deliverer_.reset();  // before `refuse` goes out of scope
}

// A loop that throws is restarted with backoff and counted; while it keeps failing the
// deliverer reports it unhealthy, and once the fault is gone the shard delivers again.
TEST_F(DelivererTest, ShardLoopThatThrowsIsRestartedAndReportedUntilItRecovers) {
  initial_backoff_ = 5ms;  // the restart backoff, in real time
  OpenOutbox(1);
  WrapOutbox();
  failing_->set_throw_on_reads(true);
  Enqueue({MakeResult(90)});
  StartDeliverer();
  const std::string restarts = "verdict_node_delivery_loop_restarts_total{shard=\"0\"}";
  ASSERT_TRUE(WaitUntil([&] { return Metric(restarts) >= 3; }));
  const Status health = deliverer_->Health();
  EXPECT_EQ(health.code(), StatusCode::kUnavailable);
  EXPECT_NE(health.message().find("shard 0"), std::string::npos) << health.message();
  EXPECT_NE(health.message().find("a bug in the read path"), std::string::npos);
  EXPECT_EQ(Pending(), 1u);

  failing_->set_throw_on_reads(false);
  ASSERT_TRUE(WaitUntil([&] { return Pending() == 0; }, 30s)) << "the loop was not restarted";
  EXPECT_TRUE(WaitUntil([&] { return deliverer_->Health().ok(); }));
  EXPECT_EQ(lobby_.accepted().size(), 1u);
}

TEST_F(DelivererTest, BatchOfOneSendsEachRecordAloneToTheSingleEndpoint) {
  OpenOutbox(1);
  StartDeliverer();
  Enqueue({MakeResult(400), MakeResult(401), MakeResult(400, 2)});
  ASSERT_TRUE(WaitUntil([&] { return Pending() == 0; }));
  ASSERT_EQ(lobby_.requests().size(), 3u);
  for (const auto& r : lobby_.requests()) EXPECT_EQ(r.batch, 0) << r.result.room_id();
  EXPECT_EQ(Metric("verdict_node_delivery_batches_total"), 0);
}

// Five rooms with three records each, stored room after room in one shard, batches of at most
// four: each batch holds at most one record per room (the first of each room in the window),
// and each room's records are settled in order.
TEST_F(DelivererTest, BatchesHoldOneRecordPerRoomAndKeepEachRoomsOrder) {
  batch_ = 4;
  OpenOutbox(1);
  std::vector<v1::BattleResult> results;
  for (uint64_t room = 1; room <= 5; ++room) {
    for (int64_t ended = 1; ended <= 3; ++ended) results.push_back(MakeResult(room, ended));
  }
  Enqueue(results);
  StartDeliverer();
  ASSERT_TRUE(WaitUntil([&] { return Pending() == 0; }));
  std::map<int, std::vector<uint64_t>> rooms_of_batch;
  std::map<uint64_t, std::vector<int64_t>> order_of_room;
  for (const auto& r : lobby_.requests()) {
    ASSERT_GT(r.batch, 0) << "a single request at batch 4";
    rooms_of_batch[r.batch].push_back(r.result.room_id());
    order_of_room[r.result.room_id()].push_back(r.result.ended_at_ms());
  }
  size_t largest = 0;
  for (auto& [batch, rooms] : rooms_of_batch) {
    largest = std::max(largest, rooms.size());
    std::sort(rooms.begin(), rooms.end());
    EXPECT_EQ(std::adjacent_find(rooms.begin(), rooms.end()), rooms.end())
        << "two records of one room in batch " << batch;
  }
  EXPECT_EQ(largest, 4u);
  // Rooms 1-4 go three times four at a time, then room 5 alone three times.
  EXPECT_EQ(rooms_of_batch.size(), 6u);
  for (const auto& [room, order] : order_of_room) {
    EXPECT_EQ(order, (std::vector<int64_t>{1, 2, 3})) << "room " << room;
  }
  EXPECT_EQ(Metric("verdict_node_delivery_batches_total"), 6);
  EXPECT_EQ(Metric("verdict_node_delivery_batch_records_count"), 6);
  EXPECT_EQ(Metric("verdict_node_delivery_batch_records_sum"), 15);
}

// Per item: the receipt acks, the terminal problem dead-letters with its code, the retryable
// problem backs off only its room, and that room's next record waits behind it.
TEST_F(DelivererTest, BatchItemsAckDeadLetterOrBackOffTheirOwnRecord) {
  batch_ = 64;
  lobby_.SetHandler([](const FakeRequest& r) {
    if (r.result.room_id() == 101) return testing::ProblemReply(422, "ROSTER_MISMATCH", false);
    if (r.result.room_id() == 102 && r.result.ended_at_ms() == 1 && r.attempt == 1) {
      return testing::ProblemReply(503, "UNAVAILABLE", true);
    }
    return FakeReply{};
  });
  OpenOutbox(1);
  Enqueue(
      {MakeResult(100), MakeResult(101), MakeResult(102, 1), MakeResult(102, 2), MakeResult(103)});
  StartDeliverer();
  ASSERT_TRUE(WaitUntil([&] {
    return DeadLettered() == 1 && deliverer_->RoomsInBackoff() == 1 &&
           Metric("verdict_node_delivered_total{result=\"settled\"}") == 2;
  }));
  EXPECT_EQ(Pending(), 2u);  // room 102's two records
  auto letters = outbox_->ListSide(storage::SideArea::kDeadLetter, 101);
  ASSERT_TRUE(letters.ok());
  ASSERT_EQ(letters->size(), 1u);
  EXPECT_EQ(letters->front().reason, "ROSTER_MISMATCH");
  EXPECT_EQ(Metric("verdict_node_delivery_retries_total{cause=\"http_503\"}"), 1);
  for (const auto& r : lobby_.requests()) {
    EXPECT_FALSE(r.result.room_id() == 102 && r.result.ended_at_ms() == 2)
        << "room 102's second record went out while its first was backing off";
  }

  Advance(1100ms);
  ASSERT_TRUE(WaitUntil([&] { return Pending() == 0; }));
  std::vector<int64_t> room102;
  for (const auto& r : lobby_.accepted()) {
    if (r.room_id() == 102) room102.push_back(r.ended_at_ms());
  }
  EXPECT_EQ(room102, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(DeadLettered(), 1u);
}

// Items that do not line up with the results settle nothing: every record is kept and retried.
v1::SettlementBatchReply ReceiptsFor(const std::vector<FakeRequest>& requests) {
  v1::SettlementBatchReply reply;
  for (const auto& r : requests) {
    v1::SettlementReceipt* receipt = reply.add_items()->mutable_receipt();
    receipt->set_room_id(r.result.room_id());
    receipt->set_outcome(r.result.outcome());
  }
  return reply;
}

FakeReply ReplyWith(const v1::SettlementBatchReply& reply) {
  FakeReply out;
  out.body = reply.SerializeAsString();
  return out;
}

TEST_F(DelivererTest, BatchReceiptsInTheWrongOrderAckNothing) {
  DeliverABatchAnswered([](const std::vector<FakeRequest>& requests) {
    v1::SettlementBatchReply reply = ReceiptsFor(requests);
    std::rotate(reply.mutable_items()->begin(), reply.mutable_items()->begin() + 1,
                reply.mutable_items()->end());
    return std::optional<FakeReply>(ReplyWith(reply));
  });
}

TEST_F(DelivererTest, BatchReplyWithAnItemMissingAcksNothing) {
  DeliverABatchAnswered([](const std::vector<FakeRequest>& requests) {
    v1::SettlementBatchReply reply = ReceiptsFor(requests);
    reply.mutable_items()->RemoveLast();
    return std::optional<FakeReply>(ReplyWith(reply));
  });
}

TEST_F(DelivererTest, BatchAnsweredWithAnHtmlPageAcksNothing) {
  DeliverABatchAnswered([](const std::vector<FakeRequest>&) {
    FakeReply page;
    page.content_type = "text/html";
    page.body = "<html><body>Welcome</body></html>";
    return std::optional<FakeReply>(page);
  });
}

TEST_F(DelivererTest, BatchItemsWithNeitherReceiptNorProblemAckNothing) {
  DeliverABatchAnswered([](const std::vector<FakeRequest>& requests) {
    v1::SettlementBatchReply reply;
    for (size_t i = 0; i < requests.size(); ++i) reply.add_items();
    return std::optional<FakeReply>(ReplyWith(reply));
  });
}

// A lobby from before the batch path: the node falls back to single requests at once, and
// everything is delivered, each room in order.
void ExpectSingleRequestsAfterTheBatchPathIsRefused(const FakeLobby& lobby) {
  const auto requests = lobby.requests();
  ASSERT_FALSE(requests.empty());
  EXPECT_EQ(requests.front().batch, 1) << "the first request was not a batch";
  size_t singles = 0;
  for (const auto& r : requests) {
    if (r.batch == 0) ++singles;
    if (singles > 0) {
      EXPECT_EQ(r.batch, 0) << "a batch after the fallback";
    }
  }
  EXPECT_EQ(singles, 4u);
  std::vector<int64_t> room501;
  for (const auto& r : lobby.accepted()) {
    if (r.room_id() == 501) room501.push_back(r.ended_at_ms());
  }
  EXPECT_EQ(room501, (std::vector<int64_t>{1, 2, 3}));
}

class DelivererFallbackTest : public DelivererTest, public ::testing::WithParamInterface<int> {};

TEST_P(DelivererFallbackTest, LobbyWithoutTheBatchPathGetsSingleRequests) {
  batch_ = 64;
  const int status = GetParam();
  lobby_.SetBatchHandler([status](const std::vector<FakeRequest>&) {
    FakeReply reply;
    reply.status = status;
    reply.content_type = "text/html";
    reply.body = "<html>no such path</html>";
    return std::optional<FakeReply>(reply);
  });
  OpenOutbox(1);
  Enqueue({MakeResult(500), MakeResult(501, 1), MakeResult(501, 2), MakeResult(501, 3)});
  StartDeliverer();
  ASSERT_TRUE(WaitUntil([&] { return Pending() == 0; }));
  EXPECT_EQ(DeadLettered(), 0u);
  EXPECT_EQ(deliverer_->RoomsInBackoff(), 0u) << "a missing batch path is not a room's failure";
  ExpectSingleRequestsAfterTheBatchPathIsRefused(lobby_);
}

INSTANTIATE_TEST_SUITE_P(NotFoundAndMethodNotAllowed, DelivererFallbackTest,
                         ::testing::Values(404, 405));

TEST_F(DelivererTest, RefusedTokenOnABatchPausesDeliveryDeadLettersNothingAndResumes) {
  batch_ = 64;
  DeliverPastARefusedToken(401);
  // (The deliverer is gone here, so the fake's record is read, not the metrics.)
  for (const auto& r : lobby_.requests()) {
    EXPECT_GT(r.batch, 0) << "a refused token made the node fall back to single requests";
  }
}

TEST_F(DelivererTest, BatchProblemItemsKeepOrDeadLetterTheirRecords) {
  EXPECT_EQ(DeliverABatchWithProblemItems(), (std::pair<uint64_t, uint64_t>{1, 1}));
}

// Negative control: acking the whole batch on a 200 without reading its items loses room 301
// (the lobby could not settle it) and acks room 302 instead of dead-lettering it.
TEST_F(DelivererTest, NegativeControlAckingTheWholeBatchIsCaught) {
  unsafe_ack_whole_batch_ = true;
  EXPECT_NE(DeliverABatchWithProblemItems(), (std::pair<uint64_t, uint64_t>{1, 1}));
}

}  // namespace
}  // namespace verdict::delivery
