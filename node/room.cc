#include "node/room.h"

#include <spdlog/spdlog.h>

#include "common/log.h"
#include "common/log_rate_limit.h"
#include "node/result_channel.h"
#include "node/room_table.h"
#include "proto/validation.h"

namespace verdict::node {
namespace {

Status Released(uint64_t room_id) {
  return NotFoundError("room " + std::to_string(room_id) + " is not held (released, or unknown)");
}

// Adds team t's rank, ranks[t - 1], to `result`'s placements for every t.
void AddPlacements(const std::vector<uint32_t>& ranks, v1::BattleResult* result) {
  for (size_t t = 0; t < ranks.size(); ++t) {
    v1::TeamPlacement* placed = result->add_placements();
    placed->set_team(static_cast<uint32_t>(t + 1));
    placed->set_rank(ranks[t]);
  }
}

// Says `ranks` in `result` (SETTLED, its players set): with winner_team where that can say it,
// as wire::RanksOf reads it (two teams: 1, 2, or 0 for a draw), else with placements. So a
// two-team room's result is, byte for byte, what it was before placements.
void Place(const std::vector<uint32_t>& ranks, v1::BattleResult* result) {
  if (ranks.size() == 2) {
    for (uint32_t winner_team : {1u, 2u, 0u}) {
      result->set_winner_team(winner_team);
      if (wire::RanksOf(*result) == ranks) return;
    }
    result->clear_winner_team();
  }
  AddPlacements(ranks, result);
}

// A replay directory that fails fails every room's replay: one limit for them all, over every
// room of the process.
LogRateLimit& ReplayFailureLog() {
  static LogRateLimit limit(RepeatedFaultLimit());
  return limit;
}

}  // namespace

// --- RoomHandle

RoomHandle::RoomHandle(uint64_t room_id, std::weak_ptr<Room> room)
    : room_id_(room_id), room_(std::move(room)) {}

Result<std::shared_ptr<Room>> RoomHandle::Lock() const {
  std::shared_ptr<Room> room = room_.lock();
  if (!room) return Released(room_id_);
  return room;
}

bool RoomHandle::held() const { return !room_.expired(); }

Status RoomHandle::SetOnline(const std::string& player_id, bool online) {
  auto room = Lock();
  return room.ok() ? (*room)->SetOnline(player_id, online) : room.status();
}

Status RoomHandle::Kick(const std::string& player_id) {
  auto room = Lock();
  return room.ok() ? (*room)->Kick(player_id) : room.status();
}

Status RoomHandle::RecordStats(const std::string& player_id, uint32_t kills, uint32_t deaths,
                               uint32_t assists, int64_t score) {
  auto room = Lock();
  return room.ok() ? (*room)->RecordStats(player_id, kills, deaths, assists, score) : room.status();
}

Status RoomHandle::ReportPlacements(const std::string& player_id,
                                    const std::vector<uint32_t>& ranks) {
  auto room = Lock();
  return room.ok() ? (*room)->ReportPlacements(player_id, ranks) : room.status();
}

Status RoomHandle::Report(const std::string& player_id, uint32_t winner_team) {
  auto room = Lock();
  return room.ok() ? (*room)->Report(player_id, winner_team) : room.status();
}

Status RoomHandle::Finish() {
  auto room = Lock();
  return room.ok() ? (*room)->Finish() : room.status();
}

Status RoomHandle::Abort(const std::string& reason) {
  auto room = Lock();
  return room.ok() ? (*room)->Abort(reason) : room.status();
}

Result<RoomState> RoomHandle::state() const {
  auto room = Lock();
  if (!room.ok()) return room.status();
  return (*room)->state();
}

std::optional<v1::BattleResult> RoomHandle::result() const {
  auto room = Lock();
  return room.ok() ? (*room)->result() : std::nullopt;
}

// --- RoomFinisher

RoomFinisher::RoomFinisher() : thread_([this] { Loop(); }) {}

RoomFinisher::~RoomFinisher() { Stop(); }

bool RoomFinisher::Run(std::function<void()> finish) {
  {
    MutexLock lock(&mu_);
    if (stopping_) return false;
    queue_.push_back(std::move(finish));
  }
  changed_.SignalAll();
  return true;
}

bool RoomFinisher::WaitIdle(std::chrono::steady_clock::time_point deadline) {
  MutexLock lock(&mu_);
  while (!queue_.empty() || running_ != 0) {
    if (changed_.WaitUntil(deadline)) break;
  }
  return queue_.empty() && running_ == 0;
}

void RoomFinisher::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  changed_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

size_t RoomFinisher::unfinished() const {
  MutexLock lock(&mu_);
  return queue_.size() + running_;
}

void RoomFinisher::Loop() {
  MutexLock lock(&mu_);
  for (;;) {
    while (!stopping_ && queue_.empty()) changed_.Wait();
    if (queue_.empty()) return;  // stopping, and everything queued has run
    std::function<void()> finish = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    lock.Unlock();
    finish();
    finish = nullptr;  // whatever it holds (its room) goes before the finish counts as done
    lock.Lock();
    --running_;
    changed_.SignalAll();
  }
}

// --- Room

Result<std::shared_ptr<Room>> Room::Create(const v1::RoomAllocation& allocation,
                                           RoomContext context) {
  if (Status valid = wire::ValidateAllocation(allocation); !valid.ok()) {
    return InvalidArgumentError("room " + std::to_string(allocation.room_id()) +
                                ": allocation refused: " + valid.message());
  }
  if (allocation.node_id() != context.node_id) {
    return InvalidArgumentError("room " + std::to_string(allocation.room_id()) +
                                " is allocated to node '" + allocation.node_id() +
                                "', not to this node ('" + context.node_id + "')");
  }
  if (context.results == nullptr) return InvalidArgumentError("a room needs a result channel");
  return std::shared_ptr<Room>(new Room(allocation, std::move(context)));
}

Room::Room(const v1::RoomAllocation& allocation, RoomContext context)
    : room_id_(allocation.room_id()),
      context_(std::move(context)),
      clock_(context_.clock ? context_.clock : SystemClock::Default()) {
  for (const auto& seat : allocation.seats()) seats_[seat.player_id()].team = seat.team();
}

Status Room::SetOnline(const std::string& player_id, bool online) {
  std::optional<Decision> decided;
  {
    MutexLock lock(&mu_);
    if (state_ != State::kPlaying) return FailedPreconditionError("room already finished");
    auto it = seats_.find(player_id);
    if (it == seats_.end()) return NotFoundError("no seat for this player");
    it->second.online = online;
    decided = MajorityLocked();
  }
  return decided ? Conclude(*decided) : Status::Ok();
}

Status Room::Kick(const std::string& player_id) {
  std::optional<Decision> decided;
  {
    MutexLock lock(&mu_);
    if (state_ != State::kPlaying) return FailedPreconditionError("room already finished");
    auto it = seats_.find(player_id);
    if (it == seats_.end()) return NotFoundError("no seat for this player");
    it->second.kicked = true;
    decided = MajorityLocked();
  }
  return decided ? Conclude(*decided) : Status::Ok();
}

Status Room::RecordStats(const std::string& player_id, uint32_t kills, uint32_t deaths,
                         uint32_t assists, int64_t score) {
  MutexLock lock(&mu_);
  if (state_ != State::kPlaying) return FailedPreconditionError("room already finished");
  auto it = seats_.find(player_id);
  if (it == seats_.end()) return NotFoundError("no seat for this player");
  v1::PlayerResult recorded;
  recorded.set_player_id(player_id);
  recorded.set_team(it->second.team);
  recorded.set_kills(kills);
  recorded.set_deaths(deaths);
  recorded.set_assists(assists);
  VERDICT_RETURN_IF_ERROR(wire::ValidatePlayerResult(recorded));
  it->second.kills = kills;
  it->second.deaths = deaths;
  it->second.assists = assists;
  it->second.score = score;
  return Status::Ok();
}

Status Room::ReportPlacements(const std::string& player_id, const std::vector<uint32_t>& ranks) {
  v1::BattleResult stated;
  AddPlacements(ranks, &stated);
  return Vote(player_id, stated);
}

Status Room::Report(const std::string& player_id, uint32_t winner_team) {
  v1::BattleResult stated;
  stated.set_winner_team(winner_team);
  return Vote(player_id, stated);
}

Status Room::Vote(const std::string& player_id, const v1::BattleResult& stated) {
  std::optional<Decision> decided;
  {
    MutexLock lock(&mu_);
    if (state_ != State::kPlaying) return FailedPreconditionError("room already finished");
    auto it = seats_.find(player_id);
    if (it == seats_.end()) return NotFoundError("no seat for this player");
    if (it->second.kicked) return FailedPreconditionError("a kicked player cannot report");
    // A vote is what the lobby would take as this room's result: checked by the lobby's own
    // rules, and kept in the form the lobby reads a placement in, so that winner_team 1 and the
    // placements (1, 2) are the same vote. A vote that says no placement is refused, as a
    // result naming no winner is everywhere.
    v1::BattleResult result = RosterLocked();
    result.set_outcome(v1::SETTLED);
    result.MergeFrom(stated);
    if (Status valid = wire::ValidateResult(result); !valid.ok()) {
      return InvalidArgumentError("room " + std::to_string(room_id_) +
                                  ": a report the lobby would refuse: " + valid.message());
    }
    it->second.vote = wire::RanksOf(result);
    if (!first_report_ms_) first_report_ms_ = clock_->MonotonicMs();
    decided = MajorityLocked();
  }
  return decided ? Conclude(*decided) : Status::Ok();
}

void Room::Tick() {
  Decision decided;
  {
    MutexLock lock(&mu_);
    if (state_ != State::kPlaying || !first_report_ms_) return;
    if (clock_->MonotonicMs() - *first_report_ms_ < kFallbackMs) return;
    decided = FallbackLocked();
  }
  // A refusal (the node is shutting down) is logged by Conclude; the room plays on.
  Conclude(decided).IgnoreError();
}

Status Room::Finish() {
  Decision decided;
  {
    MutexLock lock(&mu_);
    if (state_ != State::kPlaying) return Status::Ok();
    decided = MajorityLocked().value_or(FallbackLocked());
  }
  return Conclude(decided);
}

Status Room::Abort(const std::string& reason) {
  Decision d;
  d.outcome = v1::ABORTED;
  d.abort_reason = reason;
  return Conclude(d);
}

std::optional<Room::Decision> Room::MajorityLocked() const {
  size_t eligible = 0;
  std::map<Placement, size_t> votes;
  for (const auto& [id, seat] : seats_) {
    if (!seat.online || seat.kicked) continue;
    ++eligible;
    if (seat.vote) ++votes[*seat.vote];
  }
  for (const auto& [placement, count] : votes) {
    if (2 * count > eligible) return Decision{v1::SETTLED, placement, false, ""};
  }
  return std::nullopt;
}

Room::Decision Room::FallbackLocked() const {
  std::map<Placement, size_t> votes;
  for (const auto& [id, seat] : seats_) {
    if (seat.online && !seat.kicked && seat.vote) ++votes[*seat.vote];
  }
  const Placement* best = nullptr;
  size_t best_count = 0;
  bool tie = false;
  for (const auto& [placement, count] : votes) {
    if (count > best_count) {
      best = &placement;
      best_count = count;
      tie = false;
    } else if (count == best_count) {
      tie = true;
    }
  }
  if (best == nullptr || tie) return Decision{v1::ABORTED, {}, false, "no_consensus"};
  return Decision{v1::SETTLED, *best, true, ""};
}

v1::BattleResult Room::RosterLocked() const {
  v1::BattleResult result;
  result.set_room_id(room_id_);
  result.set_node_id(context_.node_id);
  for (const auto& [id, seat] : seats_) {
    v1::PlayerResult* p = result.add_players();
    p->set_player_id(id);
    p->set_team(seat.team);
    p->set_kills(seat.kills);
    p->set_deaths(seat.deaths);
    p->set_assists(seat.assists);
    p->set_score(seat.score);
    p->set_disconnected(!seat.online || seat.kicked);
  }
  return result;
}

v1::BattleResult Room::ResultLocked(const Decision& decision) const {
  v1::BattleResult result = RosterLocked();
  result.set_ended_at_ms(clock_->NowMs());
  result.set_outcome(decision.outcome);
  result.set_suspect(decision.suspect);
  result.set_abort_reason(decision.abort_reason);
  if (decision.outcome == v1::SETTLED) {
    Place(decision.placement, &result);
  } else {
    result.set_winner_team(0);  // as an aborted result always said it
  }
  return result;
}

Status Room::Conclude(const Decision& decision) {
  v1::BattleResult result;
  {
    MutexLock lock(&mu_);
    if (state_ != State::kPlaying) return Status::Ok();  // finish() is idempotent
    result = ResultLocked(decision);
    // The lobby's rules, before anything is told or stored: a result it would refuse (an abort
    // reason that is not UTF-8, say) leaves the room playing, and the caller hears why.
    if (Status valid = wire::ValidateResult(result); !valid.ok()) {
      return InvalidArgumentError("room " + std::to_string(room_id_) +
                                  ": the result would be refused: " + valid.message());
    }
    // Once the node has shut down nothing it finishes is stored: the room plays on, so that the
    // caller's error is the whole truth (nobody was told the battle ended).
    if (context_.results->closed()) {
      return FailedPreconditionError("room " + std::to_string(room_id_) +
                                     ": the node is shutting down and takes no more results");
    }
    state_ = State::kFinished;
    finished_ms_ = clock_->MonotonicMs();
  }
  if (context_.finisher) {
    auto finish = [self = shared_from_this(), result]() mutable {
      self->HandOver(std::move(result)).IgnoreError();  // logged, and counted by Shutdown
    };
    if (context_.finisher->Run(finish)) return Status::Ok();
  }
  return HandOver(std::move(result));
}

Status Room::HandOver(v1::BattleResult result) {
  if (context_.notifier) context_.notifier->NotifyBattleEnd(result);
  if (context_.replays) {
    auto path = context_.replays->WriteReplay(result);
    if (path.ok()) {
      result.set_replay_path(*path);
      if (Status valid = wire::ValidateResult(result); !valid.ok()) {
        LogLimited(Log(), ReplayFailureLog(), spdlog::level::warn,
                   "room={}: replay path refused ({}); sending the result without it", room_id_,
                   valid.message());
        result.clear_replay_path();
      }
    } else {
      LogLimited(Log(), ReplayFailureLog(), spdlog::level::warn,
                 "room={}: replay not written ({}); sending the result without it", room_id_,
                 path.status().ToString());
    }
  }
  {
    MutexLock lock(&mu_);
    result_ = result;
  }
  // Waits while the channel is full: a stalled outbox holds the result here (P6).
  Status pushed = context_.results->Push(std::move(result));
  if (!pushed.ok()) {
    Log().error("room={}: result not queued, it is lost: {}", room_id_, pushed.ToString());
  }
  // Only now may the linger start.
  MutexLock lock(&mu_);
  handed_over_ms_ = clock_->MonotonicMs();
  return pushed;
}

Room::State Room::state() const {
  MutexLock lock(&mu_);
  return state_;
}

std::optional<v1::BattleResult> Room::result() const {
  MutexLock lock(&mu_);
  return result_;
}

bool Room::Releasable() const {
  MutexLock lock(&mu_);
  return state_ == State::kFinished && handed_over_ms_ &&
         clock_->MonotonicMs() - *handed_over_ms_ >= kLingerMs;
}

int64_t Room::finished_monotonic_ms() const {
  MutexLock lock(&mu_);
  return finished_ms_;
}

// --- RoomTable

RoomTable::RoomTable(const Clock* clock) : clock_(clock ? clock : SystemClock::Default()) {}

Result<RoomHandle> RoomTable::Add(const v1::RoomAllocation& allocation, RoomContext context) {
  auto room = Room::Create(allocation, std::move(context));
  if (!room.ok()) return room.status();
  MutexLock lock(&mu_);
  auto [it, inserted] = rooms_.try_emplace(allocation.room_id(), *room);
  if (!inserted) {
    return AlreadyExistsError("room " + std::to_string(allocation.room_id()) + " is held");
  }
  return RoomHandle(allocation.room_id(), it->second);
}

RoomHandle RoomTable::Find(uint64_t room_id) const {
  MutexLock lock(&mu_);
  auto it = rooms_.find(room_id);
  if (it == rooms_.end()) return RoomHandle(room_id, {});
  return RoomHandle(room_id, it->second);
}

void RoomTable::TickAll() {
  std::vector<std::shared_ptr<Room>> playing;
  {
    MutexLock lock(&mu_);
    for (const auto& [id, room] : rooms_) {
      if (room->state() == Room::State::kPlaying) playing.push_back(room);
    }
  }
  // Outside the lock: a tick may finish a room and wait on a full channel. Each room is kept
  // alive by `playing` meanwhile, whatever ReleaseDue does.
  for (const auto& room : playing) room->Tick();
}

size_t RoomTable::ReleaseDue() {
  MutexLock lock(&mu_);
  return std::erase_if(rooms_, [](const auto& entry) { return entry.second->Releasable(); });
}

size_t RoomTable::playing() const {
  MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [id, room] : rooms_) n += room->state() == Room::State::kPlaying;
  return n;
}

size_t RoomTable::finished() const {
  MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [id, room] : rooms_) n += room->state() == Room::State::kFinished;
  return n;
}

int64_t RoomTable::oldest_finished_dwell_ms() const {
  MutexLock lock(&mu_);
  int64_t oldest = 0;
  const int64_t now = clock_->MonotonicMs();
  for (const auto& [id, room] : rooms_) {
    if (room->state() == Room::State::kFinished) {
      oldest = std::max(oldest, now - room->finished_monotonic_ms());
    }
  }
  return oldest;
}

}  // namespace verdict::node
