#include "tests/support/fake_store.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include <google/protobuf/util/message_differencer.h>

#include "lobby/ladder_cursor.h"
#include "lobby/modes.h"

namespace verdict::testing {

using lobby::AllocatedRoom;
using lobby::AllocateOutcome;
using lobby::AllocateStatus;
using lobby::DeclareOutcome;
using lobby::DeclareStatus;
using lobby::ImportOutcome;
using lobby::ImportStatus;
using lobby::ReleaseOutcome;
using lobby::ReleaseStatus;
using lobby::SettleOutcome;
using lobby::SettleRequest;
using lobby::SettleStatus;

namespace {

// A room's roster as a set, for comparing one given in another order.
std::set<std::pair<std::string, uint32_t>> RosterOf(const AllocatedRoom& room) {
  std::set<std::pair<std::string, uint32_t>> roster;
  for (const v1::Seat& seat : room.seats) roster.emplace(seat.player_id(), seat.team());
  return roster;
}
std::set<std::pair<std::string, uint32_t>> RosterOf(const v1::BattleResult& result) {
  std::set<std::pair<std::string, uint32_t>> roster;
  for (const v1::PlayerResult& player : result.players()) {
    roster.emplace(player.player_id(), player.team());
  }
  return roster;
}

// The declaration of `mode`, without what only answers carry, nor whether it is closed.
v1::Mode DeclarationOf(v1::Mode mode) {
  mode.clear_in_use();
  mode.clear_declared_at_ms();
  mode.clear_closed();
  return mode;
}

}  // namespace

FakeStore::FakeStore() {
  v1::Mode elo;
  elo.mutable_rating()->set_system("elo");
  (*elo.mutable_rating()->mutable_parameters())["k"] = 32;
  v1::Mode declared = lobby::CompleteMode(lobby::kDefaultMode, elo).value();
  declared.set_declared_at_ms(clock_.NowMs());
  modes_[lobby::kDefaultMode] = declared;
}

void FakeStore::Fail(Call call, Status failure) {
  std::lock_guard lock(mu_);
  failures_[call] = std::move(failure);
}

void FakeStore::FailRoom(uint64_t room_id, Status failure) {
  std::lock_guard lock(mu_);
  room_failures_[room_id] = std::move(failure);
}

void FakeStore::Unforce() {
  std::lock_guard lock(mu_);
  forced_ = {};
}

void FakeStore::Expire(uint64_t room_id) {
  std::lock_guard lock(mu_);
  const auto found = receipts_.find(room_id);
  if (found == receipts_.end()) return;
  settled_records_[room_id] = {found->second.node_id,
                               found->second.receipt.outcome() == v1::ABORTED};
  receipts_.erase(found);
}

int FakeStore::settle_calls() const {
  std::lock_guard lock(mu_);
  return settle_calls_;
}

Status FakeStore::FailureOf(Call call) const {
  const auto found = failures_.find(call);
  return found == failures_.end() ? Status::Ok() : found->second;
}

uint64_t FakeStore::RoomOf(const std::string& player_id) const {
  for (const auto& [id, room] : rooms_) {
    if (room.released_at_ms != 0) continue;
    for (const v1::Seat& seat : room.seats) {
      if (seat.player_id() == player_id) return id;
    }
  }
  return 0;
}

// ---- BatchSettler

std::vector<Result<SettleOutcome>> FakeStore::SettleBattles(
    const std::vector<SettleRequest>& requests, bool wait, lobby::Cancellation* /*cancel*/) {
  std::lock_guard lock(mu_);
  ++settle_calls_;
  if (Status failed = FailureOf(Call::kSettleBattles); !failed.ok()) {
    return std::vector<Result<SettleOutcome>>(requests.size(), failed);
  }
  const std::optional<SettleStatus>& status = ForcedOf<SettleStatus>();
  const bool forced = status && !(wait && *status == SettleStatus::kBusy);
  std::vector<Result<SettleOutcome>> outcomes;
  for (const SettleRequest& request : requests) {
    const auto failed = room_failures_.find(request.result->room_id());
    if (failed != room_failures_.end() && !failed->second.ok()) {
      outcomes.push_back(failed->second);
    } else {
      outcomes.push_back(forced ? ForcedOutcome(*status, request) : SettleOne(request));
    }
  }
  return outcomes;
}

SettleOutcome FakeStore::ForcedOutcome(SettleStatus status, const SettleRequest& request) {
  SettleOutcome out;
  out.status = status;
  out.receipt.set_room_id(request.result->room_id());
  out.receipt.set_match_id(next_match_id_++);
  out.receipt.set_settled_at_ms(clock_.NowMs());
  const bool aborted = request.result->outcome() == v1::ABORTED;
  out.receipt.set_outcome((status == SettleStatus::kOutcomeConflict) != aborted ? v1::ABORTED
                                                                                : v1::SETTLED);
  out.receipt.set_duplicate(status != SettleStatus::kSettled);
  return out;
}

// In the order of sql/functions/verdict_settle_guard.sql and verdict_settle_check.sql: the
// node's receipt, then the record of one past retention, then the room and its roster.
SettleOutcome FakeStore::SettleOne(const SettleRequest& request) {
  const v1::BattleResult& result = *request.result;
  const uint64_t room_id = result.room_id();
  SettleOutcome out;
  if (const auto r = receipts_.find(room_id);
      r != receipts_.end() && r->second.node_id == request.node_id) {
    out.receipt = r->second.receipt;
    out.receipt.set_duplicate(true);
    out.status = r->second.receipt.outcome() != result.outcome() ? SettleStatus::kOutcomeConflict
                 : r->second.fingerprint != request.fingerprint ? SettleStatus::kIdempotencyMismatch
                                                                : SettleStatus::kDuplicate;
    return out;
  }
  if (const auto s = settled_records_.find(room_id);
      s != settled_records_.end() && s->second.node_id == request.node_id) {
    out.receipt.set_outcome(s->second.aborted ? v1::ABORTED : v1::SETTLED);
    out.status = out.receipt.outcome() != result.outcome() ? SettleStatus::kOutcomeConflict
                                                           : SettleStatus::kOriginalExpired;
    return out;
  }
  const auto room = rooms_.find(room_id);
  if (room == rooms_.end() || room->second.node_id != request.node_id) {
    out.status = SettleStatus::kRoomUnknown;
    return out;
  }
  if (RosterOf(room->second) != RosterOf(result)) {
    out.status = SettleStatus::kRosterMismatch;
    return out;
  }
  out.status = SettleStatus::kSettled;
  out.receipt.set_room_id(room_id);
  out.receipt.set_match_id(next_match_id_++);
  out.receipt.set_outcome(result.outcome());
  out.receipt.set_settled_at_ms(clock_.NowMs());
  receipts_[room_id] = {out.receipt, request.node_id, request.fingerprint};
  events_.push_back({0, request.node_id,
                     R"({"type": "battle.settled", "room_id": ")" + std::to_string(room_id) +
                         R"(", "match_id": ")" + std::to_string(out.receipt.match_id()) + R"("})"});
  rooms_.erase(room);
  room_modes_.erase(room_id);
  return out;
}

