// Maintenance: what `verdict-lobby serve` does besides answering requests, on a thread of its
// own, every `interval`: keeps the partitions of events and history made ahead of the rows
// (always: a settlement never waits for one), measures how long the oldest unsettled room has
// waited (verdict_lobby_oldest_unsettled_allocation_seconds), releases rooms held longer than
// `release_after` to a pending settlement (when set), ages idle players' ratings in the modes
// that declare aging, `aging_per_tick` ratings looked at a tick (docs/modes.md, "Inactivity"),
// and runs a retention pass every `retain_every` (when set). Each task's failure is logged and
// counted, and the next tick tries again; none stops the others. Every lobby instance may run one:
// the database makes one at a time do each piece of work. Start and Stop from one thread; the rest
// is internal.
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "common/metrics.h"
#include "common/mutex.h"
#include "lobby/pg/connection.h"
#include "lobby/retention.h"
#include "lobby/settlement_store.h"

namespace verdict::lobby {

struct MaintenanceOptions {
  // How often the tasks run. Default: 5 s.
  std::chrono::milliseconds interval{5000};
  // The partitions, and the retention pass's windows (see RetentionOptions).
  // Default: RetentionOptions's.
  RetentionOptions retention;
  // A retention pass every this long; nullopt: none (`verdict-lobby retain` or the systemd
  // timer does it). Default: none.
  std::optional<std::chrono::milliseconds> retain_every;
  // Rooms allocated longer ago than this have their players released to a pending settlement;
  // nullopt: never. Default: never.
  std::optional<std::chrono::milliseconds> release_after;
  // Ratings the inactivity pass looks at a tick, in batches of 500 each its own short
  // transaction; it goes round every mode that ages in (its ratings / this) ticks. 0: no pass.
  // Default: 10,000 (a ladder of a million rated players every 100 ticks, under 9 minutes at the
  // default interval).
  int aging_per_tick = 10000;
};

class Maintenance {
 public:
  // `rooms`, `inactivity` and `registry` must outlive it. `connection` is for the retention's
  // own connections.
  Maintenance(MaintenanceOptions options, RoomStore& rooms, InactivityStore& inactivity,
              pg::ConnectionOptions connection, metrics::Registry& registry);
  ~Maintenance();
  Maintenance(const Maintenance&) = delete;
  Maintenance& operator=(const Maintenance&) = delete;

  // Runs the first tick at once, then one every interval.
  void Start();
  // Ends the thread after the task in progress. Idempotent.
  void Stop();

 private:
  void Run();
  void Tick(std::chrono::steady_clock::time_point now);

  const MaintenanceOptions options_;
  void AgeIdleRatings();

  RoomStore& rooms_;
  InactivityStore& inactivity_;
  const pg::ConnectionOptions connection_;
  Mutex mu_;
  CondVar wake_{&mu_};
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;
  std::optional<std::chrono::steady_clock::time_point> next_retention_;  // thread only
  AgingPlace next_aging_;                                                // thread only
  std::atomic<double> oldest_unsettled_s_{0};
  metrics::LabeledCounter& failures_;
  metrics::LabeledCounter& dropped_;
  metrics::Counter& receipts_expired_;
  metrics::Counter& released_;
  metrics::Counter& aged_;
};

}  // namespace verdict::lobby
