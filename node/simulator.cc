#include "node/simulator.h"

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <set>

#include <spdlog/spdlog.h>

namespace verdict::node {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kSeatsPerTeam = 5;

}  // namespace

struct Simulator::Battle {
  Room* room = nullptr;
  Clock::time_point ends;
  std::vector<uint64_t> players;
};

Simulator::Simulator(SimulatorOptions options, BattleNode& node)
    : options_(std::move(options)),
      node_(node),
      lobby_(options_.lobby_urls, options_.admin_token) {}

Simulator::~Simulator() { Stop(); }

void Simulator::Start() {
  thread_ = std::thread([this] { Run(); });
}

void Simulator::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

SimulatorCounts Simulator::counts() const {
  return {started_.load(), finished_.load(), aborted_.load(), suspect_.load(), failures_.load()};
}

void Simulator::Run() {
  std::mt19937_64 rng(options_.seed ? options_.seed : std::random_device{}());
  const uint64_t first_room =
      options_.first_room_id
          ? options_.first_room_id
          : static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                      std::chrono::system_clock::now().time_since_epoch())
                                      .count()) *
                1'000'000;
  // Enough players that every concurrent battle finds ten free ones, three times over.
  const double concurrent = std::max(1.0, options_.rooms_per_s * options_.battle.count() / 1000.0);
  const uint64_t pool = std::max<uint64_t>(100, static_cast<uint64_t>(concurrent * 30));
  std::deque<uint64_t> free_players;
  for (uint64_t p = 0; p < pool; ++p) free_players.push_back(options_.first_player_id + p);
  std::shuffle(free_players.begin(), free_players.end(), rng);
  std::deque<std::pair<Clock::time_point, uint64_t>> cooling;  // busy at the lobby: retry later
  std::vector<Battle> battles;
  RoomContext context = node_.room_context(nullptr, nullptr);
  std::uniform_real_distribution<double> unit(0, 1);
  const auto interval = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(1.0 / std::max(0.001, options_.rooms_per_s)));
  Clock::time_point next_start = Clock::now();
  uint64_t next_room_id = first_room + 1;
  std::optional<v1::RoomAllocation> pending;  // allocation sent but not yet answered
  Clock::time_point paused_until;
  bool outage_logged = false;

  while (!stop_ && finished_ < options_.rooms) {
    const Clock::time_point now = Clock::now();
    // After an outage, resume the steady rate instead of bursting to catch up.
    if (next_start < now - std::chrono::seconds(1)) next_start = now;
    while (!cooling.empty() && cooling.front().first <= now) {
      free_players.push_back(cooling.front().second);
      cooling.pop_front();
    }
    // Start the next battle when it is due and the lobby takes allocations. An allocation
    // whose answer was lost is sent again unchanged: the lobby treats an identical repeat as
    // a success, so a room is never left allocated with nobody playing it.
    if (started_ < options_.rooms && now >= next_start && now >= paused_until &&
        (pending || free_players.size() >= 2 * kSeatsPerTeam)) {
      if (!pending) {
        pending.emplace();
        pending->set_room_id(next_room_id);
        pending->set_node_id(node_.node_id());
        for (int i = 0; i < 2 * kSeatsPerTeam; ++i) {
          v1::Seat* seat = pending->add_seats();
          seat->set_player_id(free_players.front());
          seat->set_team(i < kSeatsPerTeam ? 1 : 2);
          free_players.pop_front();
        }
      }
      std::vector<uint64_t> players;
      for (const auto& seat : pending->seats()) players.push_back(seat.player_id());
      const AllocateReply reply = lobby_.Allocate(*pending);
      if (reply.status == 200 || reply.status == 201) {
        auto added = node_.rooms().Add(std::make_unique<Room>(*pending, context));
        if (added.ok()) {
          const auto length = std::chrono::duration_cast<Clock::duration>(options_.battle *
                                                                          (0.75 + 0.5 * unit(rng)));
          battles.push_back({*added, now + length, players});
          ++started_;
          next_start += interval;
        }
        ++next_room_id;
        pending.reset();
        if (outage_logged) spdlog::info("simulator: lobby takes allocations again");
        outage_logged = false;
      } else if (reply.code == "PLAYER_BUSY" || reply.code == "ROOM_EXISTS") {
        // Nothing was allocated. Busy players sit out a while; a taken id is skipped.
        for (uint64_t p : players) cooling.emplace_back(now + std::chrono::seconds(2), p);
        if (reply.code == "ROOM_EXISTS") ++next_room_id;
        pending.reset();
      } else {
        // The lobby is away (or answered something unexpected): pause, then send it again.
        ++failures_;
        paused_until = now + std::chrono::milliseconds(500);
        if (!outage_logged) {
          spdlog::warn("simulator: cannot allocate rooms ({} {}); battles in play go on",
                       reply.status, reply.code.empty() ? "unreachable" : reply.code);
          outage_logged = true;
        }
      }
    }

    // End the battles that are due.
    for (auto it = battles.begin(); it != battles.end();) {
      if (it->ends > now) {
        ++it;
        continue;
      }
      Room& room = *it->room;
      if (unit(rng) < 0.03) {
        room.Abort("host_abort");
      } else {
        const uint32_t truth = unit(rng) < 0.05 ? 0 : (unit(rng) < 0.5 ? 1 : 2);
        for (uint64_t p : it->players) {
          room.RecordStats(p, rng() % 15, rng() % 15, rng() % 10, rng() % 3000).IgnoreError();
          if (unit(rng) < 0.05) room.SetOnline(p, false).IgnoreError();
        }
        if (unit(rng) < 0.02) room.Kick(it->players[rng() % it->players.size()]).IgnoreError();
        for (uint64_t p : it->players) {
          const uint32_t vote = unit(rng) < 0.85 ? truth : static_cast<uint32_t>(rng() % 3);
          // Reports after the room decided, or from kicked seats, are refused: that is fine.
          room.Report(p, vote).IgnoreError();
        }
        room.Finish();  // no majority: the host ends it as the fallback would
      }
      const auto result = room.result();
      if (result && result->outcome() == v1::ABORTED) ++aborted_;
      if (result && result->suspect()) ++suspect_;
      for (uint64_t p : it->players) free_players.push_back(p);
      ++finished_;
      it = battles.erase(it);
    }

    Clock::time_point wake = now + std::chrono::milliseconds(50);
    if (started_ < options_.rooms) wake = std::min(wake, std::max(next_start, paused_until));
    for (const auto& b : battles) wake = std::min(wake, b.ends);
    std::this_thread::sleep_until(wake);
  }
  done_ = finished_ >= options_.rooms;
}

}  // namespace verdict::node