// ---- RoomStore

std::string FakeStore::ShapeRefusal(const v1::Mode& mode, const v1::RoomAllocation& allocation) {
  std::map<uint32_t, uint32_t> sizes;
  for (const v1::Seat& seat : allocation.seats()) ++sizes[seat.team()];
  uint32_t smallest = UINT32_MAX;
  uint32_t largest = 0;
  for (const auto& [team, size] : sizes) {
    smallest = std::min(smallest, size);
    largest = std::max(largest, size);
  }
  const v1::RoomShape& shape = mode.shape();
  const size_t teams = sizes.size();
  if (teams >= shape.min_teams() && teams <= shape.max_teams() &&
      smallest >= shape.min_team_size() && largest <= shape.max_team_size()) {
    return "";
  }
  return "mode " + mode.mode() + " accepts " + std::to_string(shape.min_teams()) + " to " +
         std::to_string(shape.max_teams()) + " teams of " + std::to_string(shape.min_team_size()) +
         " to " + std::to_string(shape.max_team_size()) + " players; this room has " +
         std::to_string(teams) + " teams of " + std::to_string(smallest) + " to " +
         std::to_string(largest);
}

// In the order of sql/functions/verdict_allocate.sql.
Result<AllocateOutcome> FakeStore::AllocateRoom(const v1::RoomAllocation& allocation) {
  std::lock_guard lock(mu_);
  VERDICT_RETURN_IF_ERROR(FailureOf(Call::kAllocateRoom));
  AllocateOutcome out;
  if (const auto& forced = ForcedOf<AllocateStatus>()) {
    out.status = *forced;
    if (out.status == AllocateStatus::kPlayerBusy)
      out.busy_player = allocation.seats(0).player_id();
    out.detail = kForcedDetail;
    return out;
  }
  const uint64_t room_id = allocation.room_id();
  if (receipts_.count(room_id) || settled_records_.count(room_id)) {
    out.status = AllocateStatus::kRoomIdReused;
    return out;
  }
  if (const auto room = rooms_.find(room_id); room != rooms_.end()) {
    AllocatedRoom given;
    given.seats.assign(allocation.seats().begin(), allocation.seats().end());
    const bool same = room->second.node_id == allocation.node_id() &&
                      room_modes_[room_id] == allocation.mode() &&
                      RosterOf(room->second) == RosterOf(given);
    out.status = same ? AllocateStatus::kDuplicate : AllocateStatus::kRoomExists;
    return out;
  }
  const auto mode = modes_.find(allocation.mode());
  if (mode == modes_.end()) {
    out.status = AllocateStatus::kModeUnknown;
    out.detail = "mode " + allocation.mode() + " is not declared";
    return out;
  }
  if (mode->second.closed()) {
    out.status = AllocateStatus::kModeClosed;
    out.detail = "mode " + allocation.mode() + " is closed to new rooms; its ladder stays readable";
    return out;
  }
  mode->second.set_in_use(true);
  out.detail = ShapeRefusal(mode->second, allocation);
  if (!out.detail.empty()) {
    out.status = AllocateStatus::kShapeRefused;
    return out;
  }
  for (const v1::Seat& seat : allocation.seats()) players_.insert(seat.player_id());
  std::vector<std::string> ids;
  for (const v1::Seat& seat : allocation.seats()) ids.push_back(seat.player_id());
  std::sort(ids.begin(), ids.end());
  for (const std::string& id : ids) {
    if (RoomOf(id) != 0) {
      out.status = AllocateStatus::kPlayerBusy;
      out.busy_player = id;
      return out;
    }
  }
  AllocatedRoom& room = rooms_[room_id];
  room.room_id = room_id;
  room.node_id = allocation.node_id();
  room.allocated_at_ms = clock_.NowMs();
  room.seats.assign(allocation.seats().begin(), allocation.seats().end());
  room_modes_[room_id] = allocation.mode();
  out.status = AllocateStatus::kAllocated;
  return out;
}

