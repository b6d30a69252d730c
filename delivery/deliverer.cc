// The deliverer's shard loops, written as Boost.Asio C++20 coroutines so each reads top to
// bottom: pick the next deliverable record, attempt it, act on the answer, sleep when there is
// nothing to do. Each loop runs on its own strand, which also serializes its outbox calls (the
// outbox allows one reader per shard): a call that may wait on the disk is handed to the disk
// thread while the loop is suspended awaiting it, so one call of a shard is in progress at a
// time and the I/O threads never block on an fsync. Each loop owns one keep-alive connection
// (http_client.h); what the lobby's answers mean is lobby_answer.h's part.
#include "delivery/deliverer.h"

#include <utility>  // Boost 1.74's asio/awaitable.hpp needs std::exchange declared first

#include <algorithm>
#include <array>
#include <boost/asio.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <variant>

#include <spdlog/spdlog.h>

#include "common/bearer_token.h"
#include "common/failpoint.h"
#include "common/host_port.h"
#include "common/log.h"
#include "common/log_rate_limit.h"
#include "common/mutex.h"
#include "delivery/http_client.h"
#include "delivery/lobby_answer.h"
#include "proto/wire.h"

namespace verdict::delivery {
namespace {

namespace net = boost::asio;
using net::awaitable;
using net::use_awaitable;

using wire::kSettlementsPath;
constexpr const char* kBatchPath = wire::kSettlementsBatchPath;
// The lobby's limits for one batch: results, and bytes (less 64 KiB of room for the request's
// framing).
constexpr size_t kMaxBatchResults = wire::kMaxBatchResults;
constexpr size_t kMaxBatchBytes = wire::kMaxBatchResultBytes;
constexpr size_t kBatchBytesPerResult = wire::kBatchBytesPerResult;
// Bounds of the histogram of records per batch request: powers of two up to the lobby's limit.
constexpr std::array<double, 9> kBatchRecordsBuckets = {1, 2, 4, 8, 16, 32, 64, 128, 256};
static_assert(kBatchRecordsBuckets.back() == kMaxBatchResults);
constexpr int64_t kForever = std::numeric_limits<int64_t>::max();
// A shard logs 2xx answers that are not receipts at most this often.
constexpr int64_t kBadReceiptLogIntervalMs = 60'000;
// How long a shard waits before reading its outbox again after a read failed.
constexpr int64_t kReadFailurePauseMs = 1000;
// How the node introduces itself to the lobby.
constexpr char kUserAgent[] = "verdict-node";

// Backoff after `failures` failures in a row: initial doubling to max, jittered when `rng` is
// given, and never beyond max: the cap comes after the jitter.
int64_t BackoffMs(const DelivererOptions& o, int failures, std::mt19937_64* rng) {
  int64_t delay = o.initial_backoff.count();
  for (int i = 1; i < failures && delay < o.max_backoff.count(); ++i) delay *= 2;
  if (rng && o.jitter > 0) {
    std::uniform_real_distribution<double> factor(1 - o.jitter, 1 + o.jitter);
    delay = static_cast<int64_t>(std::min<int64_t>(delay, o.max_backoff.count()) * factor(*rng));
  }
  return std::min<int64_t>(delay, o.max_backoff.count());
}

// Text from the lobby (a problem's detail and code, a reason phrase) as it goes into a log line:
// escaped, so that it can neither forge a line nor reach the terminal as an escape sequence.
std::string Shown(const std::string& text) { return wire::EscapeForTerminal(text); }

std::string Describe(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "unknown exception";
  }
}

}  // namespace

class ShardLoop;

class Deliverer::Impl {
 public:
  Impl(storage::Outbox& outbox, DelivererOptions options, metrics::Registry* registry);

  Status Start();
  void Stop();
  void Wake();
  void RetryNow();
  size_t RoomsInBackoff() const;
  Status Health() const;
  bool auth_failing() const { return auth_failing_.load(); }

  // The token for the next attempt, and what the lobby said about one.
  std::string Token() const;
  Status SetToken(std::string token);
  // Acceptances so far: an attempt notes it when sent, so a refusal that was overtaken by an
  // acceptance is recognised as stale.
  uint64_t auth_acceptances() const { return auth_acceptances_.load(); }
  // Every lobby URL refused the token, in a row, to one shard: pauses every shard (a backoff
  // doubling per refusal in a row) unless the refused attempt is stale: the token was replaced,
  // or another attempt was accepted, since it was sent. One error line when the refusals begin.
  void OnAuthRejected(const std::string& cause, const std::string& token_used,
                      uint64_t acceptances_when_sent);
  // The lobby at `endpoint` refused the token and the shard moves on to the next URL: one
  // warning per URL until that URL accepts the token again.
  void OnEndpointRefusedToken(size_t endpoint, const std::string& cause);
  // The lobby at `endpoint` accepted the token: ends the pause and the alert.
  void OnAuthAccepted(size_t endpoint);
  // Until when every shard waits because the token was refused (0: no pause).
  int64_t auth_paused_until_ms() const { return auth_paused_until_ms_.load(); }

  // How many records the next request of a shard may carry: 1 once single requests are in
  // force (batch 1, or a lobby without the batch path).
  size_t BatchLimit() const {
    if (single_requests_.load()) return 1;
    return std::clamp<size_t>(options_.batch, 1, kMaxBatchResults);
  }
  // The lobby answered 404/405 on the batch path: every shard sends single requests from now
  // on. One warning.
  void FallBackToSingleRequests(uint32_t shard, const Attempt& a);

  // Runs `work` on the disk thread; the calling loop resumes on its strand when it is done.
  // Exceptions from `work` propagate to the caller.
  awaitable<void> OnDiskThread(std::function<void()> work);

  storage::Outbox& outbox_;
  const DelivererOptions options_;
  const Clock* clock_;
  std::vector<HttpUrl> endpoints_;       // the lobby URLs, in order
  std::shared_ptr<TlsTrust> tls_trust_;  // when any endpoint is https

