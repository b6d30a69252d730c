// ReadinessMonitor: whether this lobby instance can settle now, as /readyz answers it. A thread
// of its own runs a probe (ReadinessProbe: one database connection of its own) every interval,
// and /readyz answers from the last verdict: a flood of readiness checks costs the settlements
// nothing, since it takes neither a DB worker nor a pooled connection. A probe that has not
// answered within the timeout (a database that hangs, a commit waiting for a standby that is gone)
// makes the lobby not ready while it waits. The lobby's main owns it; Start and Stop from one
// thread, Current from any.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <thread>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"

namespace verdict::lobby {

struct ReadinessOptions {
  // Time between the end of one probe and the start of the next.
  // Default: 1 s.
  std::chrono::milliseconds interval{1000};
  // A probe still running after this long makes the lobby not ready until it ends.
  // Default: 5 s.
  std::chrono::milliseconds timeout{5000};
  // Reads the time; tests give a FakeClock. Default: the system clock.
  const Clock* clock = SystemClock::Default();
};

class ReadinessMonitor {
 public:
  // `probe` answers whether settlements can commit now; it is called on the monitor's thread
  // (and on the caller's, by Refresh), never twice at once.
  ReadinessMonitor(std::function<Status()> probe, ReadinessOptions options = {});
  ~ReadinessMonitor();
  ReadinessMonitor(const ReadinessMonitor&) = delete;
  ReadinessMonitor& operator=(const ReadinessMonitor&) = delete;

  // Probes once (so the lobby knows before it listens), then every interval on its thread.
  void Start();
  // Ends the thread once its probe in progress, if any, returns. Idempotent.
  void Stop();

  // The last probe's verdict: OK, or why settlements cannot commit. UNAVAILABLE before the
  // first probe, and while a probe has run longer than the timeout. Never blocks on the database.
  Status Current() const;

  // Runs one probe now and keeps its verdict.
  void Refresh();

 private:
  const std::function<Status()> probe_;
  const ReadinessOptions options_;
  mutable Mutex mu_;
  CondVar wake_{&mu_};
  Mutex probing_;  // one probe at a time
  Status last_ GUARDED_BY(mu_) = UnavailableError("readiness not probed yet");
  std::optional<int64_t> probe_started_ms_ GUARDED_BY(mu_);  // while a probe runs
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace verdict::lobby
