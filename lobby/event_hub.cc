#include "lobby/event_hub.h"

#include <pqxx/pqxx>

#include <spdlog/spdlog.h>

#include "common/failpoint.h"

namespace verdict::lobby {

class NotifyReceiver final : public pqxx::notification_receiver {
 public:
  NotifyReceiver(pqxx::connection_base& conn, EventHub* hub)
      : pqxx::notification_receiver(conn, EventHub::kChannel), hub_(hub) {}
  void operator()(const std::string& payload, int) override {
    try {
      hub_->Enqueue(std::stoll(payload));
    } catch (const std::exception&) {
      spdlog::warn("event hub: ignoring notification with payload '{}'", payload);
    }
  }

 private:
  EventHub* hub_;
};

namespace {
constexpr size_t kRecentIds = 100'000;
}

EventHub::EventHub(SettlementStore& store, std::string conninfo)
    : store_(store), conninfo_(std::move(conninfo)) {}

EventHub::~EventHub() { Stop(); }

void EventHub::Start() {
  // The baseline is taken now, before the server accepts anyone: an event committed after
  // this is live for every subscriber even if the LISTEN connection is slow to come up. (Taken
  // at the first LISTEN instead, events committed in between were silently history.)
  if (auto latest = store_.LatestEventId(); latest.ok()) {
    std::lock_guard lock(mu_);
    published_max_ = std::max(published_max_, *latest);
    baseline_known_ = true;
  }
  thread_ = std::thread([this] { Run(); });
}

void EventHub::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void EventHub::Subscribe(std::weak_ptr<EventSubscriber> subscriber) {
  std::lock_guard lock(mu_);
  subscribers_.push_back(std::move(subscriber));
}

void EventHub::Committed(int64_t event_id) { Enqueue(event_id); }

void EventHub::Enqueue(int64_t event_id) {
  std::lock_guard lock(mu_);
  pending_.push_back(event_id);
}

size_t EventHub::subscriber_count() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& s : subscribers_) n += s.expired() ? 0 : 1;
  return n;
}

bool EventHub::listening() const {
  std::lock_guard lock(mu_);
  return listening_;
}

void EventHub::PublishPending() {
  std::vector<int64_t> ids;
  {
    std::lock_guard lock(mu_);
    for (int64_t id : pending_) {
      if (!published_.contains(id)) ids.push_back(id);
    }
    pending_.clear();
  }
  if (ids.empty()) return;
  auto events = store_.EventsByIds(ids);
  if (!events.ok()) {
    spdlog::warn("event hub: cannot fetch events: {}; will retry", events.status().ToString());
    std::lock_guard lock(mu_);
    pending_.insert(pending_.end(), ids.begin(), ids.end());
    return;
  }
  Publish(*events);
}

void EventHub::CatchUp() {
  int64_t newest = 0;
  {
    std::lock_guard lock(mu_);
    newest = published_max_;
  }
  auto events = store_.EventsAfter(newest, 10'000);
  if (events.ok()) Publish(*events);
}

void EventHub::Publish(const std::vector<SettlementEvent>& events) {
  std::vector<std::shared_ptr<EventSubscriber>> live;
  std::vector<const SettlementEvent*> fresh;
  {
    std::lock_guard lock(mu_);
    std::erase_if(subscribers_, [](const auto& w) { return w.expired(); });
    for (const auto& w : subscribers_) {
      if (auto s = w.lock()) live.push_back(std::move(s));
    }
    for (const auto& e : events) {
      if (!published_.insert(e.event_id).second) continue;
      published_max_ = std::max(published_max_, e.event_id);
      fresh.push_back(&e);
    }
    while (published_.size() > kRecentIds) published_.erase(published_.begin());
  }
  for (const SettlementEvent* e : fresh) {
    for (const auto& s : live) s->Deliver(*e);
  }
}

void EventHub::Run() {
  std::unique_ptr<pqxx::connection> conn;
  std::unique_ptr<NotifyReceiver> receiver;
  auto last_catch_up = std::chrono::steady_clock::now();
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) break;
    }
    if (!conn) {
      try {
        if (CheckFailpoint("hub.before_listen") == FailAction::kError) {
          throw std::runtime_error("failpoint hub.before_listen");
        }
        conn = std::make_unique<pqxx::connection>(conninfo_);
        receiver = std::make_unique<NotifyReceiver>(*conn, this);
        // Listening now. Without a baseline from Start (the database was away then),
        // everything committed so far is history that subscribers get through ?after=.
        bool first = false;
        {
          std::lock_guard lock(mu_);
          listening_ = true;
          first = !baseline_known_;
          baseline_known_ = true;
        }
        if (first) {
          auto latest = store_.LatestEventId();
          if (!latest.ok()) throw std::runtime_error(latest.status().ToString());
          std::lock_guard lock(mu_);
          published_max_ = std::max(published_max_, *latest);
        }
        CatchUp();  // events committed while we were not listening
        last_catch_up = std::chrono::steady_clock::now();
      } catch (const std::exception& e) {
        receiver.reset();
        conn.reset();
        spdlog::warn("event hub: cannot listen for events: {}; retrying in 1 s", e.what());
        std::unique_lock lock(mu_);
        listening_ = false;
        wake_.wait_for(lock, std::chrono::seconds(1), [&] { return stopping_; });
        continue;
      }
    }
    try {
      conn->await_notification(0, 100'000);
    } catch (const std::exception& e) {
      spdlog::warn("event hub: listen connection lost: {}", e.what());
      receiver.reset();
      conn.reset();
      std::lock_guard lock(mu_);
      listening_ = false;
      continue;
    }
    PublishPending();
    if (std::chrono::steady_clock::now() - last_catch_up >= std::chrono::seconds(1)) {
      CatchUp();
      last_catch_up = std::chrono::steady_clock::now();
    }
  }
  receiver.reset();
  conn.reset();
}

}  // namespace verdict::lobby
