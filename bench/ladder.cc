// `verdict-bench ladder`: what must not grow with the number of players, at millions of them.
//   seed        N players written straight into a fresh database, each rated in the mode
//               "default" (Elo ratings spread over 900–2099), as years of play would leave them;
//   leaderboard GET /v1/modes/default/leaderboard?limit=100 from a verdict-lobby, the first page
//               and each next one by the cursor of the page before, timed one by one;
//   release     R rooms of ten of those players allocated, then each released with
//               POST /v1/rooms/{id}:release, timed one by one (a release marks the room, and
//               never reads players);
//   reference   what touching every row costs: a count(*) of the mode's ratings, and a full
//               scan of players, which a release made (by in_battle_room) before 38's fix.
// A page and a release must stay far below the references, and flat as N grows.
#include "bench/ladder.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <pqxx/pqxx>
#include <vector>

#include "bench/sample.h"
#include "server/http_client.h"

namespace verdict::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr char kAdminToken[] = "bench-admin";
constexpr uint64_t kSeedChunk = 1'000'000;
constexpr uint64_t kFirstRoom = 1;

double Ms(SteadyClock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Players 1 … N (ids their decimal strings), each rated in "default".
void Seed(const std::string& conninfo, uint64_t players) {
  pqxx::connection conn(conninfo);
  std::atomic<uint64_t> done{0};
  Progress progress("seeding players and their ratings", 0, done);
  for (uint64_t first = 1; first <= players; first += kSeedChunk) {
    const uint64_t last = std::min(players, first + kSeedChunk - 1);
    pqxx::work tx(conn);
    tx.exec_params(
        "INSERT INTO players (player_id) SELECT g::text FROM generate_series($1::bigint, "
        "$2::bigint) g",
        first, last);
    tx.exec_params(
        "INSERT INTO player_ratings (mode_id, player_id, rating, displayed, games, wins, losses, "
        "draws, last_match_at) SELECT (SELECT mode_id FROM modes WHERE mode = 'default'), g::text, "
        "r, r, 10, 5, 5, 0, now() FROM "
        "(SELECT g, 1500 + hashint8(g) % 600 AS r FROM generate_series($1::bigint, $2::bigint) g) "
        "s",
        first, last);
    tx.commit();
    done = last;
  }
  pqxx::nontransaction(conn).exec("VACUUM ANALYZE players, player_ratings");
}

// Milliseconds of `sql` run once (the reference).
double TimeQuery(const std::string& conninfo, const std::string& sql) {
  pqxx::connection conn(conninfo);
  const auto start = SteadyClock::now();
  pqxx::nontransaction(conn).exec(sql);
  return Ms(SteadyClock::now() - start);
}

// The value of the JSON string member `name` in `json` ("" if absent): enough for the cursor.
std::string StringMember(const std::string& json, const std::string& name) {
  const std::string key = "\"" + name + "\":\"";
  const size_t at = json.find(key);
  if (at == std::string::npos) return "";
  const size_t end = json.find('"', at + key.size());
  return end == std::string::npos ? "" : json.substr(at + key.size(), end - at - key.size());
}

// Times `pages` leaderboard pages, each after the one before; their milliseconds.
Result<std::vector<double>> ReadPages(server::BlockingHttpClient& client, int pages) {
  std::vector<double> ms;
  std::string after;
  for (int i = 0; i < pages; ++i) {
    const std::string target =
        "/v1/modes/default/leaderboard?limit=100" + (after.empty() ? "" : "&after=" + after);
    const auto start = SteadyClock::now();
    auto reply = client.Call(
        {"GET", target, "", "application/json", std::string("Bearer ") + kAdminToken, ""});
    ms.push_back(Ms(SteadyClock::now() - start));
    if (!reply.ok()) return reply.status();
    if (reply->status != 200) {
      return UnavailableError("leaderboard page " + std::to_string(i + 1) + ": " +
                              std::to_string(reply->status) + " " + reply->body);
    }
    after = StringMember(reply->body, "next");
    if (after.empty()) break;  // the end of the ladder
  }
  return ms;
}

// Allocates `rooms` rooms of ten players spread over the ladder, then releases each; the
// releases' milliseconds.
Result<std::vector<double>> AllocateAndRelease(server::BlockingHttpClient& client, uint64_t players,
                                               int rooms) {
  const uint64_t stride = std::max<uint64_t>(1, players / (10 * static_cast<uint64_t>(rooms)));
  for (int r = 0; r < rooms; ++r) {
    std::string body = "{\"room_id\":\"" + std::to_string(kFirstRoom + r) +
                       "\",\"node_id\":\"bench-node\",\"seats\":[";
    for (uint64_t g = 0; g < 10; ++g) {
      const uint64_t player = 1 + (static_cast<uint64_t>(r) * 10 + g) * stride % players;
      body += (g ? "," : "") + std::string("{\"player_id\":\"") + std::to_string(player) +
              "\",\"team\":" + (g < 5 ? "1" : "2") + "}";
    }
    body += "]}";
    auto reply = client.Call({"POST", "/v1/rooms", "application/json", "application/json",
                              std::string("Bearer ") + kAdminToken, body});
    if (!reply.ok()) return reply.status();
    if (reply->status / 100 != 2) {
      return UnavailableError("allocating room " + std::to_string(kFirstRoom + r) + ": " +
                              std::to_string(reply->status) + " " + reply->body);
    }
  }
  std::vector<double> ms;
  for (int r = 0; r < rooms; ++r) {
    const auto start = SteadyClock::now();
    auto reply = client.Call({"POST", "/v1/rooms/" + std::to_string(kFirstRoom + r) + ":release",
                              "application/json", "application/json",
                              std::string("Bearer ") + kAdminToken, "{}"});
    ms.push_back(Ms(SteadyClock::now() - start));
    if (!reply.ok()) return reply.status();
    if (reply->status != 200 || reply->body.find("\"players_released\":10") == std::string::npos) {
      return UnavailableError("releasing room " + std::to_string(kFirstRoom + r) + ": " +
                              std::to_string(reply->status) + " " + reply->body);
    }
  }
  return ms;
}

}  // namespace

