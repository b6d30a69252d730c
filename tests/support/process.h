// Child processes for tests: run a command to completion, or keep a verdict-lobby serving on a
// free port. Not thread-safe per object.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace verdict::testing {

struct CommandResult {
  int exit_code = -1;  // -1 if it did not exit normally
  std::string out;     // standard output
};

// Runs argv[0] with `env` added to this process's environment; waits for it.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env = {});

// A `verdict-lobby serve --listen 127.0.0.1:0 …` child. Stopped (SIGTERM, then waited for)
// when destroyed.
class LobbyProcess {
 public:
  // Starts the lobby on `conninfo` with the standard test tokens (node-a=token-a,
  // node-b=token-b, admin token "admin-token") plus `extra_args`, and waits until it prints
  // its port. Returns null (after printing why) if it does not come up.
  static std::unique_ptr<LobbyProcess> Start(const std::string& conninfo,
                                             const std::vector<std::string>& extra_args = {},
                                             const std::map<std::string, std::string>& env = {});
  ~LobbyProcess();

  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  // SIGTERM and wait; returns the exit status as waitpid reports it.
  int Stop();
  // SIGKILL and wait.
  void Kill();

 private:
  LobbyProcess() = default;
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

// Paths of the binaries under test (set by CMake).
std::string LobbyBinary();
std::string NodeBinary();

}  // namespace verdict::testing
