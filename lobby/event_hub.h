// EventHub: this lobby instance's one reader of the settlement event feed (sql/001_baseline.sql
// says why the feed's order cannot skip an event). Its thread numbers committed events (the
// sequencer; the lobby instances take turns), reads the feed past its cursor in pages and hands
// each page to every live subscriber. It wakes on this instance's commits, on any instance's NOTIFY
// and every poll interval: NOTIFY only makes events arrive sooner, and while the database answers,
// a lost one delays an event by at most one interval (plus, when another instance holds the
// sequencer's turn, until that instance has numbered it). Subscribers that are behind page the
// feed themselves through FetchPage.
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
#include <thread>
#include <vector>

#include "common/mutex.h"
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

class EventSubscriber {
 public:
  virtual ~EventSubscriber() = default;
  // Called on the hub's thread with each page it reads, in feed order (each page's `after` is
  // the previous page's `last`); must not block.
  virtual void Deliver(std::shared_ptr<const FeedPage> page) = 0;
};

class EventHub {
 public:
  // `store` must outlive the hub; give the hub a store of its own (1 + page_threads
  // connections), so subscribers never take the settlements' connections. `connection` opens the
  // LISTEN connection.
  EventHub(SettlementStore& store, pg::ConnectionOptions connection, EventHubOptions options = {});
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
  // page handed to subscribers (0 while the database has not answered).
  int64_t head() const { return head_.load(); }

  // Reads one page of the feed for a subscriber (see SettlementStore::EventsAfter) on a page
  // thread, and calls `done` there; after Stop, drops `done` uncalled.
  void FetchPage(int64_t after, std::optional<std::string> node_id, size_t limit,
                 std::function<void(Result<FeedPage>)> done);
  // Reads where the feed stands (SettlementStore::GetFeedState) on a page thread, for a
  // subscription to be judged before it is accepted, and calls `done` there; after Stop, drops
  // `done` uncalled.
  void FetchState(std::function<void(Result<FeedState>)> done);

  static constexpr const char* kChannel = "verdict_settlement_events";

 private:
  void Run();
  // Numbers committed events, then reads and publishes the feed past cursor_, page by page.
  void SequenceAndPublish();
  void Publish(std::shared_ptr<const FeedPage> page);
  void Wake();

  SettlementStore& store_;
  const pg::ConnectionOptions connection_;
  const EventHubOptions options_;
  mutable Mutex mu_;
  std::vector<std::weak_ptr<EventSubscriber>> subscribers_ GUARDED_BY(mu_);
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> head_{0};
  int64_t cursor_ = -1;  // hub thread only; -1 until the feed's head is known
  int wake_fd_ = -1;     // an eventfd: Committed and Stop write it, the hub thread polls it
  std::unique_ptr<boost::asio::thread_pool> pages_ GUARDED_BY(mu_);  // null once stopped
  std::thread thread_;
};

}  // namespace verdict::lobby
