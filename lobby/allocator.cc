#include "lobby/allocator.h"

#include <malloc.h>

namespace verdict::lobby {

void SetLobbyAllocator() {
  mallopt(M_MMAP_THRESHOLD, 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, 4 * 1024 * 1024);
}

FreeMemoryReturner::FreeMemoryReturner(std::chrono::milliseconds quiet)
    : quiet_(quiet), thread_([this] { Run(); }) {}

FreeMemoryReturner::~FreeMemoryReturner() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  changed_.SignalAll();
  thread_.join();
}

void FreeMemoryReturner::Quiet() {
  {
    MutexLock lock(&mu_);
    due_ = std::chrono::steady_clock::now() + quiet_;
  }
  changed_.SignalAll();
}

void FreeMemoryReturner::Run() {
  MutexLock lock(&mu_);
  while (!stopping_) {
    if (!due_) {
      changed_.Wait();
      continue;
    }
    if (std::chrono::steady_clock::now() < *due_) {
      changed_.WaitUntil(*due_);  // a later Quiet() moves it on
      continue;
    }
    due_.reset();
    lock.Unlock();
    malloc_trim(0);
    lock.Lock();
  }
}

}  // namespace verdict::lobby