Result<std::optional<AllocatedRoom>> FakeStore::GetRoom(uint64_t room_id) {
  std::lock_guard lock(mu_);
  VERDICT_RETURN_IF_ERROR(FailureOf(Call::kGetRoom));
  const auto room = rooms_.find(room_id);
  if (room == rooms_.end()) return std::optional<AllocatedRoom>();
  return std::optional<AllocatedRoom>(room->second);
}

Result<ReleaseOutcome> FakeStore::ReleaseRoom(uint64_t room_id) {
  std::lock_guard lock(mu_);
  VERDICT_RETURN_IF_ERROR(FailureOf(Call::kReleaseRoom));
  ReleaseOutcome out;
  if (const auto& forced = ForcedOf<ReleaseStatus>()) {
    out.status = *forced;
    return out;
  }
  const auto room = rooms_.find(room_id);
  if (room == rooms_.end()) {
    out.status = ReleaseStatus::kRoomUnknown;
    return out;
  }
  if (room->second.released_at_ms == 0) {
    room->second.released_at_ms = clock_.NowMs();
    out.players_released = static_cast<uint32_t>(room->second.seats.size());
  }
  out.status = ReleaseStatus::kReleased;
  out.released_at_ms = room->second.released_at_ms;
  return out;
}

Result<int> FakeStore::ReleaseRoomsOlderThan(int64_t older_than_s, int limit) {
  std::lock_guard lock(mu_);
  VERDICT_RETURN_IF_ERROR(FailureOf(Call::kReleaseRoomsOlderThan));
  std::vector<AllocatedRoom*> due;
  for (auto& [id, room] : rooms_) {
    if (room.released_at_ms == 0 && clock_.NowMs() - room.allocated_at_ms > older_than_s * 1000) {
      due.push_back(&room);
    }
  }
  std::sort(due.begin(), due.end(), [](const AllocatedRoom* a, const AllocatedRoom* b) {
    return a->allocated_at_ms < b->allocated_at_ms;
  });
  if (due.size() > static_cast<size_t>(limit)) due.resize(limit);
  for (AllocatedRoom* room : due) room->released_at_ms = clock_.NowMs();
  return static_cast<int>(due.size());
}

