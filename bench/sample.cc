#include "bench/sample.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <pqxx/pqxx>

#include "lobby/schema.h"
#include "proto/wire.h"
#include "server/http_client.h"

extern char** environ;

namespace verdict::bench {

v1::BattleResult PaddedResult(size_t size) {
  v1::BattleResult r;
  r.set_room_id(1);
  r.set_outcome(v1::SETTLED);
  r.set_winner_team(1);
  r.set_ended_at_ms(1'700'000'000'000);
  r.set_node_id("bench-node");
  for (uint32_t i = 1; i <= 10; ++i) {
    v1::PlayerResult* p = r.add_players();
    p->set_player_id(std::to_string(1000 + i));
    p->set_team(i <= 5 ? 1 : 2);
    p->set_kills(i);
    p->set_deaths(10 - i);
    p->set_score(100 * i);
  }
  const size_t base = wire::DeterministicBytes(r).size();
  if (size > base + 3) r.set_replay_path(std::string(size - base - 3, 'r'));
  return r;
}

double Percentile(std::vector<double> samples, double fraction) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  return samples[std::min(samples.size() - 1, static_cast<size_t>(fraction * samples.size()))];
}

double CpuSeconds(int who) {
  rusage usage{};
  getrusage(who, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

Progress::Progress(std::string label, double total_s, const std::atomic<uint64_t>& done)
    : thread_([this, label = std::move(label), total_s, &done] {
        const auto start = std::chrono::steady_clock::now();
        std::unique_lock lock(mu_);
        while (!cv_.wait_for(lock, std::chrono::seconds(1), [&] { return stop_; })) {
          const double elapsed =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          if (total_s > 0) {
            std::fprintf(stderr, "  %s: %.0f/%.0f s, %llu done\n", label.c_str(), elapsed, total_s,
                         static_cast<unsigned long long>(done.load()));
          } else {
            std::fprintf(stderr, "  %s: %.0f s, %llu done\n", label.c_str(), elapsed,
                         static_cast<unsigned long long>(done.load()));
          }
        }
      }) {}

Progress::~Progress() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

double ProcessCpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return -1;
  // The command (field 2) is in parentheses and may hold spaces: count the fields after it.
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int n = 3; n <= 15 && fields >> field; ++n) {
    if (n == 14 || n == 15) ticks += std::stod(field);  // utime, stime
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

HostCpu HostCpuNow() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  in >> cpu;  // "cpu": the sum over the cores
  // user nice system idle iowait irq softirq steal, in ticks
  double ticks[8] = {};
  for (double& t : ticks) in >> t;
  const double tick_s = 1.0 / static_cast<double>(::sysconf(_SC_CLK_TCK));
  HostCpu host;
  for (int i = 0; i < 8; ++i) {
    host.total_s += ticks[i] * tick_s;
    if (i != 3 && i != 4) host.busy_s += ticks[i] * tick_s;
  }
  return host;
}

double StatusMiB(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) / 1024;
  }
  return -1;
}

std::string NodeBinary(const std::string& given) {
  if (!given.empty()) return given;
#ifdef VERDICT_NODE_BINARY
  if (std::filesystem::exists(VERDICT_NODE_BINARY)) return VERDICT_NODE_BINARY;
#endif
  return "verdict-node";  // from PATH
}

Result<pid_t> SpawnWithLog(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> owned = args;
  std::vector<char*> argv;
  for (auto& a : owned) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&files, 1, 2);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], &files, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  if (rc != 0) return UnavailableError("cannot start " + args[0] + ": " + std::strerror(rc));
  return pid;
}

Result<pid_t> SpawnReadyNode(const std::vector<std::string>& args, const std::string& ingest,
                             const std::string& log) {
  constexpr std::chrono::seconds kStartFor{30};
  constexpr std::chrono::milliseconds kProbeEvery{50};
  auto pid = SpawnWithLog(args, log);
  if (!pid.ok()) return pid.status();
  const auto address = server::ListenAddress::Parse(ingest);
  if (!address.ok()) {
    StopChild(*pid, "verdict-node").IgnoreError();
    return address.status();
  }
  const auto started = std::chrono::steady_clock::now();
  for (;;) {
    server::BlockingHttpClient probe(*address, std::chrono::seconds(1));
    auto ready = probe.Call({"GET", "/readyz", "", "", "", ""});
    if (ready.ok() && ready->status == 200) return *pid;
    if (std::chrono::steady_clock::now() - started > kStartFor) {
      const Status stopped = StopChild(*pid, "verdict-node");
      return UnavailableError("verdict-node did not become ready" +
                              (stopped.ok() ? "" : " (" + stopped.ToString() + ")") + "; see " +
                              log);
    }
    std::this_thread::sleep_for(kProbeEvery);
  }
}

