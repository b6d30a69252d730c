// WaitUntil: polls a condition until it holds or a deadline passes, for tests that wait on
// other threads or processes. A bounded wait, never a timing assertion.
#pragma once

#include <chrono>
#include <thread>

namespace verdict::testing {

template <typename F>
bool WaitUntil(F done, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace verdict::testing