int RunLadder(const LadderOptions& o) {
  const std::unique_ptr<ScratchDatabase> database = MigratedScratchDatabase(o.db, "ladder");
  if (!database) return 1;
  const std::string conninfo = database->conninfo();
  const auto seed_start = SteadyClock::now();
  double count_ms = 0, scan_ms = 0;
  try {
    Seed(conninfo, o.players);
    // Each reference twice, the second read warm, as the lobby's reads are.
    for (int i = 0; i < 2; ++i) {
      count_ms = TimeQuery(conninfo,
                           "SELECT count(*) FROM player_ratings r JOIN modes m USING (mode_id) "
                           "WHERE m.mode = 'default'");
      // A condition no index serves: the scan 74e874d's release made for in_battle_room.
      scan_ms = TimeQuery(conninfo, "SELECT count(*) FROM players WHERE created_at IS NULL");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "seeding: %s\n", e.what());
    return 1;
  }
  const double seed_s = Ms(SteadyClock::now() - seed_start) / 1000;

  const std::string root = TempRoot();
  const std::string log = root + "/lobby.log";
  auto lobby =
      SpawnLobby(LobbyBinary(o.lobby_binary), conninfo,
                 {"--node-token", "bench-node=bench-token", "--admin-token", kAdminToken}, log);
  if (!lobby.ok()) {
    std::fprintf(stderr, "%s\n", lobby.status().ToString().c_str());
    return 1;
  }
  server::BlockingHttpClient client(
      server::ListenAddress::Parse("127.0.0.1:" + std::to_string(lobby->port)).value());
  auto pages = ReadPages(client, o.pages);
  auto releases = pages.ok() ? AllocateAndRelease(client, o.players, o.rooms)
                             : Result<std::vector<double>>(pages.status());
  const Status stopped = StopChild(lobby->pid, "verdict-lobby");
  for (const Status& s : {pages.status(), releases.status(), stopped}) {
    if (!s.ok()) {
      std::fprintf(stderr, "%s; see %s\n", s.ToString().c_str(), log.c_str());
      return 1;
    }
  }
  std::error_code ignored;
  std::filesystem::remove_all(root, ignored);

  const double page_p50 = Percentile(*pages, 0.5), page_p99 = Percentile(*pages, 0.99);
  const double release_p50 = Percentile(*releases, 0.5), release_p99 = Percentile(*releases, 0.99);
  FILE* table = o.output.json ? stderr : stdout;
  std::fprintf(table,
               "players          %llu rated in \"default\" (seeded in %.0f s)\n"
               "leaderboard      %zu pages of 100: p50 %.2f ms, p99 %.2f ms\n"
               "release          %zu rooms of 10: p50 %.2f ms, p99 %.2f ms\n"
               "references       count(*) of the ratings %.0f ms; a full scan of players "
               "%.0f ms\n"
               "a page's p99 is %.4f of the count, a release's %.4f of the scan\n",
               static_cast<unsigned long long>(o.players), seed_s, pages->size(), page_p50,
               page_p99, releases->size(), release_p50, release_p99, count_ms, scan_ms,
               count_ms > 0 ? page_p99 / count_ms : 0, scan_ms > 0 ? release_p99 / scan_ms : 0);
  Report report("ladder");
  report.Field("players", static_cast<double>(o.players));
  report.Field("seed_s", seed_s);
  report.Field("leaderboard_pages", static_cast<double>(pages->size()));
  report.Field("leaderboard_p50_ms", page_p50);
  report.Field("leaderboard_p99_ms", page_p99);
  report.Field("release_rooms", static_cast<double>(releases->size()));
  report.Field("release_p50_ms", release_p50);
  report.Field("release_p99_ms", release_p99);
  report.Field("count_ms", count_ms);
  report.Field("players_scan_ms", scan_ms);
  return report.Emit(o.output);
}

}  // namespace verdict::bench