  // Metrics (no-ops without a registry).
  metrics::Registry fallback_registry_;
  metrics::LabeledCounter& delivered_;
  metrics::LabeledCounter& retried_;
  metrics::LabeledCounter& dead_lettered_;
  metrics::Counter& expired_;
  metrics::LabeledCounter& loop_restarts_;
  metrics::Histogram& attempt_seconds_;
  metrics::Counter& batches_;
  metrics::Histogram& batch_records_;
  std::atomic<int> in_flight_{0};
  std::atomic<uint64_t> resolved_{0};
  std::atomic<uint64_t> acked_{0};  // of resolved_, those acked (the others dead-lettered)
  // The warnings a fault repeats, each kind with a limit of its own (a burst, then a line a
  // second, over every shard), so that a flood of one kind hides no other: a room's retry, an
  // unreachable lobby, an outbox that cannot be read, and the writes a failing disk refuses (acks
  // and dead-letter moves).
  LogRateLimit retry_log_;
  LogRateLimit unreachable_log_;
  LogRateLimit read_failure_log_;
  LogRateLimit write_failure_log_;

 private:
  // Runs `loop` until it stops; if it throws instead, restarts it after a backoff.
  void Spawn(ShardLoop& loop);
  void OnLoopEnded(ShardLoop& loop, std::exception_ptr error);
  void LoopDone();

  mutable Mutex auth_mu_;
  std::string token_ GUARDED_BY(auth_mu_);
  int auth_refusals_ GUARDED_BY(auth_mu_) = 0;               // in a row
  std::vector<bool> endpoint_refuses_ GUARDED_BY(auth_mu_);  // per URL, logged as refusing
  std::atomic<int> endpoints_refusing_{0};  // how many of endpoint_refuses_ are true
  std::atomic<int64_t> auth_paused_until_ms_{0};
  std::atomic<bool> auth_failing_{false};
  std::atomic<uint64_t> auth_acceptances_{0};
  std::atomic<bool> single_requests_;

  net::io_context ioc_;
  std::vector<std::unique_ptr<ShardLoop>> loops_;
  std::vector<std::thread> threads_;
  Mutex mu_;
  CondVar loops_done_{&mu_};
  int running_ GUARDED_BY(mu_) = 0;
  bool started_ = false;
  // After ioc_, so it is gone first; joined in Stop before ioc_ stops, so every disk call's
  // completion still reaches its loop.
  net::thread_pool disk_pool_;
};

class ShardLoop {
 public:
  ShardLoop(Deliverer::Impl& owner, uint32_t shard, net::any_io_executor executor)
      : owner_(owner),
        shard_(shard),
        strand_(net::make_strand(executor)),
        timer_(strand_),
        restart_timer_(strand_),
        rng_(std::random_device{}() ^ shard),
        connection_(strand_, {.timeout = owner.options_.attempt_timeout,
                              .tls = owner.tls_trust_,
                              .user_agent = kUserAgent,
                              .failpoint_before_write = "deliver.mid_send"}) {}

  net::strand<net::any_io_executor>& strand() { return strand_; }
  uint32_t shard() const { return shard_; }
  size_t rooms_in_backoff() const { return rooms_in_backoff_.load(); }
  // On the strand: true once Stop reached the loop.
  bool stopping() const { return stopping_; }

  // New records may be in the shard. Wakes that come while one is on its way are one wake; a
  // loop pausing (its shard backing off, or the node's token refused) only notes the news and
  // sleeps on, so a lobby outage does not cost each group commit a round of every shard.
  void Wake() {
    if (wake_posted_.exchange(true)) return;
    net::post(strand_, [this] {
      wake_posted_ = false;
      maybe_more_ = true;
      ++wakes_;
      if (owner_.clock_->MonotonicMs() < PausedUntil()) return;
      woken_ = true;
      timer_.cancel();
    });
  }

  // Cuts every wait of this shard short (Deliverer::RetryNow): rooms backing off and the shard
  // itself go again at once, their failures counted afresh. A shard stopped for damage stays
  // stopped.
  // An attempt in flight at that moment is answered by a lobby from before it: its answer sets
  // no wait either (Run cuts them again after applying it).
  void RetryNow() {
    net::post(strand_, [this] {
      ++retries_now_;
      CutWaits();
    });
  }

  // On the strand: every room backing off, and the shard, go again at once, their failures
  // counted afresh.
  void CutWaits() {
    const int64_t now = owner_.clock_->MonotonicMs();
    for (auto& [room, b] : backoff_) {
      b.until_ms = std::min(b.until_ms, now);
      b.failures = 0;
    }
    if (shard_until_ms_ != kForever) shard_until_ms_ = std::min(shard_until_ms_, now);
    ack_retry_at_ms_ = std::min(ack_retry_at_ms_, now);
    ack_failures_ = 0;
    connection_failures_ = 0;
    maybe_more_ = true;
    woken_ = true;
    timer_.cancel();
  }

  void Stop() {
    net::post(strand_, [this] {
      stopping_ = true;
      timer_.cancel();
      restart_timer_.cancel();
      connection_.Close();
    });
  }

  // The loop threw: counts the failure and returns how many in a row.
  int RecordFailure(const std::string& reason) {
    MutexLock lock(&health_mu_);
    last_failure_ = reason;
    return ++failures_in_row_;
  }

  // OK unless the lobby refuses this shard's requests as a whole, or the loop failed
  // `threshold` times in a row without resolving a record since.
  Status Health(int threshold) const {
    MutexLock lock(&health_mu_);
    if (!ack_failing_.empty()) {
      return UnavailableError("outbox writes are failing: shard " + std::to_string(shard_) +
                              " cannot record the lobby's receipts (" + ack_failing_ +
                              "); the settled results are not sent again, their acks are retried");
    }
    if (!request_refused_.empty()) {
      return UnavailableError("shard " + std::to_string(shard_) +
                              ": the lobby refuses this node's requests as a whole (" +
                              request_refused_ +
                              "); their results are kept and retried, none is dead-lettered");
    }
    if (failures_in_row_ < threshold) return Status::Ok();
    return UnavailableError("delivery loop of shard " + std::to_string(shard_) + " failed " +
                            std::to_string(failures_in_row_) + " times in a row: " + last_failure_);
  }

