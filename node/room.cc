#include "node/room.h"

#include <spdlog/spdlog.h>

namespace verdict::node {

Room::Room(const v1::RoomAllocation& allocation, RoomContext context)
    : room_id_(allocation.room_id()),
      context_(std::move(context)),
      clock_(context_.clock ? context_.clock : SystemClock::Default()) {
  for (const auto& seat : allocation.seats()) seats_[seat.player_id()].team = seat.team();
}

Status Room::SetOnline(uint64_t player_id, bool online) {
  std::optional<Decision> decided;
  {
    std::lock_guard lock(mu_);
    if (state_ != State::kPlaying) return FailedPreconditionError("room already finished");
    auto it = seats_.find(player_id);
    if (it == seats_.end()) return NotFoundError("no seat for this player");
    it->second.online = online;
    decided = MajorityLocked();
  }
  if (decided) Conclude(decided);
  return Status::Ok();
}

Status Room::Kick(uint64_t player_id) {
  std::optional<Decision> decided;
  {
    std::lock_guard lock(mu_);
    if (state_ != State::kPlaying) return FailedPreconditionError("room already finished");
    auto it = seats_.find(player_id);
    if (it == seats_.end()) return NotFoundError("no seat for this player");
    it->second.kicked = true;
    decided = MajorityLocked();
  }
  if (decided) Conclude(decided);
  return Status::Ok();
}

Status Room::RecordStats(uint64_t player_id, uint32_t kills, uint32_t deaths, uint32_t assists,
                         int64_t score) {
  std::lock_guard lock(mu_);
  if (state_ != State::kPlaying) return FailedPreconditionError("room already finished");
  auto it = seats_.find(player_id);
  if (it == seats_.end()) return NotFoundError("no seat for this player");
  it->second.kills = kills;
  it->second.deaths = deaths;
  it->second.assists = assists;
  it->second.score = score;
  return Status::Ok();
}

Status Room::Report(uint64_t player_id, uint32_t winner_team) {
  std::optional<Decision> decided;
  {
    std::lock_guard lock(mu_);
    if (state_ != State::kPlaying) return FailedPreconditionError("room already finished");
    auto it = seats_.find(player_id);
    if (it == seats_.end()) return NotFoundError("no seat for this player");
    if (it->second.kicked) return FailedPreconditionError("a kicked player cannot report");
    bool team_exists = winner_team == 0;
    for (const auto& [id, seat] : seats_) team_exists |= seat.team == winner_team;
    if (!team_exists) {
      return InvalidArgumentError("room has no team " + std::to_string(winner_team));
    }
    it->second.vote = winner_team;
    if (!first_report_ms_) first_report_ms_ = clock_->MonotonicMs();
    decided = MajorityLocked();
  }
  if (decided) Conclude(decided);
  return Status::Ok();
}

void Room::Tick() {
  std::optional<Decision> decided;
  {
    std::lock_guard lock(mu_);
    if (state_ != State::kPlaying || !first_report_ms_) return;
    if (clock_->MonotonicMs() - *first_report_ms_ < kFallbackMs) return;
    decided = FallbackLocked();
  }
  Conclude(decided);
}

void Room::Finish() {
  std::optional<Decision> decided;
  {
    std::lock_guard lock(mu_);
    if (state_ != State::kPlaying) return;
    decided = MajorityLocked();
    if (!decided) decided = FallbackLocked();
  }
  Conclude(decided);
}

void Room::Abort(const std::string& reason) {
  Decision d;
  d.outcome = v1::ABORTED;
  d.abort_reason = reason;
  Conclude(d);
}

std::optional<Room::Decision> Room::MajorityLocked() const {
  size_t eligible = 0;
  std::map<uint32_t, size_t> votes;
  for (const auto& [id, seat] : seats_) {
    if (!seat.online || seat.kicked) continue;
    ++eligible;
    if (seat.vote) ++votes[*seat.vote];
  }
  for (const auto& [team, count] : votes) {
    if (2 * count > eligible) return Decision{v1::SETTLED, team, false, ""};
  }
  return std::nullopt;
}

Room::Decision Room::FallbackLocked() const {
  std::map<uint32_t, size_t> votes;
  for (const auto& [id, seat] : seats_) {
    if (seat.online && !seat.kicked && seat.vote) ++votes[*seat.vote];
  }
  uint32_t best = 0;
  size_t best_count = 0;
  bool tie = false;
  for (const auto& [team, count] : votes) {
    if (count > best_count) {
      best = team;
      best_count = count;
      tie = false;
    } else if (count == best_count) {
      tie = true;
    }
  }
  if (best_count == 0 || tie) return Decision{v1::ABORTED, 0, false, "no_consensus"};
  return Decision{v1::SETTLED, best, true, ""};
}

void Room::Conclude(std::optional<Decision> decision) {
  v1::BattleResult result;
  {
    std::lock_guard lock(mu_);
    if (state_ != State::kPlaying) return;  // finish() is idempotent
    state_ = State::kFinished;
    finished_ms_ = clock_->MonotonicMs();
    result.set_room_id(room_id_);
    result.set_node_id(context_.node_id);
    result.set_ended_at_ms(clock_->NowMs());
    result.set_outcome(decision->outcome);
    result.set_winner_team(decision->outcome == v1::SETTLED ? decision->winner_team : 0);
    result.set_suspect(decision->suspect);
    result.set_abort_reason(decision->abort_reason);
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
  }
  if (context_.notifier) context_.notifier->NotifyBattleEnd(result);
  if (context_.replays) {
    auto path = context_.replays->WriteReplay(result);
    if (path.ok()) {
      result.set_replay_path(*path);
    } else {
      spdlog::warn("room={}: replay not written ({}); sending the result without it", room_id_,
                   path.status().ToString());
    }
  }
  {
    std::lock_guard lock(mu_);
    result_ = result;
  }
  // Waits while the channel is full: a stalled outbox holds the room here (P6).
  if (Status s = context_.results->Push(std::move(result)); !s.ok()) {
    spdlog::error("room={}: result not queued, it is lost: {}", room_id_, s.ToString());
  }
  // Only now may the linger start: until here the room must not be released (it is this
  // thread's `this`). Nothing of the room is touched after the lock is released.
  std::lock_guard lock(mu_);
  handed_over_ms_ = clock_->MonotonicMs();
}

Room::State Room::state() const {
  std::lock_guard lock(mu_);
  return state_;
}

std::optional<v1::BattleResult> Room::result() const {
  std::lock_guard lock(mu_);
  return result_;
}

bool Room::Releasable() const {
  std::lock_guard lock(mu_);
  return state_ == State::kFinished && handed_over_ms_ &&
         clock_->MonotonicMs() - *handed_over_ms_ >= kLingerMs;
}

int64_t Room::finished_monotonic_ms() const {
  std::lock_guard lock(mu_);
  return finished_ms_;
}

RoomTable::RoomTable(const Clock* clock) : clock_(clock ? clock : SystemClock::Default()) {}

Result<Room*> RoomTable::Add(std::unique_ptr<Room> room) {
  std::lock_guard lock(mu_);
  auto [it, inserted] = rooms_.try_emplace(room->room_id());
  if (!inserted) return AlreadyExistsError("room " + std::to_string(room->room_id()) + " is held");
  it->second.room = std::move(room);
  return it->second.room.get();
}

Room* RoomTable::Find(uint64_t room_id) {
  std::lock_guard lock(mu_);
  auto it = rooms_.find(room_id);
  return it == rooms_.end() ? nullptr : it->second.room.get();
}

void RoomTable::TickAll() {
  std::vector<Room*> playing;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, entry] : rooms_) {
      if (entry.room->state() != Room::State::kPlaying) continue;
      ++entry.pins;
      playing.push_back(entry.room.get());
    }
  }
  // Outside the lock: a tick may finish a room and wait on a full channel.
  for (Room* room : playing) {
    room->Tick();
    Unpin(room->room_id());
  }
}

void RoomTable::Unpin(uint64_t room_id) {
  std::lock_guard lock(mu_);
  --rooms_.at(room_id).pins;
}

size_t RoomTable::ReleaseDue() {
  std::lock_guard lock(mu_);
  return std::erase_if(rooms_, [](const auto& entry) {
    return entry.second.pins == 0 && entry.second.room->Releasable();
  });
}

size_t RoomTable::playing() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [id, entry] : rooms_) n += entry.room->state() == Room::State::kPlaying;
  return n;
}

size_t RoomTable::finished() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [id, entry] : rooms_) n += entry.room->state() == Room::State::kFinished;
  return n;
}

int64_t RoomTable::oldest_finished_dwell_ms() const {
  std::lock_guard lock(mu_);
  int64_t oldest = 0;
  const int64_t now = clock_->MonotonicMs();
  for (const auto& [id, entry] : rooms_) {
    if (entry.room->state() == Room::State::kFinished) {
      oldest = std::max(oldest, now - entry.room->finished_monotonic_ms());
    }
  }
  return oldest;
}

}  // namespace verdict::node