Result<double> FakeStore::OldestUnsettledAllocationAge() {
  std::lock_guard lock(mu_);
  VERDICT_RETURN_IF_ERROR(FailureOf(Call::kOldestUnsettledAllocationAge));
  double oldest = 0;
  for (const auto& [id, room] : rooms_) {
    oldest = std::max(oldest, (clock_.NowMs() - room.allocated_at_ms) / 1000.0);
  }
  return oldest;
}

// ---- ReceiptStore

Result<std::optional<v1::SettlementReceipt>> FakeStore::GetReceipt(
    uint64_t room_id, const std::optional<std::string>& node_id) {
  std::lock_guard lock(mu_);
  VERDICT_RETURN_IF_ERROR(FailureOf(Call::kGetReceipt));
  const auto found = receipts_.find(room_id);
  if (found == receipts_.end() || (node_id && found->second.node_id != *node_id)) {
    return std::optional<v1::SettlementReceipt>();
  }
  return std::optional<v1::SettlementReceipt>(found->second.receipt);
}

Result<bool> FakeStore::ReceiptExpired(uint64_t room_id,
                                       const std::optional<std::string>& node_id) {
  std::lock_guard lock(mu_);
  VERDICT_RETURN_IF_ERROR(FailureOf(Call::kReceiptExpired));
  const auto found = settled_records_.find(room_id);
  return found != settled_records_.end() && (!node_id || found->second.node_id == *node_id);
}

// ---- LadderStore

Result<std::optional<v1::Player>> FakeStore::GetPlayer(const std::string& player_id) {
  std::lock_guard lock(mu_);
  VERDICT_RETURN_IF_ERROR(FailureOf(Call::kGetPlayer));
  if (!players_.count(player_id)) return std::optional<v1::Player>();
  v1::Player player;
  player.set_player_id(player_id);
  player.set_in_battle_room(RoomOf(player_id));
  for (const auto& [mode, ratings] : ratings_) {
    if (const auto r = ratings.find(player_id); r != ratings.end()) {
      *player.add_ratings() = r->second;
    }
  }
  return std::optional<v1::Player>(std::move(player));
}

// As sql/functions/verdict_declare_mode.sql: an unchanged declaration is judged before one in use.
Result<DeclareOutcome> FakeStore::DeclareMode(const v1::Mode& mode) {
  std::lock_guard lock(mu_);
  VERDICT_RETURN_IF_ERROR(FailureOf(Call::kDeclareMode));
  DeclareOutcome out;
  out.mode = mode;
  if (const auto& forced = ForcedOf<DeclareStatus>()) {
    out.status = *forced;
    return out;
  }
  // As sql/functions/verdict_declare_mode.sql: the seed, then the mode; whether it is closed is
  // no part of its declaration.
  if (mode.has_seed_from()) {
    const auto seed = modes_.find(mode.seed_from().mode());
    if (seed == modes_.end() || seed->second.rating().system() != mode.rating().system()) {
      out.status =
          seed == modes_.end() ? DeclareStatus::kSeedUnknown : DeclareStatus::kSeedSystemDiffers;
      out.mode.Clear();
      return out;
    }
  }
  const auto old = modes_.find(mode.mode());
  const bool only_closing = lobby::OnlyOpensOrCloses(mode);
  if (old == modes_.end() && only_closing) {
    out.status = DeclareStatus::kModeUnknown;
    out.mode.Clear();
    return out;
  }
  const bool closing =
      mode.has_closed() && old != modes_.end() && mode.closed() != old->second.closed();
  bool declared = false;  // the declaration is stored: a new one, or a change
  if (old == modes_.end()) {
    out.status = DeclareStatus::kCreated;
    declared = true;
  } else if (only_closing || google::protobuf::util::MessageDifferencer::Equals(
                                 DeclarationOf(old->second), DeclarationOf(mode))) {
    out.status = closing ? DeclareStatus::kUpdated : DeclareStatus::kUnchanged;
    if (closing) modes_[mode.mode()].set_closed(mode.closed());
  } else if (old->second.in_use()) {
    out.status = DeclareStatus::kInUse;
  } else {
    out.status = DeclareStatus::kUpdated;
    declared = true;
  }
  if (declared) {
    v1::Mode& stored = modes_[mode.mode()];
    const bool was_closed = stored.closed();
    stored = DeclarationOf(mode);
    stored.set_closed(mode.has_closed() ? mode.closed() : was_closed);
    stored.set_declared_at_ms(clock_.NowMs());
  }
  out.mode = modes_[mode.mode()];
  return out;
}