  // On the strand, after the loop threw: drops what it held (the next run rescans the shard)
  // and calls `then(true)` after `delay_ms`, or `then(false)` if the deliverer stops first.
  void ScheduleRestart(int64_t delay_ms, std::function<void(bool)> then) {
    connection_.Close();
    window_.clear();
    // What waited for its ack is read again with the shard, sent again (the lobby answers
    // duplicate) and acked by the ordinary path: nothing waits for an ack any more.
    settled_.clear();
    ack_failures_ = 0;
    AcksWritten();
    read_through_ = 0;
    maybe_more_ = true;
    restart_timer_.expires_after(std::chrono::milliseconds(delay_ms));
    restart_timer_.async_wait(
        [this, then = std::move(then)](boost::system::error_code) { then(!stopping_); });
  }

  awaitable<void> Run() {
    while (!stopping_) {
      const int64_t now = owner_.clock_->MonotonicMs();
      if (!settled_.empty() && now >= ack_retry_at_ms_) AckSettled();  // needs no lobby
      const int64_t paused_until = PausedUntil();
      if (now < paused_until) {
        co_await SleepUntil(settled_.empty() ? paused_until
                                             : std::min(paused_until, ack_retry_at_ms_));
        continue;
      }
      const size_t limit = owner_.BatchLimit();
      std::vector<size_t> picked = PickDeliverable(now, limit);
      bool read_failed = false;
      while (picked.size() < limit && maybe_more_ && window_.size() < owner_.options_.max_window) {
        const auto read = co_await Refill();
        if (!read.ok()) {
          read_failed = true;
          break;
        }
        if (*read == 0) break;
        picked = PickDeliverable(now, limit);
      }
      if (read_failed) continue;  // the shard backs off (see Refill)
      if (picked.empty()) {
        if (window_.empty()) ResetFailures();  // idle with the shard read to its end
        co_await SleepUntil(EarliestRoomRetry());
        continue;
      }
      std::vector<storage::OutboxRecord> records;
      for (size_t i : picked) records.push_back(window_[i]);
      const uint64_t retries_now = retries_now_;
      const std::vector<Attempt> attempts = co_await Deliver(records, limit > 1);
      co_await ApplyAll(records, attempts);
      if (retries_now != retries_now_) CutWaits();  // answered from before a RetryNow
    }
    connection_.Close();
  }

 private:
  struct Backoff {
    int64_t until_ms = 0;
    int failures = 0;
    uint64_t sequence = 0;  // the record whose attempt failed
  };
  // A record the lobby settled whose ack could not be written: it stays in the window (its room
  // waits behind it) and is never sent again; only its ack is retried.
  struct Settled {
    storage::OutboxRecord record;
    Attempt attempt;
  };

  // Until when the whole shard waits: its own backoff, or the node's after a refused token.
  int64_t PausedUntil() const { return std::max(shard_until_ms_, owner_.auth_paused_until_ms()); }

  // Up to `limit` records in shard order (positions in the window), each the first of its room
  // in the window, of a room not waiting out a backoff, together under the lobby's batch size.
  // Because every record after a room's first is skipped, a room's later records never overtake
  // its earlier ones, and a batch never holds two records of one room.
  std::vector<size_t> PickDeliverable(int64_t now, size_t limit) const {
    const bool unsafe = owner_.options_.unsafe_ignore_room_order_for_test;
    std::vector<size_t> picked;
    std::set<uint64_t> rooms_seen;
    size_t bytes = 0;
    for (size_t i = 0; i < window_.size() && picked.size() < limit; ++i) {
      const storage::OutboxRecord& r = window_[i];
      if (!rooms_seen.insert(r.result.room_id()).second && !unsafe) continue;
      if (AwaitingAck(r) || Waiting(r, now)) continue;
      bytes += r.result.ByteSizeLong() + kBatchBytesPerResult;
      if (!picked.empty() && bytes > kMaxBatchBytes) break;
      picked.push_back(i);
    }
    return picked;
  }

  bool AwaitingAck(const storage::OutboxRecord& r) const { return settled_.contains(r.sequence); }

  // Whether `r`'s room waits out a backoff (with P3 off, only the record that failed waits).
  bool Waiting(const storage::OutboxRecord& r, int64_t now) const {
    auto it = backoff_.find(r.result.room_id());
    if (it == backoff_.end() || it->second.until_ms <= now) return false;
    return !owner_.options_.unsafe_ignore_room_order_for_test || it->second.sequence == r.sequence;
  }

  // Reads the next records after what the window holds, on the disk thread (a read may
  // quarantine an undecodable record with a synced write); returns how many. On a storage
  // error the shard pauses for kReadFailurePauseMs, on DATA_LOSS (a damaged shard) for good.
  awaitable<Result<size_t>> Refill() {
    const size_t want =
        std::min(owner_.options_.read_batch, owner_.options_.max_window - window_.size());
    Result<std::vector<storage::OutboxRecord>> page = InternalError("not read");
    const uint64_t wakes = wakes_;
    co_await owner_.OnDiskThread(
        [&] { page = owner_.outbox_.ReadShard(shard_, read_through_, want); });
    if (page.status().code() == StatusCode::kDataLoss) {
      // The shard's stored data is damaged: it stays stopped (the outbox reports it) until the
      // outbox is salvaged; the other shards go on.
      Log().error("shard={}: delivery stopped: {}", shard_, page.status().ToString());
      shard_until_ms_ = kForever;
      co_return page.status();
    }
    if (!page.ok()) {
      LogLimited(Log(), owner_.read_failure_log_, spdlog::level::warn,
                 "shard={}: cannot read the outbox: {}", shard_, page.status().ToString());
      shard_until_ms_ = owner_.clock_->MonotonicMs() + kReadFailurePauseMs;
      co_return page.status();
    }
    // A short page means the shard was read to its end, unless a Wake came while the read was
    // on the disk thread: what it announced may have been written after the read began, and
    // forgetting it would leave the records until the next Wake.
    if (page->size() < want && wakes == wakes_) maybe_more_ = false;
    for (auto& r : *page) {
      read_through_ = r.sequence;
      window_.push_back(std::move(r));
    }
    co_return page->size();
  }

