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

// Paths of the binaries under test (set by CMake): the shipped programs, and their -testing
// builds, which alone have the negative controls' --unsafe-* switches.
std::string LobbyBinary();
std::string NodeBinary();
std::string LobbyTestingBinary();
std::string NodeTestingBinary();

// `binary` (verdict-node or a build of it) run as node-a with token-a, its outbox at `outbox`,
// delivering to the lobby at 127.0.0.1:`lobby_port`, logging warnings and above; then `extra`.
std::vector<std::string> NodeRunArgs(const std::string& outbox, uint16_t lobby_port,
                                     const std::vector<std::string>& extra = {},
                                     const std::string& binary = NodeBinary());

// Runs argv[0] with `env` added to this process's environment; waits for it.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env = {});

// A `verdict-lobby serve --listen 127.0.0.1:0 …` child. Stopped (SIGTERM, then waited for)
// when destroyed.
class LobbyProcess {
 public:
  // Starts the lobby on `conninfo` with the standard test tokens (node-a=token-a,
  // node-b=token-b, admin token "admin-token"), four DB workers unless `extra_args` sets
  // --db-pool, --log-level warn unless it sets --log-level, plus `extra_args`, and waits until
  // it prints
  // its port. Returns null (after printing why) if it does not come up.
  // `listen` may name a fixed port, so that a restarted lobby is found where the last one was.
  // `binary` is the program to run (LobbyTestingBinary() for a negative control's switch).
  // Its log (stderr) goes to `log_path` if given, else to this process's stderr.
  static std::unique_ptr<LobbyProcess> Start(const std::string& conninfo,
                                             const std::vector<std::string>& extra_args = {},
                                             const std::map<std::string, std::string>& env = {},
                                             const std::string& listen = "127.0.0.1:0",
                                             const std::string& binary = LobbyBinary(),
                                             const std::string& log_path = "");
  ~LobbyProcess();

  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  // Reaps the lobby if it has exited (a crash failpoint, say); true while it runs.
  bool Running();
  // SIGTERM and wait; returns the exit status as waitpid reports it.
  int Stop();
  // SIGKILL and wait.
  void Kill();

 private:
  LobbyProcess() = default;
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

// A long-running child (a verdict-node, say) whose standard output and error go to a file.
// SIGKILLed and reaped when destroyed if still running.
class ChildProcess {
 public:
  static std::unique_ptr<ChildProcess> Start(const std::vector<std::string>& argv,
                                             const std::map<std::string, std::string>& env,
                                             const std::string& log_path);
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  // Reaps the child if it has exited; true while it runs.
  bool Running();
  // The exit code once it exited normally, -1 if killed by a signal or still running.
  int exit_code() const { return exit_code_; }
  bool killed_by_signal() const { return signaled_; }
  // Waits up to `timeout` for it to exit; true if it did.
  bool WaitFor(std::chrono::milliseconds timeout);
  void Kill();      // SIGKILL and reap
  int Terminate();  // SIGTERM and reap; the wait status

 private:
  ChildProcess() = default;
  void Reaped(int status);
  pid_t pid_ = -1;
  int exit_code_ = -1;
  bool signaled_ = false;
};

// How a command ended: its exit code (-1 if it did not exit normally within the wait) and
// everything it printed, standard output and standard error together.
struct ExitAndOutput {
  int code = -1;
  std::string output;
};

// Runs `argv` to its end (a test failure if it takes over 20 s).
ExitAndOutput RunToExit(const std::vector<std::string>& argv);

// A TCP port on 127.0.0.1 that was free a moment ago.
uint16_t FreeLoopbackPort();

}  // namespace verdict::testing
