#include "node/simulator.h"

#include <algorithm>
#include <charconv>
#include <deque>
#include <numeric>
#include <optional>
#include <random>

#include <spdlog/spdlog.h>

#include "common/log.h"
#include "proto/validation.h"

namespace verdict::node {
namespace {

using Clock = std::chrono::steady_clock;

// The player pool holds this many rooms' worth of players per battle in play (so every new
// battle finds its players free, three times over), and never fewer than kMinPlayerPool players.
constexpr int kPoolRoomsPerBattle = 3;
constexpr uint64_t kMinPlayerPool = 100;
// The lowest rate the pacing divides by, so a rate of 0 means "very slow", not a division by 0.
constexpr double kMinRoomsPerS = 0.001;
// A battle lasts options.battle, give or take this fraction.
constexpr double kBattleLengthSpread = 0.25;
// Players the lobby calls busy sit out this long before they are offered again.
constexpr std::chrono::seconds kBusyPlayerRest{2};
// After the lobby could not be reached (or answered something unexpected), allocation pauses
// this long before the same allocation is sent again.
constexpr std::chrono::milliseconds kLobbyAwayPause{500};
// Further behind schedule than this (after an outage), the pacing restarts from now instead of
// bursting to catch up.
constexpr std::chrono::seconds kMaxCatchUp{1};
// The longest sleep between turns, so that Stop is heard soon.
constexpr std::chrono::milliseconds kMaxSleep{50};

// How battles end, as probabilities.
constexpr double kAbortChance = 0.03;  // the host aborts the battle
// Two teams next to each other in the true placement share their rank (for two teams, a draw);
// else every team has a place of its own.
constexpr double kDrawChance = 0.05;
constexpr double kDisconnectChance = 0.05;    // each player: offline at the end
constexpr double kKickChance = 0.02;          // one player is kicked at the end
constexpr double kTruthfulVoteChance = 0.85;  // each vote: the true placement (else a random one)

// The configured first room id, or one from the clock (seconds × 1,000,000).
uint64_t FirstRoomId(const SimulatorOptions& options) {
  if (options.first_room_id) return options.first_room_id;
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
      std::chrono::system_clock::now().time_since_epoch());
  return static_cast<uint64_t>(seconds.count()) * 1'000'000;
}

uint32_t SeatsOf(const SimulatedMode& kind) { return kind.teams * kind.team_size; }

// Enough players for the battles in play, of the kinds in turn, and for the largest room.
uint64_t PlayerPoolSize(const SimulatorOptions& options) {
  const double concurrent = std::max(1.0, options.rooms_per_s * options.battle.count() / 1000.0);
  double seats = 0;
  uint32_t largest = 0;
  for (const SimulatedMode& kind : options.modes) {
    seats += SeatsOf(kind);
    largest = std::max(largest, SeatsOf(kind));
  }
  const double mean_seats = seats / static_cast<double>(options.modes.size());
  return std::max({kMinPlayerPool,
                   static_cast<uint64_t>(concurrent * kPoolRoomsPerBattle * mean_seats),
                   static_cast<uint64_t>(kPoolRoomsPerBattle) * largest});
}

// The options, with the default kind of battle if none is given.
SimulatorOptions WithModes(SimulatorOptions options) {
  if (options.modes.empty()) options.modes = {SimulatedMode{}};
  return options;
}

// "8x1": 8 teams of 1.
std::optional<std::pair<uint32_t, uint32_t>> ParseShape(std::string_view shape) {
  const size_t x = shape.find('x');
  if (x == std::string_view::npos) return std::nullopt;
  uint32_t teams = 0, size = 0;
  const char* end = shape.data() + shape.size();
  const auto [teams_end, teams_error] = std::from_chars(shape.data(), shape.data() + x, teams);
  const auto [size_end, size_error] = std::from_chars(shape.data() + x + 1, end, size);
  if (teams_error != std::errc() || teams_end != shape.data() + x || size_error != std::errc() ||
      size_end != end) {
    return std::nullopt;
  }
  return std::make_pair(teams, size);
}

}  // namespace