  int64_t EarliestRoomRetry() const {
    int64_t earliest = settled_.empty() ? kForever : ack_retry_at_ms_;
    for (const auto& r : window_) {
      auto it = backoff_.find(r.result.room_id());
      if (it != backoff_.end()) earliest = std::min(earliest, it->second.until_ms);
    }
    return earliest;
  }

  // Sleeps until `until_ms` on the injected clock's monotonic reading, or until woken.
  awaitable<void> SleepUntil(int64_t until_ms) {
    if (woken_ || stopping_) {
      woken_ = false;
      co_return;
    }
    if (until_ms == kForever) {
      timer_.expires_at(net::steady_timer::time_point::max());
    } else {
      timer_.expires_after(
          std::chrono::milliseconds(std::max<int64_t>(0, until_ms - owner_.clock_->MonotonicMs())));
    }
    boost::system::error_code ec;
    co_await timer_.async_wait(net::redirect_error(use_awaitable, ec));
    woken_ = false;
  }

  // Sends `records` (one request, a batch or a single record) and reads the answer: one
  // Attempt per record, or one about the whole request.
  awaitable<std::vector<Attempt>> Deliver(const std::vector<storage::OutboxRecord>& records,
                                          bool batch) {
    if (owner_.options_.unsafe_ack_before_send_for_test) {
      for (const auto& record : records) owner_.outbox_.Ack(record).IgnoreError();
    }
    const auto started = std::chrono::steady_clock::now();
    ++owner_.in_flight_;
    std::vector<Attempt> attempts;
    if (batch) {
      attempts = co_await ExchangeBatch(records);
    } else {
      attempts.push_back(co_await Exchange(records.front()));
    }
    --owner_.in_flight_;
    owner_.attempt_seconds_.Observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    if (stopping_) attempts = {Attempt{Attempt::Kind::kStopped, "stopped", "", ""}};
    co_return attempts;
  }

  awaitable<Attempt> Exchange(const storage::OutboxRecord& record) {
    HttpOutcome outcome = co_await Post(kSettlementsPath, wire::DeterministicBytes(record.result));
    if (const auto* error = std::get_if<HttpError>(&outcome)) co_return AttemptOfFailure(*error);
    co_return Classify(std::get<HttpResponse>(outcome), record.result);
  }

  awaitable<std::vector<Attempt>> ExchangeBatch(const std::vector<storage::OutboxRecord>& records) {
    std::string batch;  // a SettlementBatch's bytes
    for (const auto& record : records) wire::AppendToBatchBytes(record.result, &batch);
    owner_.batches_.Add();
    owner_.batch_records_.Observe(static_cast<double>(records.size()));
    HttpOutcome outcome = co_await Post(kBatchPath, std::move(batch));
    if (const auto* error = std::get_if<HttpError>(&outcome)) {
      co_return std::vector<Attempt>{AttemptOfFailure(*error)};
    }
    co_return ClassifyBatch(std::get<HttpResponse>(outcome), records,
                            owner_.options_.unsafe_ack_whole_batch_for_test);
  }

  // One POST of `body` to `path` at the shard's current lobby, with the current token (noted,
  // so that a refusal can be told stale).
  awaitable<HttpOutcome> Post(const char* path, std::string body) {
    sent_token_ = owner_.Token();
    sent_acceptances_ = owner_.auth_acceptances();
    HttpRequest request;
    request.target = path;
    request.bearer_token = sent_token_;
    request.content_type = wire::kProtobufType;
    request.accept = wire::kProtobufType;
    request.body = std::move(body);
    co_return co_await connection_.Post(owner_.endpoints_[endpoint_], std::move(request));
  }

  // Acts on the answer to `records`: per record, or once when it was about the whole request.
  awaitable<void> ApplyAll(const std::vector<storage::OutboxRecord>& records,
                           const std::vector<Attempt>& attempts) {
    if (attempts.size() != records.size()) {
      co_await Apply(records.front(), attempts.front());
      co_return;
    }
    const bool all_delivered = std::all_of(attempts.begin(), attempts.end(), [](const Attempt& a) {
      return a.kind == Attempt::Kind::kDelivered;
    });
    if (all_delivered && !stopping_) {
      Delivered(records, attempts);
      co_return;
    }
    for (size_t i = 0; i < records.size() && !stopping_; ++i) {
      co_await Apply(records[i], attempts[i]);
    }
  }

  awaitable<void> Apply(const storage::OutboxRecord& record, const Attempt& a) {
    switch (a.kind) {
      case Attempt::Kind::kStopped:
        co_return;
      case Attempt::Kind::kDelivered:
        Delivered(std::span(&record, 1), std::span(&a, 1));
        co_return;
      case Attempt::Kind::kTerminal:
        LobbyAnswered();
        RequestsRead();
        owner_.OnAuthAccepted(endpoint_);
        co_await MoveToDeadLetter(record, a);
        co_return;
      case Attempt::Kind::kRetryRoom:
        LobbyAnswered();
        if (a.request_refused) RequestRefused(a);
        RetryRoom(record, a);
        co_return;
      case Attempt::Kind::kAuthRejected:
        // The record stays where it is and goes first once the token works: no room backoff.
        connection_failures_ = 0;
        owner_.retried_.Add(a.cause);
        TokenRefused(a);
        co_return;
      case Attempt::Kind::kConnectionFailed:
        ConnectionFailed(a);
        co_return;
      case Attempt::Kind::kNoBatchEndpoint:
        // The records stay where they are and go out singly at once: no backoff.
        LobbyAnswered();
        owner_.FallBackToSingleRequests(shard_, a);
        co_return;
    }
  }

