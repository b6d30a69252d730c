#include "tests/support/process.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "tests/support/temp_dir.h"

namespace verdict::testing {
namespace {

// In a forked child: adds `env` and replaces the process with argv[0].
[[noreturn]] void ExecChild(const std::vector<std::string>& argv,
                            const std::map<std::string, std::string>& env) {
  for (const auto& [name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execv(args[0], args.data());
  std::perror("exec");
  ::_exit(127);
}

// fork + exec with stdout to a pipe and, if `stderr_path` is not empty, stderr appended to that
// file; returns the child's pid and the read end.
pid_t Spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
            int* out_fd, const std::string& stderr_path = "") {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (!stderr_path.empty()) {
      const int log = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      ::dup2(log, STDERR_FILENO);
    }
    ::dup2(fds[1], STDOUT_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    ExecChild(argv, env);
  }
  ::close(fds[1]);
  *out_fd = fds[0];
  return pid;
}

}  // namespace

std::string LobbyBinary() { return VERDICT_LOBBY_BINARY; }

uint16_t FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}
std::string NodeBinary() { return VERDICT_NODE_BINARY; }

std::vector<std::string> NodeRunArgs(const std::string& outbox, uint16_t lobby_port,
                                     const std::vector<std::string>& extra,
                                     const std::string& binary) {
  std::vector<std::string> args = {
      binary,    "--log-level", "warn", "run",     "--node-id",
      "node-a",  "--outbox",    outbox, "--lobby", "http://127.0.0.1:" + std::to_string(lobby_port),
      "--token", "token-a"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}
std::string LobbyTestingBinary() { return VERDICT_LOBBY_TESTING_BINARY; }
std::string NodeTestingBinary() { return VERDICT_NODE_TESTING_BINARY; }

CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env) {
  CommandResult result;
  int fd = -1;
  const pid_t pid = Spawn(argv, env, &fd);
  if (pid < 0) return result;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) result.out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

std::unique_ptr<LobbyProcess> LobbyProcess::Start(const std::string& conninfo,
                                                  const std::vector<std::string>& extra_args,
                                                  const std::map<std::string, std::string>& env,
                                                  const std::string& listen,
                                                  const std::string& binary,
                                                  const std::string& log_path) {
  const auto given = [&](const char* flag) {
    return std::find(extra_args.begin(), extra_args.end(), flag) != extra_args.end();
  };
  std::vector<std::string> argv = {binary, "--db", conninfo};
  if (!given("--log-level")) argv.insert(argv.end(), {"--log-level", "warn"});
  argv.insert(argv.end(), {"serve", "--listen", listen, "--node-token", "node-a=token-a",
                           "--node-token", "node-b=token-b", "--admin-token", "admin-token"});
  if (!given("--db-pool")) {
    argv.insert(argv.end(), {"--db-pool", "4"});
  }
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  int fd = -1;
  std::unique_ptr<LobbyProcess> lobby(new LobbyProcess());
  lobby->pid_ = Spawn(argv, env, &fd, log_path);
  if (lobby->pid_ < 0) return nullptr;
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (out.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[256];
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  const std::string prefix = "listening on 127.0.0.1:";
  if (out.rfind(prefix, 0) != 0) {
    std::fprintf(stderr, "lobby did not start; it printed: %s\n", out.c_str());
    lobby->Kill();
    return nullptr;
  }
  lobby->port_ = static_cast<uint16_t>(std::atoi(out.c_str() + prefix.size()));
  return lobby;
}

bool LobbyProcess::Running() {
  if (pid_ <= 0) return false;
  if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

LobbyProcess::~LobbyProcess() {
  if (pid_ <= 0) return;
  // Every test that leaves its lobby running checks it shuts down cleanly: a crash on SIGTERM
  // (a subscriber torn down after the server, say) fails the test that provoked it.
  const pid_t pid = pid_;
  const int status = Stop();
  if (WIFSIGNALED(status)) {
    ADD_FAILURE() << "the lobby (pid " << pid << ") died of signal " << WTERMSIG(status)
                  << " when stopped with SIGTERM";
  }
}

int LobbyProcess::Stop() {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  return status;
}

void LobbyProcess::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

std::unique_ptr<ChildProcess> ChildProcess::Start(const std::vector<std::string>& argv,
                                                  const std::map<std::string, std::string>& env,
                                                  const std::string& log_path) {
  std::unique_ptr<ChildProcess> child(new ChildProcess());
  child->pid_ = ::fork();
  if (child->pid_ < 0) return nullptr;
  if (child->pid_ == 0) {
    const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    ExecChild(argv, env);
  }
  return child;
}

ChildProcess::~ChildProcess() { Kill(); }

void ChildProcess::Reaped(int status) {
  pid_ = -1;
  if (WIFEXITED(status)) exit_code_ = WEXITSTATUS(status);
  signaled_ = WIFSIGNALED(status);
}

bool ChildProcess::Running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    Reaped(status);
    return false;
  }
  return true;
}

bool ChildProcess::WaitFor(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (Running()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    ::usleep(20'000);
  }
  return true;
}

void ChildProcess::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  Reaped(status);
}

int ChildProcess::Terminate() {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  Reaped(status);
  return status;
}

ExitAndOutput RunToExit(const std::vector<std::string>& argv) {
  TempDir dir;
  const std::string log = dir.Sub("output");
  auto child = ChildProcess::Start(argv, {}, log);
  ExitAndOutput exit;
  if (!child) {
    ADD_FAILURE() << "cannot start " << argv[0];
    return exit;
  }
  EXPECT_TRUE(child->WaitFor(std::chrono::seconds(20))) << argv[0] << " is still running";
  exit.code = child->exit_code();
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  exit.output = text.str();
  return exit;
}

}  // namespace verdict::testing
