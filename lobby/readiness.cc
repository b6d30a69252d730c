#include "lobby/readiness.h"

#include <spdlog/spdlog.h>

namespace verdict::lobby {

ReadinessMonitor::ReadinessMonitor(std::function<Status()> probe, ReadinessOptions options)
    : probe_(std::move(probe)), options_(options) {}

ReadinessMonitor::~ReadinessMonitor() { Stop(); }

void ReadinessMonitor::Start() {
  Refresh();
  thread_ = std::thread([this] {
    MutexLock lock(&mu_);
    while (!stop_) {
      const auto deadline = std::chrono::steady_clock::now() + options_.interval;
      while (!stop_) {
        if (wake_.WaitUntil(deadline)) break;
      }
      if (stop_) break;
      lock.Unlock();
      Refresh();
      lock.Lock();
    }
  });
}

void ReadinessMonitor::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  wake_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

Status ReadinessMonitor::Current() const {
  MutexLock lock(&mu_);
  if (probe_started_ms_ &&
      options_.clock->MonotonicMs() - *probe_started_ms_ > options_.timeout.count()) {
    return UnavailableError("the database has not answered the readiness probe within " +
                            std::to_string(options_.timeout.count()) + " ms");
  }
  return last_;
}

void ReadinessMonitor::Refresh() {
  MutexLock one(&probing_);
  {
    MutexLock lock(&mu_);
    probe_started_ms_ = options_.clock->MonotonicMs();
  }
  Status verdict = probe_();
  MutexLock lock(&mu_);
  probe_started_ms_.reset();
  if (verdict.ok() != last_.ok() || verdict.message() != last_.message()) {
    if (verdict.ok()) {
      spdlog::info("ready: settlements can commit");
    } else {
      spdlog::warn("not ready: {}", verdict.ToString());
    }
  }
  last_ = std::move(verdict);
}

}  // namespace verdict::lobby