  // Records the lobby settled (`attempts`, one each): removed from the outbox in one write (not
  // synced, so it stays on the I/O thread), then forgotten.
  void Delivered(std::span<const storage::OutboxRecord> records,
                 std::span<const Attempt> attempts) {
    LobbyAnswered();
    RequestsRead();
    owner_.OnAuthAccepted(endpoint_);
    CheckFailpoint("deliver.after_2xx_before_ack");
    if (!owner_.options_.unsafe_ack_before_send_for_test) {
      if (Status s = owner_.outbox_.AckAll(records); !s.ok()) {
        // Settled all the same: kept in the window, never sent again, the ack retried.
        for (size_t i = 0; i < records.size(); ++i) {
          settled_.emplace(records[i].sequence, Settled{records[i], attempts[i]});
        }
        AckFailed(s, records.size());
        return;
      }
    }
    for (size_t i = 0; i < records.size(); ++i) Acknowledged(records[i], attempts[i]);
  }

  // No settled record waits for its ack (all written, or dropped with the window by a restart):
  // Health no longer reports failing acks.
  void AcksWritten() {
    MutexLock lock(&health_mu_);
    ack_failing_.clear();
  }

  // Writes the acks of the records settled whose acks failed, all at once.
  void AckSettled() {
    std::vector<storage::OutboxRecord> records;
    for (const auto& [sequence, s] : settled_) records.push_back(s.record);
    if (Status s = owner_.outbox_.AckAll(records); !s.ok()) {
      AckFailed(s, 0);
      return;
    }
    std::map<uint64_t, Settled> settled = std::move(settled_);
    settled_.clear();
    ack_failures_ = 0;
    for (const auto& [sequence, s] : settled) Acknowledged(s.record, s.attempt);
    AcksWritten();
    Log().info("shard={}: the acks of {} settled result(s) are written", shard_, settled.size());
  }

  // An ack write failed (`fresh` records newly settled, the others retried): the acks wait a
  // backoff, doubling to the longest, and Health reports the shard until one is written.
  void AckFailed(const Status& s, size_t fresh) {
    const int64_t delay = BackoffDelay(++ack_failures_);
    ack_retry_at_ms_ = owner_.clock_->MonotonicMs() + delay;
    {
      MutexLock lock(&health_mu_);
      ack_failing_ = s.ToString();
    }
    LogLimited(Log(), owner_.write_failure_log_, spdlog::level::warn,
               "shard={}: cannot ack what the lobby settled ({}): {} result(s) wait for their "
               "ack ({} new), never sent again; next try in {} ms",
               shard_, s.ToString(), settled_.size(), fresh, delay);
  }

  void Acknowledged(const storage::OutboxRecord& record, const Attempt& a) {
    if (a.expired) {
      owner_.expired_.Add();
      Log().info("room={} shard={}: the lobby settled it long ago (ORIGINAL_EXPIRED); acked",
                 record.result.room_id(), shard_);
    } else {
      owner_.delivered_.Add(a.duplicate ? "duplicate" : "settled");
    }
    ++owner_.acked_;
    Forget(record);
  }

  // A synced write: done on the disk thread while this loop waits.
  awaitable<void> MoveToDeadLetter(const storage::OutboxRecord& record, const Attempt& a) {
    const uint64_t room = record.result.room_id();
    Status s;
    co_await owner_.OnDiskThread([&] { s = owner_.outbox_.DeadLetter(record, a.code, a.message); });
    if (!s.ok()) {
      LogLimited(Log(), owner_.write_failure_log_, spdlog::level::warn,
                 "room={} shard={}: dead-letter failed: {}", room, shard_, s.ToString());
      BackOffRoom(record, /*retry_after_ms=*/0);
      co_return;
    }
    owner_.dead_lettered_.Add(a.code);
    Log().error(
        "room={} shard={} sequence={}: lobby refused the result as final ({}: {}); "
        "moved to dead letter",
        room, shard_, record.sequence, Shown(a.code), Shown(a.message));
    Forget(record);
  }

  void RetryRoom(const storage::OutboxRecord& record, const Attempt& a) {
    owner_.retried_.Add(a.cause);
    const int64_t delay = BackOffRoom(record, a.retry_after_ms);
    if (a.cause == "bad_receipt") {
      LogBadReceipt(record, a);
      return;
    }
    LogLimited(Log(), owner_.retry_log_, spdlog::level::warn,
               "room={} shard={}: {} ({}); retrying in {} ms", record.result.room_id(), shard_,
               a.cause, Shown(a.message), delay);
  }

  // A 2xx that is not the lobby's receipt (a proxy or a health page answering for it) repeats
  // for every record: one line per shard per minute, with how many were seen.
  void LogBadReceipt(const storage::OutboxRecord& record, const Attempt& a) {
    ++bad_receipts_unlogged_;
    const int64_t now = owner_.clock_->MonotonicMs();
    if (bad_receipt_logged_ms_ != 0 && now - bad_receipt_logged_ms_ < kBadReceiptLogIntervalMs) {
      return;
    }
    Log().error(
        "room={} shard={}: a 2xx answer without the lobby's receipt for the result ({}); "
        "nothing acked, the result is kept and retried ({} such answer(s) in this shard since "
        "the last line); is something other than the lobby answering?",
        record.result.room_id(), shard_, Shown(a.message), bad_receipts_unlogged_);
    bad_receipt_logged_ms_ = now;
    bad_receipts_unlogged_ = 0;
  }

  // The lobby refused a request as a whole (Attempt::request_refused): the node sends something
  // it cannot read. Health says so until a request is read; one error line when it begins.
  void RequestRefused(const Attempt& a) {
    requests_refused_ = true;
    MutexLock lock(&health_mu_);
    const bool first = request_refused_.empty();
    request_refused_ = a.cause + ": " + Shown(a.message);
    if (first) {
      Log().error(
          "shard={}: the lobby refuses this node's requests as a whole ({}); the results are kept "
          "and retried, none is dead-lettered; /healthz reports it until a request gets through",
          shard_, request_refused_);
    }
  }