Result<std::vector<SimulatedMode>> ParseSimulatedModes(std::string_view list) {
  std::vector<SimulatedMode> modes;
  size_t begin = 0;
  for (;;) {
    const size_t comma = std::min(list.find(',', begin), list.size());
    const std::string_view item = list.substr(begin, comma - begin);
    const auto refused = [item](const std::string& why) {
      return InvalidArgumentError("--simulate-modes: \"" + std::string(item) + "\": " + why);
    };
    const size_t equals = item.find('=');
    const auto shape =
        equals == std::string_view::npos ? std::nullopt : ParseShape(item.substr(equals + 1));
    if (!shape || equals == 0 || shape->second == 0) {
      return refused("not MODE=TEAMSxSIZE with a team size of at least 1 (for example ffa-8=8x1)");
    }
    SimulatedMode kind{std::string(item.substr(0, equals)), shape->first, shape->second};
    const uint64_t seats = uint64_t{kind.teams} * kind.team_size;
    if (seats > wire::kMaxPlayers) {
      return refused(std::to_string(seats) + " seats, more than the " +
                     std::to_string(wire::kMaxPlayers) + " of a room");
    }
    // A room of this kind, checked by the lobby's own rules.
    v1::RoomAllocation room;
    room.set_room_id(1);
    room.set_node_id("simulator");
    room.set_mode(kind.mode);
    for (uint32_t seat = 0; seat < seats; ++seat) {
      v1::Seat* seated = room.add_seats();
      seated->set_player_id(std::to_string(seat + 1));
      seated->set_team(seat / kind.team_size + 1);
    }
    if (Status valid = wire::ValidateAllocation(room); !valid.ok()) {
      return refused("the lobby would refuse its rooms: " + valid.message());
    }
    modes.push_back(std::move(kind));
    if (comma == list.size()) return modes;
    begin = comma + 1;
  }
}

struct Simulator::Battle {
  RoomHandle room;
  Clock::time_point ends;
  std::vector<std::string> players;
  uint32_t teams = 0;
};

// The playing thread's state. Each turn starts the battle that is due, ends the battles that
// are due, and says when the next turn is.
class Simulator::Play {
 public:
  explicit Play(Simulator& simulator);
  // One turn at `now`; returns when the next one is due.
  Clock::time_point Turn(Clock::time_point now);

 private:
  void ReturnRestedPlayers(Clock::time_point now);
  bool BattleDue(Clock::time_point now) const;
  void StartBattle(Clock::time_point now);
  v1::RoomAllocation NextAllocation();
  void PlayAllocated(Clock::time_point now, std::vector<std::string> players);
  void PauseForLobby(Clock::time_point now, const AllocateReply& reply);
  void EndDueBattles(Clock::time_point now);
  void PlayOutEnd(const Battle& battle);
  // A placement of `teams` teams, one rank each (team t's at index t - 1): a random order, in
  // which, with kDrawChance, two neighbours share a rank.
  std::vector<uint32_t> RandomPlacement(uint32_t teams);
  Clock::time_point NextTurn(Clock::time_point now) const;
  const SimulatedMode& NextKind() const { return sim_.options_.modes[next_kind_]; }

  Simulator& sim_;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> unit_{0, 1};
  const Clock::duration interval_;  // between battle starts
  std::deque<std::string> free_players_;
  std::deque<std::pair<Clock::time_point, std::string>> resting_;  // busy at the lobby: retry later
  std::vector<Battle> battles_;
  Clock::time_point next_start_;
  uint64_t next_room_id_;
  // In options.modes: the next room's kind. It moves on when a room is allocated, so the kinds
  // take their turns however often the lobby refuses an allocation.
  size_t next_kind_ = 0;
  std::optional<v1::RoomAllocation> pending_;  // allocation sent but not yet answered
  Clock::time_point paused_until_;
  bool outage_logged_ = false;
};

Simulator::Play::Play(Simulator& simulator)
    : sim_(simulator),
      rng_(sim_.options_.seed ? sim_.options_.seed : std::random_device{}()),
      interval_(std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(1.0 / std::max(kMinRoomsPerS, sim_.options_.rooms_per_s)))),
      next_start_(Clock::now()),
      next_room_id_(FirstRoomId(sim_.options_) + 1) {
  const uint64_t pool = PlayerPoolSize(sim_.options_);
  for (uint64_t p = 0; p < pool; ++p) {
    free_players_.push_back(std::to_string(sim_.options_.first_player_id + p));
  }
  std::shuffle(free_players_.begin(), free_players_.end(), rng_);
}

