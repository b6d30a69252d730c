// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with Clang's
// thread-safety annotations, so the compiler checks the lock rules that used to be comments
// ("guarded by mu_"). A member declared GUARDED_BY(mu_) may only be touched with mu_ held, a
// function declared REQUIRES(mu_) only called with it held; Clang's -Wthread-safety reports
// every place that breaks a rule (./scripts/test runs it as an error). GCC ignores the
// annotations. In the style of leveldb's port/port_stdcxx.h and port/thread_annotations.h.
//
// Wait on a CondVar in a loop that reads the condition in the function holding the lock,
//   while (!done_) done_cv_.Wait();
// rather than behind a lambda predicate: the analysis does not know that a lambda runs with the
// lock held, so it cannot check (and would reject) the guarded reads inside one.
//
// Not installed: the public headers (node/battle_node.h, common/metrics.h) keep std::mutex, so
// that these unprefixed macros never reach a host's code, which may define its own.
//
// Thread-safety: a Mutex and a CondVar are used by many threads at once, as their std
// counterparts are; a MutexLock belongs to the thread that made it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define VERDICT_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define VERDICT_THREAD_ANNOTATION(x)
#endif

// A class that is a lock (Mutex).
#define CAPABILITY(x) VERDICT_THREAD_ANNOTATION(capability(x))
// A class whose objects hold a lock for their lifetime (MutexLock).
#define SCOPED_CAPABILITY VERDICT_THREAD_ANNOTATION(scoped_lockable)
// A member only read or written with the lock held.
#define GUARDED_BY(x) VERDICT_THREAD_ANNOTATION(guarded_by(x))
// A pointer member whose pointee is only read or written with the lock held.
#define PT_GUARDED_BY(x) VERDICT_THREAD_ANNOTATION(pt_guarded_by(x))
// A function called with the lock held, which it leaves held.
#define REQUIRES(...) VERDICT_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
// A function called without the lock (it takes it itself).
#define EXCLUDES(...) VERDICT_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// A function that takes the lock and returns with it held.
#define ACQUIRE(...) VERDICT_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
// A function that releases a lock held on entry.
#define RELEASE(...) VERDICT_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
// A function that returns only if the lock is held (a check, not an acquisition).
#define ASSERT_CAPABILITY(x) VERDICT_THREAD_ANNOTATION(assert_capability(x))
// A function the analysis does not check; say why where it is used.
#define NO_THREAD_SAFETY_ANALYSIS VERDICT_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace verdict {

class CondVar;

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  // Tells the analysis that the calling thread holds the lock (std::mutex cannot check it).
  void AssertHeld() ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` from construction to the end of the scope, like std::unique_lock: Unlock and Lock
// let go of it for a while (work done without the lock) and take it again, and the destructor
// releases it only if it is held, so an exception thrown while it is let go leaves it alone. A
// function that REQUIRES the lock and lets go of it for a while calls the Mutex's own Unlock and
// Lock, and holds it again when it returns.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_->Unlock();
  }

  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RELEASE() {
    mu_->Unlock();
    held_ = false;
  }
  void Lock() ACQUIRE() {
    mu_->Lock();
    held_ = true;
  }

 private:
  Mutex* const mu_;
  bool held_ = true;
};

// A condition variable bound to one Mutex, which every call of Wait, WaitUntil and WaitFor must
// hold; they release it while they sleep and hold it again when they return. Wakeups may be
// spurious: wait in a loop that tests the condition. The calls themselves are not annotated (the
// analysis cannot tell that a CondVar's mutex is its owner's mu_); the loop's reads are checked.
class CondVar {
 public:
  explicit CondVar(Mutex* mu) : mu_(mu) {}
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void Wait() {
    std::unique_lock<std::mutex> lock(mu_->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // Waits until signalled or until `deadline`. Returns true if it returned because the deadline
  // passed, false if it was woken (or woke spuriously) before.
  template <class Clock, class Duration>
  bool WaitUntil(const std::chrono::time_point<Clock, Duration>& deadline) {
    std::unique_lock<std::mutex> lock(mu_->mu_, std::adopt_lock);
    bool timed_out = cv_.wait_until(lock, deadline) == std::cv_status::timeout;
    lock.release();
    return timed_out;
  }
  // WaitUntil(now + timeout) on the steady clock. In a loop, compute the deadline once before it
  // and call WaitUntil, so that spurious wakeups do not stretch the wait.
  template <class Rep, class Period>
  bool WaitFor(const std::chrono::duration<Rep, Period>& timeout) {
    return WaitUntil(std::chrono::steady_clock::now() + timeout);
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
  Mutex* const mu_;
};

}  // namespace verdict