  // The lobby read a request and answered for its records.
  void RequestsRead() {
    if (!requests_refused_) return;
    requests_refused_ = false;
    MutexLock lock(&health_mu_);
    request_refused_.clear();
    Log().info("shard={}: the lobby reads this node's requests again", shard_);
  }

  // The lobby answered something other than a refused token.
  void LobbyAnswered() {
    connection_failures_ = 0;
    token_refusals_ = 0;
  }

  // The lobby at this shard's URL refused the token. Another URL may take it (an instance whose
  // token list is behind during a rotation): the shard moves on to the next one at once. Only
  // when every URL refused it in a row is it about the node, and every shard pauses.
  void TokenRefused(const Attempt& a) {
    ++token_refusals_;
    const size_t refused_by = endpoint_;
    endpoint_ = (endpoint_ + 1) % owner_.endpoints_.size();
    if (token_refusals_ % owner_.endpoints_.size() != 0) {
      owner_.OnEndpointRefusedToken(refused_by, a.cause);
      return;
    }
    owner_.OnAuthRejected(a.cause, sent_token_, sent_acceptances_);
  }

  void ConnectionFailed(const Attempt& a) {
    owner_.retried_.Add(a.cause);
    ++connection_failures_;
    endpoint_ = (endpoint_ + 1) % owner_.endpoints_.size();
    // Every lobby URL failed in a row: back the whole shard off instead of hammering.
    if (connection_failures_ % owner_.endpoints_.size() == 0) {
      const int rounds = static_cast<int>(connection_failures_ / owner_.endpoints_.size());
      const int64_t delay = BackoffDelay(rounds);
      shard_until_ms_ = owner_.clock_->MonotonicMs() + delay;
      LogLimited(Log(), owner_.unreachable_log_, spdlog::level::warn,
                 "shard={}: lobby unreachable ({}: {}); shard waits {} ms", shard_, a.cause,
                 Shown(a.message), delay);
    }
  }

  int64_t BackoffDelay(int failures) { return BackoffMs(owner_.options_, failures, &rng_); }

  int64_t BackOffRoom(const storage::OutboxRecord& record, int64_t retry_after_ms) {
    Backoff& b = backoff_[record.result.room_id()];
    ++b.failures;
    b.sequence = record.sequence;
    // The lobby's Retry-After is obeyed up to the longest backoff, never beyond.
    const int64_t delay = std::max(BackoffDelay(b.failures),
                                   std::min(retry_after_ms, owner_.options_.max_backoff.count()));
    b.until_ms = owner_.clock_->MonotonicMs() + delay;
    rooms_in_backoff_ = backoff_.size();
    return delay;
  }

  // The record is settled one way or the other: drop it from the window, and its room's
  // backoff (the room's next record goes out at once).
  void Forget(const storage::OutboxRecord& record) {
    ++owner_.resolved_;
    ResetFailures();
    std::erase_if(window_, [&](const auto& r) { return r.sequence == record.sequence; });
    auto it = backoff_.find(record.result.room_id());
    if (it != backoff_.end() && (it->second.sequence == record.sequence ||
                                 !owner_.options_.unsafe_ignore_room_order_for_test)) {
      backoff_.erase(it);
    }
    rooms_in_backoff_ = backoff_.size();
  }

  void ResetFailures() {
    if (failures_in_row_ == 0) return;
    MutexLock lock(&health_mu_);
    failures_in_row_ = 0;
  }

  Deliverer::Impl& owner_;
  const uint32_t shard_;
  net::strand<net::any_io_executor> strand_;
  net::steady_timer timer_;
  net::steady_timer restart_timer_;  // apart from timer_, which every Wake cancels
  std::mt19937_64 rng_;
  std::string sent_token_;         // the token of the attempt in progress
  uint64_t sent_acceptances_ = 0;  // and the deliverer's acceptances when it was sent
  int64_t bad_receipt_logged_ms_ = 0;
  uint64_t bad_receipts_unlogged_ = 0;

  mutable Mutex health_mu_;  // Health is read from other threads
  std::atomic<int> failures_in_row_{0};
  std::string last_failure_ GUARDED_BY(health_mu_);
  // Why, while the lobby refuses requests whole.
  std::string request_refused_ GUARDED_BY(health_mu_);
  // Why, while acks of settled records cannot be written.
  std::string ack_failing_ GUARDED_BY(health_mu_);
  bool requests_refused_ = false;  // request_refused_ is set (read on the strand, lock-free)

  HttpConnection connection_;  // to endpoints_[endpoint_]
  size_t endpoint_ = 0;
  size_t connection_failures_ = 0;  // in a row, over the URLs
  size_t token_refusals_ = 0;       // in a row, over the URLs

  std::vector<storage::OutboxRecord> window_;  // unresolved records in shard order
  std::map<uint64_t, Settled> settled_;        // of window_, those awaiting their ack, by sequence
  int ack_failures_ = 0;                       // ack writes failed in a row
  int64_t ack_retry_at_ms_ = 0;                // when settled_'s acks are tried again
  uint64_t read_through_ = 0;                  // highest sequence read into the window
  bool maybe_more_ = true;                     // the shard may hold records after it
  uint64_t wakes_ = 0;                         // Wake calls so far
  std::map<uint64_t, Backoff> backoff_;
  std::atomic<size_t> rooms_in_backoff_{0};
  int64_t shard_until_ms_ = 0;
  uint64_t retries_now_ = 0;  // RetryNow calls so far, on the strand
  bool woken_ = false;
  bool stopping_ = false;
  std::atomic<bool> wake_posted_{false};  // a Wake is on its way to the strand (any thread)
};

