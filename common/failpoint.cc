#include "common/failpoint.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/log.h"

namespace verdict {
namespace {

// How long a `delay` failpoint holds its caller.
constexpr std::chrono::milliseconds kDelay{300};

struct Armed {
  std::string action;   // "error", "crash", "delay" or "hang"
  long remaining = -1;  // -1: unlimited
};

class Failpoints {
 public:
  Failpoints() {
    const char* spec = std::getenv("VERDICT_FAILPOINTS");
    if (spec == nullptr) return;
    std::string all(spec);
    size_t start = 0;
    while (start <= all.size()) {
      size_t end = all.find(',', start);
      if (end == std::string::npos) end = all.size();
      Parse(all.substr(start, end - start));
      start = end + 1;
    }
  }

  FailAction Check(std::string_view name) {
    if (points_.empty()) return FailAction::kNone;
    std::unique_lock lock(mu_);
    auto it = points_.find(std::string(name));
    if (it == points_.end() || it->second.remaining == 0) return FailAction::kNone;
    if (it->second.remaining > 0) --it->second.remaining;
    const std::string action = it->second.action;
    lock.unlock();
    if (action == "delay") {
      std::this_thread::sleep_for(kDelay);
      return FailAction::kNone;
    }
    Log().warn("failpoint {} fired ({})", name, action);
    if (action == "hang") {
      for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
    }
    if (action == "crash") {
      Log().flush();
      ::kill(::getpid(), SIGKILL);
    }
    return FailAction::kError;
  }

 private:
  void Parse(const std::string& entry) {
    const size_t eq = entry.find('=');
    if (entry.empty()) return;
    if (eq == std::string::npos) {
      Log().error("VERDICT_FAILPOINTS: '{}' is not NAME=ACTION; ignored", entry);
      return;
    }
    std::string action = entry.substr(eq + 1);
    Armed armed;
    if (const size_t star = action.find('*'); star != std::string::npos) {
      armed.remaining = std::strtol(action.c_str() + star + 1, nullptr, 10);
      action.resize(star);
    }
    if (action != "error" && action != "crash" && action != "delay" && action != "hang") {
      Log().error("VERDICT_FAILPOINTS: unknown action '{}' for {}; ignored", action,
                  entry.substr(0, eq));
      return;
    }
    armed.action = action;
    points_[entry.substr(0, eq)] = armed;
    Log().warn("failpoint {} armed: {}", entry.substr(0, eq), entry.substr(eq + 1));
  }

  std::mutex mu_;
  std::map<std::string, Armed, std::less<>> points_;
};

}  // namespace

FailAction CheckFailpoint(std::string_view name) {
  static Failpoints points;
  return points.Check(name);
}

}  // namespace verdict
