// EventHub: this lobby instance's one reader of the settlement event feed (sql/001_baseline.sql
// says why the feed's order cannot skip an event). Its thread numbers committed events (the
// sequencer; the lobby instances take turns), reads the feed past its cursor in pages and hands
// each page to every live subscriber. It wakes on this instance's commits, on any instance's NOTIFY
// and every poll interval: NOTIFY only makes events arrive sooner, and while the database answers,
// a lost one delays an event by at most one interval (plus, when another instance holds the
// sequencer's turn, until that instance has numbered it). Subscribers that are behind page the
// feed themselves through FetchPage.
// The database can go back in time under a running lobby (a backup restored, a failover to a
// standby that lacked the newest commits): the places after its head are then handed out again,
// to other events. The hub notices at its next read, by a head below the one it had read or a new
// epoch, and tells every subscriber, whose cursor must then be judged again.
// All methods are thread-safe.
#pragma once

#include <atomic>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <vector>

#include "common/log_rate_limit.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "lobby/pg/connection.h"
#include "lobby/settlement_store.h"

namespace verdict::lobby {

struct EventHubOptions {
  // How often the hub numbers and reads the feed when nothing wakes it.
  // Default: 250 ms.
  std::chrono::milliseconds poll_interval{250};
  // Events per page the hub reads.
  // Default: 1000.
  size_t page_events = 1000;
  // Threads that read catch-up pages for subscribers (each uses one of the store's connections).
  // Default: 2.
  int page_threads = 2;
};

// Why a subscriber's cursor no longer means what it did (EventSubscriber::FeedRewound): short
// enough for a WebSocket close frame's reason (123 bytes).
inline constexpr std::string_view kFeedWentBack =
    "the feed went back in time (a restore, or a failover that lost events); reconnect with "
    "?after= and &epoch=";
inline constexpr std::string_view kFeedNewEpoch =
    "the feed has a new epoch (a restore); reconnect with ?after= and &epoch= to be judged again";

class EventSubscriber {
 public:
  virtual ~EventSubscriber() = default;
  // Called on the hub's thread with each page it reads, in feed order (each page's `after` is
  // the previous page's `last`); must not block.
  virtual void Deliver(std::shared_ptr<const FeedPage> page) = 0;
  // Called on the hub's thread when the feed went back in time (`why` is kFeedWentBack or
  // kFeedNewEpoch): the subscriber's cursor may now name other events, so it must end and be
  // judged again. The hub goes on from the feed's new head. Must not block.
  virtual void FeedRewound(std::string_view why) = 0;
};

class EventHub {
 public:
  // `feed` and `registry` must outlive the hub; give the hub a feed store of its own (1 +
  // page_threads connections: PgFeedStore), so subscribers never take the settlements'
  // connections.
  // `connection` opens the LISTEN connection.
  EventHub(FeedStore& feed, pg::ConnectionOptions connection, EventHubOptions options,
           metrics::Registry& registry);
  ~EventHub();
  EventHub(const EventHub&) = delete;
  EventHub& operator=(const EventHub&) = delete;

  void Start();
  // Ends the hub's thread and its page reads, releasing every subscriber they hold. Call it
  // after the HttpServer serving the subscribers has stopped and before that server is
  // destroyed (lobby/main.cc does).
  void Stop();

  // Subscribers are held weakly: one that is gone is dropped at the next page.
  void Subscribe(std::weak_ptr<EventSubscriber> subscriber);
  // This instance committed a settlement: number and publish it without waiting.
  void Committed();
  // The newest place in the feed the hub has read to: the feed's head at Start, then the last
  // page handed to subscribers, or the feed's head when it went back in time (0 while the
  // database has not answered). The hub reads the feed before it sets this: a page read after
  // this was seen has a head at least as high, unless the feed went back in time.
  int64_t head() const { return head_.load(); }

  // Reads one page of the feed for a subscriber (see FeedStore::EventsAfter) on a page
  // thread, and calls `done` there; after Stop, drops `done` uncalled.
  void FetchPage(int64_t after, std::optional<std::string> node_id, size_t limit,
                 std::function<void(Result<FeedPage>)> done);
  // The warnings of the feed that a database outage repeats, by the hub and by every subscriber
  // reading it: one limit for them all (common/log_rate_limit.h).
  LogRateLimit& warnings() { return warnings_; }

  // Reads where the feed stands for `node_id`'s token, or the admin's (FeedStore::
  // GetFeedState) on a page thread, for a subscription to be judged before it is accepted, and
  // calls `done` there; after Stop, drops `done` uncalled.
  void FetchState(std::optional<std::string> node_id, std::function<void(Result<FeedState>)> done);

  static constexpr const char* kChannel = "verdict_settlement_events";

 private:
  void Run();
  // Numbers committed events, then reads and publishes the feed past cursor_, page by page.
  void SequenceAndPublish();
  void Publish(std::shared_ptr<const FeedPage> page);
  // With no subscriber, moves cursor_ and the head to the feed's head without reading its
  // events (what every commit would otherwise read and convert for nobody), noticing a feed that
  // went back in time as a page would; true if it did (or could not read), false if there are
  // subscribers and the pages must be read.
  bool MoveHeadIfNobodyListens();
  // The feed went back in time to `page` (its head is below cursor_, or its epoch is another):
  // goes on from its head and epoch, and tells every subscriber.
  void Rewind(const FeedPage& page);
  std::vector<std::shared_ptr<EventSubscriber>> LiveSubscribers();
  void Wake();

  FeedStore& feed_;
  const pg::ConnectionOptions connection_;
  const EventHubOptions options_;
  mutable Mutex mu_;
  std::vector<std::weak_ptr<EventSubscriber>> subscribers_ GUARDED_BY(mu_);
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> head_{0};
  int64_t cursor_ = -1;  // hub thread only; -1 until the feed's head is known
  std::string epoch_;    // hub thread only, once cursor_ is known: the feed's epoch
  // Hub thread only: the backend pids of the sessions its sequencer ran in, whose notifications
  // it then passes over (Run).
  std::unordered_set<int> sequencer_sessions_;
  metrics::LabeledCounter& reads_;
  metrics::Counter& rewinds_;
  LogRateLimit warnings_{RepeatedFaultLimit()};
  int wake_fd_ = -1;  // an eventfd: Committed and Stop write it, the hub thread polls it
  std::unique_ptr<boost::asio::thread_pool> pages_ GUARDED_BY(mu_);  // null once stopped
  std::thread thread_;
};

}  // namespace verdict::lobby
