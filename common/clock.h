// Clock: the one source of time for verdict components, injected so tests never sleep.
// Two readings: wall time for timestamps, and a monotonic reading for waits and durations, so
// that a step of the wall clock (NTP correcting it, a virtual machine restored from a snapshot)
// neither stretches a backoff by the size of the step nor cuts a linger short.
// SystemClock is thread-safe; FakeClock is thread-safe (atomics) and only moves when told.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace verdict {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since the Unix epoch: for timestamps stored or shown (a result's ended_at_ms,
  // a record's enqueued_at_ms).
  virtual int64_t NowMs() const = 0;
  // Milliseconds from an arbitrary origin, never stepped: for deadlines and elapsed times.
  virtual int64_t MonotonicMs() const = 0;
  // The same reading in microseconds, for waits shorter than a millisecond or not a whole number
  // of them (the lobby's group-commit wait). A clock that moves in whole milliseconds need not
  // override it.
  virtual int64_t MonotonicUs() const { return MonotonicMs() * 1000; }
};

class SystemClock final : public Clock {
 public:
  int64_t NowMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  int64_t MonotonicMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  int64_t MonotonicUs() const override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  // A process-wide instance for components given no clock.
  static const Clock* Default() {
    static const SystemClock clock;
    return &clock;
  }
};

// Both readings move together with AdvanceMs; StepWallMs moves the wall time alone, as an
// operator or NTP stepping the system clock would.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t start_ms = 1'700'000'000'000) : now_ms_(start_ms) {}
  int64_t NowMs() const override { return now_ms_.load() + wall_step_ms_.load(); }
  int64_t MonotonicMs() const override { return now_ms_.load(); }
  void AdvanceMs(int64_t ms) { now_ms_ += ms; }
  void StepWallMs(int64_t ms) { wall_step_ms_ += ms; }

 private:
  std::atomic<int64_t> now_ms_;
  std::atomic<int64_t> wall_step_ms_{0};
};

}  // namespace verdict
