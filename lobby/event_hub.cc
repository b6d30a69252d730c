#include "lobby/event_hub.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <algorithm>

#include <boost/asio/post.hpp>
#include <pqxx/pqxx>

#include <spdlog/spdlog.h>

#include "common/failpoint.h"

namespace verdict::lobby {
namespace {

// When the LISTEN connection cannot be opened, the hub tries again this much later, and polls
// meanwhile.
constexpr std::chrono::seconds kListenRetryInterval{1};

// Notes who sent the notifications get_notifs() reads: a notification only wakes the hub's poll,
// and its payload is empty, as it only says "read the feed".
class WakeOnNotify final : public pqxx::notification_receiver {
 public:
  explicit WakeOnNotify(pqxx::connection_base& conn)
      : pqxx::notification_receiver(conn, EventHub::kChannel) {}
  void operator()(const std::string&, int backend_pid) override { senders.push_back(backend_pid); }
  std::vector<int> senders;  // the backend pids of the sessions that sent them
};

// The sessions of a hub's own sequencer it remembers (its pool's connections, and those that
// replaced them); past this many it forgets them all and learns them again, at the cost of a
// pass for each notification of theirs until it has.
constexpr size_t kMaxSequencerSessions = 64;

// A WebSocket close frame's reason holds at most 123 bytes (RFC 6455, 5.5).
static_assert(kFeedWentBack.size() <= 123 && kFeedNewEpoch.size() <= 123);

}  // namespace

EventHub::EventHub(FeedStore& feed, pg::ConnectionOptions connection, EventHubOptions options,
                   metrics::Registry& registry)
    : feed_(feed),
      connection_(std::move(connection)),
      options_(options),
      reads_(registry.AddLabeledCounter(
          "verdict_lobby_event_feed_reads_total",
          "Reads of the event feed from the database, by reader: hub (this lobby's reader of "
          "the feed), catch_up (subscribers paging the feed) and judge (subscriptions judged).",
          "reader")),
      rewinds_(registry.AddCounter(
          "verdict_lobby_event_feed_rewinds_total",
          "Times the event feed was found gone back in time (a head below the one read, or a "
          "new epoch), and every subscriber closed to be judged again.")),
      wake_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      pages_(std::make_unique<boost::asio::thread_pool>(
          static_cast<size_t>(std::max(1, options_.page_threads)))) {}

EventHub::~EventHub() {
  Stop();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void EventHub::Start() {
  // Subscribers hear live what is published after the feed's head at start; older events they
  // page themselves with ?after=.
  reads_.Add("hub");
  if (auto state = feed_.GetFeedState(std::nullopt); state.ok()) {
    cursor_ = state->head;
    epoch_ = state->epoch;
    head_.store(state->head);
  }
  thread_ = std::thread([this] { Run(); });
}

void EventHub::Stop() {
  if (stopping_.exchange(true)) return;
  Wake();
  if (thread_.joinable()) thread_.join();
  // A page read, running or queued, holds its subscriber, and a subscriber's socket belongs to
  // the server's io_context. They are released here, while that server still exists (it stops
  // first and is destroyed after the hub stops); released later, a subscriber's WebSocket
  // would be torn down against the server's freed io_context.
  std::unique_ptr<boost::asio::thread_pool> pages;
  {
    MutexLock lock(&mu_);
    pages = std::move(pages_);
  }
  pages.reset();  // waits for the reads in progress, then drops the queued ones
}

void EventHub::Subscribe(std::weak_ptr<EventSubscriber> subscriber) {
  MutexLock lock(&mu_);
  subscribers_.push_back(std::move(subscriber));
}

void EventHub::Committed() { Wake(); }

void EventHub::Wake() {
  const uint64_t one = 1;
  if (::write(wake_fd_, &one, sizeof(one)) < 0) {
    // EAGAIN: the counter is at its maximum, far from zero, so the hub is woken anyway.
  }
}

void EventHub::FetchPage(int64_t after, std::optional<std::string> node_id, size_t limit,
                         std::function<void(Result<FeedPage>)> done) {
  MutexLock lock(&mu_);
  if (!pages_) return;  // stopped: the subscriber is closing with the server
  boost::asio::post(*pages_,
                    [this, after, node_id = std::move(node_id), limit, done = std::move(done)] {
                      reads_.Add("catch_up");
                      done(feed_.EventsAfter(after, node_id, limit));
                    });
}

void EventHub::FetchState(std::optional<std::string> node_id,
                          std::function<void(Result<FeedState>)> done) {
  MutexLock lock(&mu_);
  if (!pages_) return;
  boost::asio::post(*pages_, [this, node_id = std::move(node_id), done = std::move(done)] {
    reads_.Add("judge");
    done(feed_.GetFeedState(node_id));
  });
}

void EventHub::SequenceAndPublish() {
  for (;;) {  // number everything committed so far, a bounded transaction at a time
    auto sequenced = feed_.SequenceEvents(static_cast<int>(options_.page_events));
    if (!sequenced.ok()) {
      LogLimited(*spdlog::default_logger(), warnings_, spdlog::level::warn,
                 "event feed: cannot number events: {}", sequenced.status().ToString());
      break;
    }
    if (sequencer_sessions_.size() >= kMaxSequencerSessions) sequencer_sessions_.clear();
    sequencer_sessions_.insert(sequenced->backend_pid);
    if (sequenced->numbered < static_cast<int>(options_.page_events)) break;
  }
  // Armed in tests only: the hub numbers events but reads none, as if its reads failed, so that
  // its head stays where it was while the feed goes back in time under it.
  if (CheckFailpoint("hub.before_read") == FailAction::kError) return;
  if (cursor_ < 0) {  // the database was away at start: begin at the head it has now
    reads_.Add("hub");
    auto state = feed_.GetFeedState(std::nullopt);
    if (!state.ok()) return;
    cursor_ = state->head;
    epoch_ = state->epoch;
    head_.store(cursor_);
  }
  if (MoveHeadIfNobodyListens()) return;
  for (;;) {
    reads_.Add("hub");
    auto page = feed_.EventsAfter(cursor_, std::nullopt, options_.page_events);
    if (!page.ok()) {
      LogLimited(*spdlog::default_logger(), warnings_, spdlog::level::warn,
                 "event feed: cannot read: {}", page.status().ToString());
      return;
    }
    if (page->head < cursor_ || page->epoch != epoch_) return Rewind(*page);
    if (page->last <= cursor_) return;
    cursor_ = page->last;
    const bool full = page->events.size() == options_.page_events;
    Publish(std::make_shared<const FeedPage>(std::move(*page)));
    if (!full) return;
  }
}

bool EventHub::MoveHeadIfNobodyListens() {
  if (LiveSubscribers().empty() == false) return false;
  reads_.Add("hub");
  auto state = feed_.GetFeedState(std::nullopt);
  if (!state.ok()) {
    LogLimited(*spdlog::default_logger(), warnings_, spdlog::level::warn,
               "event feed: cannot read where it stands: {}", state.status().ToString());
    return true;
  }
  if (state->head < cursor_ || state->epoch != epoch_) {
    FeedPage where;  // no events: only where the feed stands
    where.after = where.last = cursor_;
    where.epoch = state->epoch;
    where.head = state->head;
    Rewind(where);
    return true;
  }
  // Under the subscribers' lock: a subscriber that joins after this reads the moved head and
  // catches up to it by itself; one that joined before it makes the hub read and publish pages.
  MutexLock lock(&mu_);
  std::erase_if(subscribers_, [](const auto& w) { return w.expired(); });
  if (!subscribers_.empty()) return false;
  cursor_ = state->head;
  head_.store(cursor_);
  return true;
}

void EventHub::Publish(std::shared_ptr<const FeedPage> page) {
  // The head moves before any subscriber hears of the page: a subscriber that finds the head
  // above its cursor after catching up knows a page is on its way or already missed.
  head_.store(page->last);
  for (const auto& s : LiveSubscribers()) s->Deliver(page);
}

void EventHub::Rewind(const FeedPage& page) {
  const bool new_epoch = page.epoch != epoch_;
  const std::vector<std::shared_ptr<EventSubscriber>> live = LiveSubscribers();
  spdlog::warn(
      "event feed: the feed went back in time ({}; its head is {}, this lobby had read to {}): "
      "closing {} subscriber{} to be judged again",
      new_epoch ? "epoch " + epoch_ + " is now " + page.epoch : "the same epoch " + epoch_,
      page.head, cursor_, live.size(), live.size() == 1 ? "" : "s");
  rewinds_.Add();
  // The places above the new head will be handed out again, and published from here on. A
  // subscriber judged before the rewind but subscribed after it is judged by its own next page
  // (its epoch, and its cursor against the page's head).
  cursor_ = page.head;
  epoch_ = page.epoch;
  head_.store(page.head);
  for (const auto& s : live) s->FeedRewound(new_epoch ? kFeedNewEpoch : kFeedWentBack);
}

std::vector<std::shared_ptr<EventSubscriber>> EventHub::LiveSubscribers() {
  std::vector<std::shared_ptr<EventSubscriber>> live;
  MutexLock lock(&mu_);
  std::erase_if(subscribers_, [](const auto& w) { return w.expired(); });
  for (const auto& w : subscribers_) {
    if (auto s = w.lock()) live.push_back(std::move(s));
  }
  return live;
}

void EventHub::Run() {
  std::unique_ptr<pqxx::connection> conn;
  std::unique_ptr<WakeOnNotify> receiver;
  auto next_listen = std::chrono::steady_clock::now();
  bool pass = true;  // whether the feed may have moved since the last pass read it
  while (!stopping_.load()) {
    if (!conn && std::chrono::steady_clock::now() >= next_listen) {
      try {
        if (CheckFailpoint("hub.before_listen") == FailAction::kError) {
          throw std::runtime_error("failpoint hub.before_listen");
        }
        auto opened = pg::Connect(connection_);
        if (!opened.ok()) throw std::runtime_error(opened.status().message());
        conn = std::move(*opened);
        receiver = std::make_unique<WakeOnNotify>(*conn);
        pass = true;  // what was sent while nobody listened
      } catch (const std::exception& e) {
        receiver.reset();
        conn.reset();
        LogLimited(*spdlog::default_logger(), warnings_, spdlog::level::warn,
                   "event feed: no LISTEN connection ({}); polling every {} ms", e.what(),
                   options_.poll_interval.count());
        next_listen = std::chrono::steady_clock::now() + kListenRetryInterval;
      }
    }
    if (pass) SequenceAndPublish();

    pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {conn ? conn->sock() : -1, POLLIN, 0}};
    const int ready = ::poll(fds, 2, static_cast<int>(options_.poll_interval.count()));
    uint64_t count = 0;
    // EAGAIN: woken by the interval or the database, not by Wake; nothing to reset.
    const bool woken = ::read(wake_fd_, &count, sizeof(count)) > 0;
    bool heard_another = false;
    if (conn && (fds[1].revents & (POLLIN | POLLERR | POLLHUP))) {
      try {
        receiver->senders.clear();
        conn->get_notifs();
        heard_another = std::any_of(receiver->senders.begin(), receiver->senders.end(),
                                    [&](int pid) { return !sequencer_sessions_.contains(pid); });
      } catch (const std::exception& e) {
        LogLimited(*spdlog::default_logger(), warnings_, spdlog::level::warn,
                   "event feed: LISTEN connection lost: {}", e.what());
        receiver.reset();
        conn.reset();
      }
    }
    // A notification its own sequencer sent says only what the pass that sequenced has read
    // already: with one room a transaction, passing again for it made the hub cost the database
    // as much as the settlements (bench/RESULTS.md, "The event as the text it is served as, and
    // the hub woken by itself"). A commit of this lobby wakes it by Wake; another lobby's
    // sequencer by its notification; and the interval, or a lost LISTEN connection, makes it pass
    // anyway.
    pass = ready <= 0 || woken || heard_another || !conn;
  }
  receiver.reset();
  conn.reset();
}

}  // namespace verdict::lobby