Result<std::optional<v1::Mode>> FakeStore::GetMode(const std::string& mode) {
  std::lock_guard lock(mu_);
  VERDICT_RETURN_IF_ERROR(FailureOf(Call::kGetMode));
  const auto found = modes_.find(mode);
  if (found == modes_.end()) return std::optional<v1::Mode>();
  return std::optional<v1::Mode>(found->second);
}

// Best first: by the displayed rating, then the player id, both descending; a full page has the
// cursor of the next.
Result<std::optional<v1::Leaderboard>> FakeStore::GetLeaderboard(
    const std::string& mode, size_t limit, const std::optional<lobby::LadderCursor>& after,
    bool include_provisional) {
  std::lock_guard lock(mu_);
  VERDICT_RETURN_IF_ERROR(FailureOf(Call::kGetLeaderboard));
  if (!modes_.count(mode)) return std::optional<v1::Leaderboard>();
  using Place = std::tuple<double, std::string>;
  std::map<Place, const v1::ModeRating*, std::greater<>> ladder;
  for (const auto& [player, rating] : ratings_[mode]) {
    if (rating.provisional() && !include_provisional) continue;
    ladder[{rating.displayed(), player}] = &rating;
  }
  v1::Leaderboard board;
  board.set_mode(mode);
  auto place = after ? ladder.upper_bound({after->displayed, after->player_id}) : ladder.begin();
  for (; place != ladder.end() && static_cast<size_t>(board.entries_size()) < limit; ++place) {
    v1::Leaderboard::Entry* entry = board.add_entries();
    entry->set_player_id(std::get<1>(place->first));
    *entry->mutable_rating() = *place->second;
  }
  if (static_cast<size_t>(board.entries_size()) == limit) {
    const v1::Leaderboard::Entry& last = board.entries(board.entries_size() - 1);
    board.set_next(lobby::EncodeLadderCursor({last.rating().displayed(), last.player_id()}));
  }
  return std::optional<v1::Leaderboard>(std::move(board));
}

// As sql/functions/verdict_import_rating.sql: the mode, then whether the player is in a room.
Result<ImportOutcome> FakeStore::ImportRating(const std::string& player_id, const std::string& mode,
                                              const v1::RatingImport& rating, double displayed) {
  std::lock_guard lock(mu_);
  VERDICT_RETURN_IF_ERROR(FailureOf(Call::kImportRating));
  ImportOutcome out;
  const auto declared = modes_.find(mode);
  const std::optional<ImportStatus>& forced = ForcedOf<ImportStatus>();
  if (forced) {
    out.status = *forced;
  } else if (declared == modes_.end()) {
    out.status = ImportStatus::kModeUnknown;
  } else {
    players_.insert(player_id);
    out.status = RoomOf(player_id) != 0 ? ImportStatus::kPlayerBusy : ImportStatus::kImported;
  }
  if (out.status != ImportStatus::kImported) return out;
  out.rating.set_mode(mode);
  if (declared != modes_.end()) out.rating.set_system(declared->second.rating().system());
  out.rating.set_rating(rating.rating());
  out.rating.set_deviation(rating.deviation());
  out.rating.set_volatility(rating.volatility());
  out.rating.set_displayed(displayed);
  // The fake counts no games: a player is provisional in a mode that asks for any.
  if (declared != modes_.end())
    out.rating.set_provisional(declared->second.provisional_games() > 0);
  // A forced answer changes nothing. (The fake counts no games: there are no counts to keep.)
  if (!forced) ratings_[mode][player_id] = out.rating;
  return out;
}

