#include "lobby/readiness.h"

#include <spdlog/spdlog.h>

namespace verdict::lobby {

ReadinessMonitor::ReadinessMonitor(std::function<Status()> probe, ReadinessOptions options)
    : probe_(std::move(probe)), options_(options) {}

ReadinessMonitor::~ReadinessMonitor() { Stop(); }

void ReadinessMonitor::Start() {
  Refresh();
  thread_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!stop_) {
      if (wake_.wait_for(lock, options_.interval, [this] { return stop_; })) break;
      lock.unlock();
      Refresh();
      lock.lock();
    }
  });
}

void ReadinessMonitor::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status ReadinessMonitor::Current() const {
  std::lock_guard lock(mu_);
  if (probe_started_ms_ &&
      options_.clock->MonotonicMs() - *probe_started_ms_ > options_.timeout.count()) {
    return UnavailableError("the database has not answered the readiness probe within " +
                            std::to_string(options_.timeout.count()) + " ms");
  }
  return last_;
}

void ReadinessMonitor::Refresh() {
  std::lock_guard one(probing_);
  {
    std::lock_guard lock(mu_);
    probe_started_ms_ = options_.clock->MonotonicMs();
  }
  Status verdict = probe_();
  std::lock_guard lock(mu_);
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