std::string LobbyBinary(const std::string& given) {
  if (!given.empty()) return given;
#ifdef VERDICT_LOBBY_BINARY
  if (std::filesystem::exists(VERDICT_LOBBY_BINARY)) return VERDICT_LOBBY_BINARY;
#endif
  return "verdict-lobby";  // from PATH
}

Result<LobbyChild> SpawnLobby(const std::string& binary, const std::string& conninfo,
                              const std::vector<std::string>& serve_args, const std::string& log) {
  std::vector<std::string> args = {binary, "--db",  conninfo,   "--log-level",
                                   "warn", "serve", "--listen", "127.0.0.1:0"};
  args.insert(args.end(), serve_args.begin(), serve_args.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int out[2];
  if (::pipe(out) != 0) return InternalError("pipe failed");
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_adddup2(&files, out[1], 1);
  posix_spawn_file_actions_addopen(&files, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addclose(&files, out[0]);
  LobbyChild lobby;
  const int rc = posix_spawnp(&lobby.pid, argv[0], &files, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    return UnavailableError("cannot start " + args[0] + ": " + std::strerror(rc));
  }
  std::string line;
  char c;
  while (::read(out[0], &c, 1) == 1 && c != '\n') line += c;
  ::close(out[0]);
  const size_t colon = line.rfind(':');
  if (!line.starts_with("listening on") || colon == std::string::npos) {
    ::kill(lobby.pid, SIGKILL);
    ::waitpid(lobby.pid, nullptr, 0);
    return UnavailableError(binary + " did not come up; see " + log);
  }
  lobby.port = static_cast<uint16_t>(std::stoi(line.substr(colon + 1)));
  return lobby;
}

Status StopChild(pid_t pid, const std::string& what, std::chrono::seconds grace) {
  ::kill(pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  int status = 0;
  pid_t reaped = 0;
  while ((reaped = ::waitpid(pid, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (reaped == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return InternalError(what + " did not exit within " + std::to_string(grace.count()) +
                         " s of SIGTERM; killed");
  }
  if (reaped < 0) return InternalError("waiting for " + what + ": " + std::strerror(errno));
  if (WIFSIGNALED(status)) {
    return InternalError(what + " was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
                         strsignal(WTERMSIG(status)) + ") on SIGTERM");
  }
  if (WEXITSTATUS(status) != 0) {
    return InternalError(what + " exited with status " + std::to_string(WEXITSTATUS(status)) +
                         " on SIGTERM");
  }
  return Status::Ok();
}

ScratchDatabase::ScratchDatabase(std::string admin_conninfo, const std::string& mode)
    : admin_(std::move(admin_conninfo)),
      name_("verdict_bench_" + mode + "_" + std::to_string(::getpid())) {
  pqxx::connection admin(admin_);
  pqxx::nontransaction tx(admin);
  tx.exec("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");  // a killed run's, same pid
  tx.exec("CREATE DATABASE " + name_);
}

ScratchDatabase::~ScratchDatabase() {
  try {
    pqxx::connection admin(admin_);
    pqxx::nontransaction(admin).exec("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "could not drop the bench database %s: %s\n", name_.c_str(), e.what());
  }
}

std::unique_ptr<ScratchDatabase> MigratedScratchDatabase(const std::string& admin_conninfo,
                                                         const std::string& mode) {
  std::unique_ptr<ScratchDatabase> database;
  try {
    database = std::make_unique<ScratchDatabase>(admin_conninfo, mode);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cannot reach PostgreSQL (%s): %s\n",
                 admin_conninfo.empty() ? "PG* environment" : admin_conninfo.c_str(), e.what());
    return nullptr;
  }
  if (auto migrated = lobby::Migrate({.conninfo = database->conninfo()}); !migrated.ok()) {
    std::fprintf(stderr, "%s\n", migrated.status().ToString().c_str());
    return nullptr;
  }
  return database;
}

}  // namespace verdict::bench