// ---- FeedStore

Result<lobby::Sequenced> FakeStore::SequenceEvents(int limit) {
  std::lock_guard lock(mu_);
  VERDICT_RETURN_IF_ERROR(FailureOf(Call::kSequenceEvents));
  lobby::Sequenced out;
  for (lobby::SettlementEvent& event : events_) {
    if (event.seq != 0) continue;
    if (out.numbered == limit) break;
    event.seq = ++head_;
    ++out.numbered;
  }
  return out;
}

Result<lobby::FeedPage> FakeStore::EventsAfter(int64_t after,
                                               const std::optional<std::string>& node_id,
                                               size_t limit) {
  std::lock_guard lock(mu_);
  VERDICT_RETURN_IF_ERROR(FailureOf(Call::kEventsAfter));
  lobby::FeedPage page;
  page.after = after;
  page.last = std::max(after, head_);
  page.epoch = kEpoch;
  page.head = head_;
  for (const lobby::SettlementEvent& event : events_) {
    if (event.seq <= after || (node_id && event.node_id != *node_id)) continue;
    if (page.events.size() == limit) {
      page.last = page.events.back().seq;
      break;
    }
    page.events.push_back(event);
  }
  return page;
}

Result<lobby::FeedState> FakeStore::GetFeedState(const std::optional<std::string>& node_id) {
  std::lock_guard lock(mu_);
  VERDICT_RETURN_IF_ERROR(FailureOf(Call::kGetFeedState));
  lobby::FeedState state;
  state.epoch = kEpoch;
  for (const lobby::SettlementEvent& event : events_) {
    if (event.seq == 0 || (node_id && event.node_id != *node_id)) continue;
    if (state.oldest == 0) state.oldest = event.seq;
    state.head = event.seq;
  }
  return state;
}

// ---- ReconcileStore

Result<std::vector<lobby::PendingRoom>> FakeStore::RoomsWithoutReceipt(int64_t older_than_s) {
  std::lock_guard lock(mu_);
  VERDICT_RETURN_IF_ERROR(FailureOf(Call::kRoomsWithoutReceipt));
  std::vector<lobby::PendingRoom> pending;
  for (const auto& [id, room] : rooms_) {
    const int64_t age_s = (clock_.NowMs() - room.allocated_at_ms) / 1000;
    if (age_s > older_than_s) {
      pending.push_back({id, room.node_id, room.allocated_at_ms, age_s, room.released_at_ms});
    }
  }
  return pending;
}

// Every receipt writes its event with it here: none is ever missing.
Result<std::vector<lobby::ReceiptWithoutEvent>> FakeStore::ReceiptsWithoutEvent(
    int64_t /*older_than_s*/) {
  std::lock_guard lock(mu_);
  VERDICT_RETURN_IF_ERROR(FailureOf(Call::kReceiptsWithoutEvent));
  return std::vector<lobby::ReceiptWithoutEvent>();
}

// A forced status is answered as it is, a void of the request's match with its policy and reason;
// without one, every match is unknown: the fake keeps no history.
Result<lobby::VoidOutcome> FakeStore::VoidMatch(const lobby::VoidRequest& request) {
  std::lock_guard lock(mu_);
  VERDICT_RETURN_IF_ERROR(FailureOf(Call::kVoidMatch));
  lobby::VoidOutcome out;
  out.status = ForcedOf<lobby::VoidStatus>().value_or(lobby::VoidStatus::kMatchUnknown);
  out.voided.set_match_id(request.match_id);
  out.voided.set_room_id(request.room_id);
  out.voided.set_policy(request.policy == lobby::VoidPolicy::kReplay ? "replay" : "compensate");
  out.voided.set_reason(request.reason);
  out.voided.set_duplicate(out.status == lobby::VoidStatus::kDuplicate);
  out.would_replay = static_cast<uint64_t>(request.replay_limit);
  out.more_than = true;
  return out;
}

}  // namespace verdict::testing