Clock::time_point Simulator::Play::Turn(Clock::time_point now) {
  // After an outage, resume the steady rate instead of bursting to catch up.
  if (next_start_ < now - kMaxCatchUp) next_start_ = now;
  ReturnRestedPlayers(now);
  if (BattleDue(now)) StartBattle(now);
  EndDueBattles(now);
  return NextTurn(now);
}

void Simulator::Play::ReturnRestedPlayers(Clock::time_point now) {
  while (!resting_.empty() && resting_.front().first <= now) {
    free_players_.push_back(resting_.front().second);
    resting_.pop_front();
  }
}

// Due when the pacing allows, the lobby takes allocations and a room's worth of players is free
// (or an allocation waits to be sent again).
bool Simulator::Play::BattleDue(Clock::time_point now) const {
  return sim_.started_ < sim_.options_.rooms && now >= next_start_ && now >= paused_until_ &&
         (pending_ || free_players_.size() >= SeatsOf(NextKind()));
}

// Allocates the next room at the lobby and plays it. An allocation whose answer was lost is
// sent again unchanged: the lobby treats an identical repeat as a success, so a room is never
// left allocated with nobody playing it.
void Simulator::Play::StartBattle(Clock::time_point now) {
  if (!pending_) pending_ = NextAllocation();
  std::vector<std::string> players;
  for (const auto& seat : pending_->seats()) players.push_back(seat.player_id());
  const AllocateReply reply = sim_.lobby_.Allocate(*pending_);
  if (reply.status == 200 || reply.status == 201) {
    PlayAllocated(now, std::move(players));
  } else if (reply.code == "PLAYER_BUSY" || reply.code == "ROOM_EXISTS" ||
             reply.code == "ROOM_ID_REUSED") {
    // Nothing was allocated. Busy players sit out a while; a taken id is skipped.
    for (const std::string& p : players) resting_.emplace_back(now + kBusyPlayerRest, p);
    if (reply.code != "PLAYER_BUSY") ++next_room_id_;
    pending_.reset();
  } else {
    PauseForLobby(now, reply);
  }
}

// The next room id, of the next kind, with the first free players seated team by team.
v1::RoomAllocation Simulator::Play::NextAllocation() {
  const SimulatedMode& kind = NextKind();
  v1::RoomAllocation allocation;
  allocation.set_room_id(next_room_id_);
  allocation.set_node_id(sim_.node_.node_id());
  allocation.set_mode(kind.mode);
  for (uint32_t i = 0; i < SeatsOf(kind); ++i) {
    v1::Seat* seat = allocation.add_seats();
    seat->set_player_id(free_players_.front());
    seat->set_team(i / kind.team_size + 1);
    free_players_.pop_front();
  }
  return allocation;
}

// The lobby allocated the pending room (of the next kind): the node plays it until its end is
// due.
void Simulator::Play::PlayAllocated(Clock::time_point now, std::vector<std::string> players) {
  auto added = sim_.node_.AddRoom(*pending_);
  if (added.ok()) {
    const auto length = std::chrono::duration_cast<Clock::duration>(
        sim_.options_.battle * (1 - kBattleLengthSpread + 2 * kBattleLengthSpread * unit_(rng_)));
    battles_.push_back({*added, now + length, std::move(players), NextKind().teams});
    ++sim_.started_;
    next_start_ += interval_;
  }
  ++next_room_id_;
  next_kind_ = (next_kind_ + 1) % sim_.options_.modes.size();
  pending_.reset();
  if (outage_logged_) Log().info("simulator: lobby takes allocations again");
  outage_logged_ = false;
}

// The lobby is away (or answered something unexpected): pause, then send the allocation again.
void Simulator::Play::PauseForLobby(Clock::time_point now, const AllocateReply& reply) {
  ++sim_.failures_;
  paused_until_ = now + kLobbyAwayPause;
  if (!outage_logged_) {
    Log().warn("simulator: cannot allocate rooms ({} {}); battles in play go on", reply.status,
               reply.code.empty() ? "unreachable" : reply.code);
    outage_logged_ = true;
  }
}

