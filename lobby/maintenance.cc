#include "lobby/maintenance.h"

#include <spdlog/spdlog.h>

namespace verdict::lobby {
namespace {

// Rooms released per tick at most: a backlog of them is worked off over the next ticks.
constexpr int kReleasesPerTick = 1000;

}  // namespace

Maintenance::Maintenance(MaintenanceOptions options, RoomStore& rooms, InactivityStore& inactivity,
                         pg::ConnectionOptions connection, metrics::Registry& registry)
    : options_(std::move(options)),
      rooms_(rooms),
      inactivity_(inactivity),
      connection_(std::move(connection)),
      failures_(registry.AddLabeledCounter("verdict_lobby_maintenance_failures_total",
                                           "Maintenance tasks that failed, by task.", "task")),
      dropped_(registry.AddLabeledCounter("verdict_lobby_retention_partitions_dropped_total",
                                          "Partitions retention dropped, by family.", "family")),
      receipts_expired_(
          registry.AddCounter("verdict_lobby_retention_receipts_expired_total",
                              "Receipts retention replaced by the compact record of their room.")),
      released_(registry.AddCounter(
          "verdict_lobby_rooms_auto_released_total",
          "Rooms whose players --release-after released to a pending settlement.")),
      aged_(registry.AddCounter("verdict_lobby_ratings_aged_total",
                                "Idle players' ratings the inactivity pass aged.")) {
  registry.AddGauge("verdict_lobby_oldest_unsettled_allocation_seconds",
                    "Seconds since the oldest room without a receipt was allocated (as of the "
                    "last maintenance tick).",
                    [this] { return oldest_unsettled_s_.load(); });
}

Maintenance::~Maintenance() { Stop(); }

void Maintenance::Start() {
  thread_ = std::thread([this] { Run(); });
}

void Maintenance::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  wake_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

void Maintenance::Run() {
  MutexLock lock(&mu_);
  while (!stopping_) {
    lock.Unlock();
    Tick(std::chrono::steady_clock::now());
    lock.Lock();
    const auto deadline = std::chrono::steady_clock::now() + options_.interval;
    while (!stopping_) {
      if (wake_.WaitUntil(deadline)) break;
    }
  }
}

void Maintenance::Tick(std::chrono::steady_clock::time_point now) {
  const RetentionOptions& retention = options_.retention;
  if (auto created = EnsurePartitions(connection_, retention.partitions, retention.lock_timeout);
      !created.ok()) {
    failures_.Add("partitions");
    spdlog::warn("maintenance: partitions ahead: {}", created.status().ToString());
  }
  if (auto age = rooms_.OldestUnsettledAllocationAge(); age.ok()) {
    oldest_unsettled_s_ = *age;
  } else {
    failures_.Add("oldest_unsettled");
  }
  if (options_.release_after) {
    const auto seconds =
        std::chrono::duration_cast<std::chrono::seconds>(*options_.release_after).count();
    auto released = rooms_.ReleaseRoomsOlderThan(seconds, kReleasesPerTick);
    if (!released.ok()) {
      failures_.Add("release");
      spdlog::warn("maintenance: releasing rooms: {}", released.status().ToString());
    } else if (*released > 0) {
      released_.Add(*released);
      spdlog::warn(
          "maintenance: released the players of {} room{} allocated more than {} s ago "
          "to a pending settlement",
          *released, *released == 1 ? "" : "s", seconds);
    }
  }
  if (options_.aging_per_tick > 0) AgeIdleRatings();
  if (options_.retain_every && (!next_retention_ || now >= *next_retention_)) {
    next_retention_ = now + *options_.retain_every;
    auto report = RetainOnce(connection_, retention);
    if (!report.ok()) {
      failures_.Add("retention");
      spdlog::warn("maintenance: retention pass: {}", report.status().ToString());
      return;
    }
    if (!report->steps_failed.empty()) failures_.Add("retention", report->steps_failed.size());
    dropped_.Add("events", report->event_partitions_dropped);
    dropped_.Add("history", report->history_partitions_dropped);
    receipts_expired_.Add(report->receipts_expired);
    spdlog::info("maintenance: retention pass: {}", report->ToString());
  }
}

void Maintenance::AgeIdleRatings() {
  auto pass = inactivity_.AgeIdleRatings(next_aging_, options_.aging_per_tick);
  if (!pass.ok()) {
    failures_.Add("inactivity");
    spdlog::warn("maintenance: inactivity pass: {}", pass.status().ToString());
    return;
  }
  next_aging_ = pass->next;
  aged_.Add(pass->aged);
}

}  // namespace verdict::lobby
