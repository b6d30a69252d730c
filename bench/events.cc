// `verdict-bench events`: a subscriber catching up a deep history of settlement events.
//   seed     N events (with their matches) written straight into a fresh database, as months of
//            play would leave them;
//   lobby    verdict-lobby started on it, its resident memory taken once it is up;
//   catch-up one WebSocket subscriber reads /v1/events?after=0 to the end as fast as it can,
//            checking that every event arrives once and in feed order;
// and reports events/s and the lobby's peak resident memory over its idle baseline. The lobby
// must page the history as the socket drains, so that extra memory stays flat in N.
#include "bench/events.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <pqxx/pqxx>
#include <string>

#include "bench/feed.h"
#include "bench/sample.h"
#include "lobby/settlement_store.h"

namespace verdict::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr uint64_t kSeedChunk = 50'000;
constexpr std::chrono::milliseconds kFeedStall{
    60'000};  // no event for this long fails the catch-up

// Writes the history, already numbered 1..N, in chunks.
void Seed(const std::string& conninfo, const EventsOptions& o) {
  pqxx::connection conn(conninfo);
  std::atomic<uint64_t> done{0};
  Progress progress("seeding the history (events)", 0, done);
  for (uint64_t first = 1; first <= o.events; first += kSeedChunk) {
    const uint64_t last = std::min(o.events, first + kSeedChunk - 1);
    pqxx::nontransaction(conn).exec(
        "WITH m AS (INSERT INTO matches (room_id, node_id, outcome, winner_team, suspect, "
        "ended_at_ms) SELECT g, 'bench-node', 'SETTLED', 1, false, 0 FROM generate_series(" +
        std::to_string(first) + ", " + std::to_string(last) +
        ") g RETURNING match_id, room_id) "
        "INSERT INTO settlement_events (room_id, node_id, match_id, payload, seq) "
        "SELECT room_id, 'bench-node', match_id, jsonb_build_object('type', 'battle.settled', "
        "'room_id', room_id::text, 'padding', repeat('x', " +
        std::to_string(o.payload) + ")), room_id FROM m");
    done = last;
  }
  pqxx::nontransaction(conn).exec("VACUUM ANALYZE settlement_events");
}

// Starts verdict-lobby on `conninfo`.
Result<LobbyChild> StartLobby(const EventsOptions& o, const std::string& conninfo,
                              const std::string& log) {
  std::vector<std::string> args = {"--node-token", "bench-node=bench-token"};
  if (o.buffer_bytes > 0) {
    args.insert(args.end(), {"--subscriber-buffer-bytes", std::to_string(o.buffer_bytes)});
  }
  return SpawnLobby(LobbyBinary(o.lobby_binary), conninfo, args, log);
}

// Reads the whole feed from the start; returns how many events arrived in order, once each.
Result<uint64_t> CatchUp(uint16_t port, uint64_t events) {
  auto feed = FeedReader::Open(port, "bench-token", 0);
  if (!feed.ok()) return feed.status();
  std::atomic<uint64_t> done{0};
  Progress progress("catching up (events)", 0, done);
  for (uint64_t expected = 1; expected <= events; ++expected) {
    auto message = (*feed)->Next(kFeedStall);
    if (!message.ok()) {
      return UnavailableError(message.status().message() + " after event " +
                              std::to_string(expected - 1) + " of " + std::to_string(events));
    }
    const std::string id = "{\"event_id\":\"" + std::to_string(expected) + "\"";
    if (!message->starts_with(id)) {
      return DataLossError("event " + std::to_string(expected) + " arrived as " +
                           message->substr(0, 40));
    }
    done = expected;
  }
  return events;
}

}  // namespace

int RunEvents(const EventsOptions& o) {
  const std::unique_ptr<ScratchDatabase> database = MigratedScratchDatabase(o.db, "events");
  if (!database) return 1;
  const std::string conninfo = database->conninfo();
  const auto seed_start = SteadyClock::now();
  Seed(conninfo, o);
  const double seed_s = std::chrono::duration<double>(SteadyClock::now() - seed_start).count();

  const std::string root = TempRoot();
  const std::string log = root + "/lobby.log";
  auto lobby = StartLobby(o, conninfo, log);
  if (!lobby.ok()) {
    std::fprintf(stderr, "%s\n", lobby.status().ToString().c_str());
    return 1;
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));  // let it settle before the baseline
  const double baseline_mib = StatusMiB(lobby->pid, "VmRSS");
  const auto start = SteadyClock::now();
  auto read = CatchUp(lobby->port, o.events);
  const double elapsed = std::chrono::duration<double>(SteadyClock::now() - start).count();
  const double peak_mib = StatusMiB(lobby->pid, "VmHWM");
  const bool alive = ::waitpid(lobby->pid, nullptr, WNOHANG) == 0;
  const Status stopped = alive ? StopChild(lobby->pid, "verdict-lobby") : Status::Ok();
  if (!read.ok()) {
    std::fprintf(stderr, "catch-up failed: %s (lobby %s; see %s)\n",
                 read.status().ToString().c_str(), alive ? "alive" : "gone", log.c_str());
    return 1;
  }
  if (!stopped.ok()) {
    std::fprintf(stderr, "%s; see %s\n", stopped.ToString().c_str(), log.c_str());
    return 1;
  }

  const double per_s = static_cast<double>(*read) / elapsed;
  std::fprintf(o.output.json ? stderr : stdout,
               "history     %llu events of ~%zu bytes (seeded in %.1f s)\n"
               "catch-up    %.0f events/s (%.1f s), every event once and in order\n"
               "lobby RSS   %.1f MiB idle, %.1f MiB peak: %.1f MiB for the subscriber\n",
               static_cast<unsigned long long>(o.events), o.payload + 60, seed_s, per_s, elapsed,
               baseline_mib, peak_mib, peak_mib - baseline_mib);
  Report report("events");
  report.Field("events", static_cast<double>(o.events));
  report.Field("events_per_s", per_s);
  report.Field("lobby_baseline_rss_mib", baseline_mib);
  report.Field("lobby_peak_rss_mib", peak_mib);
  report.Field("extra_rss_mib", peak_mib - baseline_mib);
  report.Field("seed_s", seed_s);
  std::error_code ignored;
  std::filesystem::remove_all(root, ignored);
  return report.Emit(o.output);
}

}  // namespace verdict::bench