void Simulator::Play::EndDueBattles(Clock::time_point now) {
  for (auto it = battles_.begin(); it != battles_.end() && !sim_.stop_;) {
    if (it->ends > now) {
      ++it;
      continue;
    }
    PlayOutEnd(*it);
    const auto result = it->room.result();
    if (result && result->outcome() == v1::ABORTED) ++sim_.aborted_;
    if (result && result->suspect()) ++sim_.suspect_;
    for (const std::string& p : it->players) free_players_.push_back(p);
    ++sim_.finished_;
    it = battles_.erase(it);
  }
}

// The end the way real clients play it: the odd abort; otherwise stats, a few disconnects, the
// odd kick and placements reported by every player that mostly agree, and the room finishes.
void Simulator::Play::PlayOutEnd(const Battle& battle) {
  RoomHandle room = battle.room;
  // Refusals are fine here: a report after the room decided, or from a kicked seat; and once the
  // node shuts down, the room's end, which is then never stored.
  if (unit_(rng_) < kAbortChance) return room.Abort("host_abort").IgnoreError();
  const std::vector<uint32_t> truth = RandomPlacement(battle.teams);
  for (const std::string& p : battle.players) {
    room.RecordStats(p, /*kills=*/rng_() % 15, /*deaths=*/rng_() % 15, /*assists=*/rng_() % 10,
                     /*score=*/rng_() % 3000)
        .IgnoreError();
    if (unit_(rng_) < kDisconnectChance) room.SetOnline(p, false).IgnoreError();
  }
  if (unit_(rng_) < kKickChance) {
    room.Kick(battle.players[rng_() % battle.players.size()]).IgnoreError();
  }
  for (const std::string& p : battle.players) {
    const bool truthful = unit_(rng_) < kTruthfulVoteChance;
    room.ReportPlacements(p, truthful ? truth : RandomPlacement(battle.teams)).IgnoreError();
  }
  room.Finish().IgnoreError();  // no majority: the host ends it as the fallback would
}

std::vector<uint32_t> Simulator::Play::RandomPlacement(uint32_t teams) {
  std::vector<uint32_t> order(teams);  // order[i]: the team placed i-th, less one
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng_);
  std::vector<uint32_t> ranks(teams);
  for (uint32_t i = 0; i < teams; ++i) ranks[order[i]] = i + 1;
  if (teams >= 2 && unit_(rng_) < kDrawChance) {
    const uint32_t i = static_cast<uint32_t>(rng_() % (teams - 1));
    ranks[order[i + 1]] = ranks[order[i]];
  }
  return ranks;
}

// The next battle start or end that is due, and no later than kMaxSleep from now.
Clock::time_point Simulator::Play::NextTurn(Clock::time_point now) const {
  Clock::time_point wake = now + kMaxSleep;
  if (sim_.started_ < sim_.options_.rooms) {
    wake = std::min(wake, std::max(next_start_, paused_until_));
  }
  for (const auto& b : battles_) wake = std::min(wake, b.ends);
  return wake;
}

Simulator::Simulator(SimulatorOptions options, BattleNode& node)
    : options_(WithModes(std::move(options))),
      node_(node),
      lobby_(options_.lobby_urls, options_.admin_token) {}

Simulator::~Simulator() { Stop(); }

void Simulator::Start() {
  thread_ = std::thread([this] { Run(); });
}

void Simulator::RequestStop() { stop_ = true; }

void Simulator::Stop() {
  RequestStop();
  if (thread_.joinable()) thread_.join();
}

SimulatorCounts Simulator::counts() const {
  return {started_.load(), finished_.load(), aborted_.load(), suspect_.load(), failures_.load()};
}

void Simulator::Run() {
  Play play(*this);
  while (!stop_ && finished_ < options_.rooms) {
    std::this_thread::sleep_until(play.Turn(Clock::now()));
  }
  done_ = finished_ >= options_.rooms;
}

}  // namespace verdict::node