Deliverer::Impl::Impl(storage::Outbox& outbox, DelivererOptions options,
                      metrics::Registry* registry)
    : outbox_(outbox),
      options_(std::move(options)),
      clock_(options_.clock ? options_.clock : SystemClock::Default()),
      delivered_((registry ? *registry : fallback_registry_)
                     .AddLabeledCounter("verdict_node_delivered_total",
                                        "Results the lobby accepted, by whether it had them "
                                        "already.",
                                        "result")),
      retried_((registry ? *registry : fallback_registry_)
                   .AddLabeledCounter("verdict_node_delivery_retries_total",
                                      "Attempts that will be retried, by cause.", "cause")),
      dead_lettered_((registry ? *registry : fallback_registry_)
                         .AddLabeledCounter("verdict_node_dead_lettered_total",
                                            "Results the lobby refused as final, by code.",
                                            "code")),
      expired_((registry ? *registry : fallback_registry_)
                   .AddCounter("verdict_node_delivery_expired_total",
                               "Results the lobby answered ORIGINAL_EXPIRED (settled so long ago "
                               "that their receipt is past retention): acked as delivered.")),
      loop_restarts_((registry ? *registry : fallback_registry_)
                         .AddLabeledCounter("verdict_node_delivery_loop_restarts_total",
                                            "Shard delivery loops restarted after they failed.",
                                            "shard")),
      attempt_seconds_((registry ? *registry : fallback_registry_)
                           .AddHistogram("verdict_node_delivery_attempt_seconds",
                                         "Duration of one delivery attempt.")),
      batches_((registry ? *registry : fallback_registry_)
                   .AddCounter("verdict_node_delivery_batches_total",
                               "Batch requests sent (POST /v1/settlements:batch).")),
      batch_records_((registry ? *registry : fallback_registry_)
                         .AddHistogram("verdict_node_delivery_batch_records",
                                       "Records carried by one batch request.",
                                       {kBatchRecordsBuckets.begin(), kBatchRecordsBuckets.end()})),
      retry_log_(LogRateLimitOptions{.clock = clock_}),
      unreachable_log_(LogRateLimitOptions{.clock = clock_}),
      read_failure_log_(LogRateLimitOptions{.clock = clock_}),
      write_failure_log_(LogRateLimitOptions{.clock = clock_}),
      token_(options_.token),
      single_requests_(options_.batch <= 1),
      ioc_(options_.io_threads),
      disk_pool_(std::max(1, options_.disk_threads)) {
  metrics::Registry& r = registry ? *registry : fallback_registry_;
  r.AddGauge("verdict_node_lobby_auth_failing",
             "1 while the lobby refuses this node's token (401/403) and delivery is paused.",
             [this] { return auth_failing_.load() ? 1.0 : 0.0; });
  r.AddGauge("verdict_node_delivery_attempts_in_flight", "Delivery attempts in progress.",
             [this] { return static_cast<double>(in_flight_.load()); });
  r.AddLabeledGauge(
      "verdict_node_rooms_in_backoff", "Rooms waiting out a retry backoff.", "shard", [this] {
        std::vector<std::pair<std::string, double>> out;
        for (size_t s = 0; s < loops_.size(); ++s) {
          out.emplace_back(std::to_string(s), static_cast<double>(loops_[s]->rooms_in_backoff()));
        }
        return out;
      });
}

Status Deliverer::Impl::Start() {
  if (started_) return FailedPreconditionError("deliverer already started");
  if (options_.lobby_urls.empty()) return InvalidArgumentError("no lobby URL given");
  if (Status token = CheckBearerToken(options_.token); !token.ok()) {
    return InvalidArgumentError("the lobby token " + token.message());
  }
  std::vector<HttpUrl> endpoints;
  for (const auto& url : options_.lobby_urls) {
    std::optional<HttpUrl> parsed = ParseHttpUrl(url);
    if (!parsed) {
      return InvalidArgumentError(
          "lobby URL must look like http://host:port or https://host:port, got '" + url + "'");
    }
    endpoints.push_back(std::move(*parsed));
  }
  if (std::ranges::any_of(endpoints, &HttpUrl::tls)) {
    Result<std::shared_ptr<TlsTrust>> trust = LoadTlsTrust(options_.tls_ca_file);
    if (!trust.ok()) return trust.status();
    tls_trust_ = std::move(trust).value();
  }
  endpoints_ = std::move(endpoints);
  {
    MutexLock lock(&auth_mu_);
    endpoint_refuses_.assign(endpoints_.size(), false);
  }
  started_ = true;
  for (uint32_t s = 0; s < outbox_.shard_count(); ++s) {
    loops_.push_back(std::make_unique<ShardLoop>(*this, s, ioc_.get_executor()));
  }
  {
    MutexLock lock(&mu_);
    running_ = static_cast<int>(loops_.size());
  }
  for (auto& loop : loops_) Spawn(*loop);
  for (int i = 0; i < options_.io_threads; ++i) threads_.emplace_back([this] { ioc_.run(); });
  return Status::Ok();
}

