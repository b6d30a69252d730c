// EventHub: fans battle.settled events out to this instance's WebSocket subscribers. It learns
// of events from this instance's commits (Committed) and from every instance's commits through
// PostgreSQL LISTEN/NOTIFY on its own connection, fetches each event once by id, and delivers
// each to every subscriber once. Once a second (and after reconnecting) it also fetches any
// event newer than the newest it has published, so a lost notification delays an event by at
// most a second instead of losing it. Runs one thread; all methods are thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "lobby/settlement_store.h"

namespace verdict::lobby {

class EventSubscriber {
 public:
  virtual ~EventSubscriber() = default;
  // Called on the hub's thread, once per event; must not block.
  virtual void Deliver(const SettlementEvent& event) = 0;
};

class EventHub {
 public:
  // `store` must outlive the hub. `conninfo` is used for the LISTEN connection.
  EventHub(SettlementStore& store, std::string conninfo);
  ~EventHub();
  EventHub(const EventHub&) = delete;
  EventHub& operator=(const EventHub&) = delete;

  void Start();
  void Stop();

  // Subscribers are held weakly: one that is gone is dropped at the next event.
  void Subscribe(std::weak_ptr<EventSubscriber> subscriber);
  // This instance committed `event_id`; deliver it without waiting for the notification.
  void Committed(int64_t event_id);

  size_t subscriber_count() const;
  bool listening() const;

  static constexpr const char* kChannel = "verdict_settlement_events";

 private:
  void Run();
  void Enqueue(int64_t event_id);
  void PublishPending();
  // Fetches and publishes events newer than the newest published one.
  void CatchUp();
  // Delivers `events` not yet published to every live subscriber.
  void Publish(const std::vector<SettlementEvent>& events);

  SettlementStore& store_;
  const std::string conninfo_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool listening_ = false;
  std::vector<int64_t> pending_;
  std::set<int64_t> published_;  // recent ids, bounded, so each event goes out once
  int64_t published_max_ = 0;
  // Set once the newest event committed before the hub started is known: everything after it
  // is published live, however late the LISTEN connection comes up.
  bool baseline_known_ = false;
  std::vector<std::weak_ptr<EventSubscriber>> subscribers_;
  std::thread thread_;

  friend class NotifyReceiver;
};

}  // namespace verdict::lobby
