// Cancellation: lets one thread stop the database statement that another thread is running for
// the same request. The HTTP server cancels an attempt whose client has hung up; the store arms
// it around each statement with the libpq cancel of its connection. Thread-safe.
#pragma once

#include <functional>

#include "common/mutex.h"

namespace verdict::lobby {

class Cancellation {
 public:
  // Marks the request cancelled and cancels the statement now running for it, if any. Blocks
  // while that cancel reaches the database server, and the statement's Scope cannot end before
  // it has (so its connection outlives the cancel): never call it on an I/O thread.
  void Cancel() {
    MutexLock lock(&mu_);
    cancelled_ = true;
    if (cancel_statement_) cancel_statement_();
  }

  bool cancelled() const {
    MutexLock lock(&mu_);
    return cancelled_;
  }

  // Store side: while a Scope lives, Cancel() calls `cancel_statement`. A null Cancellation
  // arms nothing. ok() is false if the request was cancelled before the statement started.
  class Scope {
   public:
    Scope(Cancellation* c, std::function<void()> cancel_statement) : c_(c) {
      if (!c_) return;
      MutexLock lock(&c_->mu_);
      ok_ = !c_->cancelled_;
      if (ok_) c_->cancel_statement_ = std::move(cancel_statement);
    }
    ~Scope() {
      if (!c_) return;
      MutexLock lock(&c_->mu_);
      c_->cancel_statement_ = nullptr;
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    bool ok() const { return ok_; }

   private:
    Cancellation* c_;
    bool ok_ = true;
  };

 private:
  mutable Mutex mu_;
  bool cancelled_ GUARDED_BY(mu_) = false;
  std::function<void()> cancel_statement_ GUARDED_BY(mu_);
};

}  // namespace verdict::lobby