void Deliverer::Impl::Stop() {
  if (!started_) return;
  started_ = false;
  for (auto& loop : loops_) loop->Stop();
  {
    MutexLock lock(&mu_);
    const auto deadline = std::chrono::steady_clock::now() + options_.stop_timeout;
    while (running_ != 0) {
      if (loops_done_.WaitUntil(deadline)) break;
    }
  }
  disk_pool_.join();
  ioc_.stop();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void Deliverer::Impl::Spawn(ShardLoop& loop) {
  net::co_spawn(loop.strand(), loop.Run(),
                net::bind_executor(loop.strand(), [this, &loop](std::exception_ptr error) {
                  OnLoopEnded(loop, error);
                }));
}

// On the loop's strand.
void Deliverer::Impl::OnLoopEnded(ShardLoop& loop, std::exception_ptr error) {
  if (!error || loop.stopping()) {
    LoopDone();
    return;
  }
  const std::string reason = Describe(error);
  const int failures = loop.RecordFailure(reason);
  loop_restarts_.Add(std::to_string(loop.shard()));
  const int64_t delay = BackoffMs(options_, failures, nullptr);
  Log().error("shard={}: delivery loop failed ({}), {} time(s) in a row; restarting it in {} ms",
              loop.shard(), reason, failures, delay);
  loop.ScheduleRestart(delay, [this, &loop](bool restart) {
    if (restart) {
      Spawn(loop);
    } else {
      LoopDone();
    }
  });
}

void Deliverer::Impl::LoopDone() {
  MutexLock lock(&mu_);
  --running_;
  loops_done_.SignalAll();
}

// Not a coroutine itself: built with GCC 12, a coroutine that moved from its by-value
// std::function parameter freed it twice.
awaitable<void> Deliverer::Impl::OnDiskThread(std::function<void()> work) {
  return net::co_spawn(
      disk_pool_.get_executor(),
      [work = std::move(work)]() -> awaitable<void> {
        work();
        co_return;
      },
      use_awaitable);
}

std::string Deliverer::Impl::Token() const {
  MutexLock lock(&auth_mu_);
  return token_;
}

Status Deliverer::Impl::SetToken(std::string token) {
  if (Status valid = CheckBearerToken(token); !valid.ok()) {
    return InvalidArgumentError("the lobby token " + valid.message() +
                                "; the node keeps the token it has");
  }
  {
    MutexLock lock(&auth_mu_);
    token_ = std::move(token);
    auth_refusals_ = 0;
    auth_paused_until_ms_ = 0;
  }
  Log().info("lobby token replaced; every shard tries it now");
  Wake();
  return Status::Ok();
}

void Deliverer::Impl::OnAuthRejected(const std::string& cause, const std::string& token_used,
                                     uint64_t acceptances_when_sent) {
  MutexLock lock(&auth_mu_);
  if (token_used != token_) return;  // replaced since: the new one gets its own chance
  if (acceptances_when_sent != auth_acceptances_) return;  // a later attempt got through
  const int64_t now = clock_->MonotonicMs();
  if (now < auth_paused_until_ms_) return;  // another shard's refusal paused everyone already
  const int64_t delay = BackoffMs(options_, ++auth_refusals_, nullptr);
  auth_paused_until_ms_ = now + delay;
  if (!auth_failing_.exchange(true)) {
    Log().error(
        "the lobby refuses this node's token ({}): delivery is paused on every shard and "
        "retried with backoff; every result is kept. Fix the token (SIGHUP reloads it)",
        cause);
  } else {
    Log().warn("the lobby still refuses this node's token ({}); next try in {} ms", cause, delay);
  }
}

void Deliverer::Impl::OnEndpointRefusedToken(size_t endpoint, const std::string& cause) {
  MutexLock lock(&auth_mu_);
  if (endpoint_refuses_[endpoint]) return;
  endpoint_refuses_[endpoint] = true;
  ++endpoints_refusing_;
  Log().warn("the lobby at {} refuses this node's token ({}); shards move on to the next lobby URL",
             options_.lobby_urls[endpoint], cause);
}

void Deliverer::Impl::OnAuthAccepted(size_t endpoint) {
  ++auth_acceptances_;
  if (!auth_failing_.load() && endpoints_refusing_.load() == 0) return;  // the usual case
  MutexLock lock(&auth_mu_);
  if (endpoint_refuses_[endpoint]) {
    endpoint_refuses_[endpoint] = false;
    --endpoints_refusing_;
    Log().info("the lobby at {} accepts this node's token again", options_.lobby_urls[endpoint]);
  }
  if (!auth_failing_.load()) return;
  auth_refusals_ = 0;
  auth_paused_until_ms_ = 0;
  if (auth_failing_.exchange(false)) Log().info("the lobby accepts this node's token again");
}

void Deliverer::Impl::FallBackToSingleRequests(uint32_t shard, const Attempt& a) {
  if (single_requests_.exchange(true)) return;
  Log().warn(
      "shard={}: the lobby has no {} ({}: {}); every shard sends one result per request to {} "
      "from now on (restart the node to try batches again)",
      shard, kBatchPath, a.cause, Shown(a.message), kSettlementsPath);
}

Status Deliverer::Impl::Health() const {
  for (const auto& loop : loops_) {
    if (Status s = loop->Health(options_.loop_failures_unhealthy); !s.ok()) return s;
  }
  return Status::Ok();
}

void Deliverer::Impl::Wake() {
  for (auto& loop : loops_) loop->Wake();
}

void Deliverer::Impl::RetryNow() {
  {
    MutexLock lock(&auth_mu_);
    auth_refusals_ = 0;
    auth_paused_until_ms_ = std::min(auth_paused_until_ms_.load(), clock_->MonotonicMs());
  }
  for (auto& loop : loops_) loop->RetryNow();
}

size_t Deliverer::Impl::RoomsInBackoff() const {
  size_t n = 0;
  for (const auto& loop : loops_) n += loop->rooms_in_backoff();
  return n;
}

Deliverer::Deliverer(storage::Outbox& outbox, DelivererOptions options, metrics::Registry* registry)
    : impl_(std::make_unique<Impl>(outbox, std::move(options), registry)) {}

Deliverer::~Deliverer() { Stop(); }

Status Deliverer::Start() { return impl_->Start(); }
void Deliverer::Stop() { impl_->Stop(); }
void Deliverer::Wake() { impl_->Wake(); }
void Deliverer::RetryNow() { impl_->RetryNow(); }
size_t Deliverer::RoomsInBackoff() const { return impl_->RoomsInBackoff(); }
Status Deliverer::SetToken(std::string token) { return impl_->SetToken(std::move(token)); }
Status Deliverer::Health() const { return impl_->Health(); }
bool Deliverer::auth_failing() const { return impl_->auth_failing(); }
uint64_t Deliverer::resolved() const { return impl_->resolved_.load(); }
uint64_t Deliverer::acked() const { return impl_->acked_.load(); }

}  // namespace verdict::delivery
