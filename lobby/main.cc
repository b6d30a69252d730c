// verdict-lobby: the settlement service. Subcommands: migrate, serve, reconcile, retain,
// new-epoch.
// Flags are parsed here only; everything else takes plain option structs.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include <google/protobuf/util/json_util.h>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "cli/config_file.h"
#include "cli/duration.h"
#include "cli/hangup_guard.h"
#include "cli/log_format.h"
#include "cli/log_level.h"
#include "cli/service_notify.h"
#include "cli/version.h"
#include "common/bearer_token.h"
#include "common/host_port.h"
#include "common/process_metrics.h"
#include "lobby/allocator.h"
#include "lobby/answers.h"
#include "lobby/event_hub.h"
#include "lobby/http_server.h"
#include "lobby/maintenance.h"
#include "lobby/modes.h"
#include "lobby/pg_store.h"
#include "lobby/readiness.h"
#include "lobby/retention.h"
#include "lobby/room_actions.h"
#include "lobby/schema.h"
#include "lobby/settlement_service.h"
#include "proto/wire.h"

namespace {

using namespace verdict;
using namespace verdict::lobby;

struct Flags {
  std::string db;
  std::string log_level = "info";
  std::string log_format = "text";
  std::string listen = ServerOptions{}.host + ":" + std::to_string(ServerOptions{}.port);
  std::vector<std::string> node_tokens;
  std::string node_tokens_file;
  std::string admin_token;
  int db_pool = StoreOptions{}.pool_size;
  int threads = ServerOptions{}.http.io_threads;
  std::string modes_file;
  int read_timeout_ms = static_cast<int>(ServerOptions{}.http.read_timeout.count());
  int lock_timeout_ms = static_cast<int>(pg::ConnectionOptions{}.lock_timeout.count());
  double coalesce_wait_ms = SchedulerOptions{}.coalesce_wait.count() / 1000.0;
  int settle_concurrency = SchedulerOptions{}.settle_concurrency;
  int void_replay_limit = ServiceOptions{}.void_replay_limit;
  int statement_timeout_ms = static_cast<int>(pg::ConnectionOptions{}.statement_timeout.count());
  int readiness_interval_ms = static_cast<int>(ReadinessOptions{}.interval.count());
  size_t max_connections = ServerOptions{}.http.max_connections;
  size_t max_subscribers = ServerOptions{}.max_subscribers;
  size_t subscriber_buffer_bytes = ServerOptions{}.subscriber_buffer_bytes;
  std::string tls_cert, tls_key;
  bool unsafe_release_before_commit = false;  // verdict-lobby-testing only
  int64_t older_than_s = 0;
  std::vector<std::string> outbox_listings;
  std::vector<std::string> replicated_listings;  // reconcile --replicated NODE_ID=FILE
  bool json = false;
  bool abort_lost = false;
  std::string abort_reason = "lost";
  // Retention (serve and retain) and the rest of serve's maintenance.
  std::string events_older_than = cli::FormatDurationOrOff(RetentionOptions{}.events_older_than);
  std::string history_older_than = cli::FormatDurationOrOff(RetentionOptions{}.history_older_than);
  std::string receipts_older_than =
      cli::FormatDurationOrOff(RetentionOptions{}.receipts_older_than);
  int64_t events_per_partition = PartitionOptions{}.events_per_partition;
  int64_t matches_per_partition = PartitionOptions{}.matches_per_partition;
  std::string retain_every = cli::FormatDurationOrOff(MaintenanceOptions{}.retain_every);
  std::string release_after = cli::FormatDurationOrOff(MaintenanceOptions{}.release_after);
  std::string maintenance_interval = cli::FormatDuration(MaintenanceOptions{}.interval);
  int aging_per_tick = MaintenanceOptions{}.aging_per_tick;
  bool unsafe_expire_receipts_without_records = false;  // verdict-lobby-testing only
};

// The database of every command, with the lobby's connection defaults and session settings
// (lobby/pg/connection.h). `serve` runs every statement under its lock and statement timeouts,
// and its own work between two statements of a transaction under the statement timeout too;
// an operator's command (migrate, retain, new-epoch, reconcile) may run long statements, and keeps
// the connect timeout and keepalives, so none can hang on an unreachable database host.
pg::ConnectionOptions ConnectionFrom(const Flags& flags, bool operator_command) {
  pg::ConnectionOptions connection;
  connection.conninfo = flags.db;
  connection.lock_timeout = std::chrono::milliseconds(flags.lock_timeout_ms);
  connection.statement_timeout =
      std::chrono::milliseconds(operator_command ? 0 : flags.statement_timeout_ms);
  connection.idle_in_transaction_timeout = connection.statement_timeout;
  return connection;
}

int Fail(const std::string& message) {
  cli::PrintError("verdict-lobby", message);
  return 1;
}

// The "NODE_ID=TOKEN" entries (from the command line and --config) and the "node_id token"
// lines of --node-tokens-file. A node may appear several times: each of its tokens is valid,
// which is how a token is rotated without a moment in which the node is refused. A tokens file
// that names no token (empty, comments only: cut short while it was written, say) is refused
// rather than read as "no node may settle". SettlementService::CheckTokens says which sets of
// tokens can serve.
Result<std::vector<NodeToken>> CollectTokens(const Flags& flags) {
  std::vector<NodeToken> tokens;
  for (const auto& entry : flags.node_tokens) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == entry.size()) {
      return InvalidArgumentError("--node-token wants NODE_ID=TOKEN, got '" + entry + "'");
    }
    tokens.push_back({entry.substr(0, eq), entry.substr(eq + 1)});
  }
  if (!flags.node_tokens_file.empty()) {
    std::ifstream in(flags.node_tokens_file);
    if (!in) return InvalidArgumentError("cannot read " + flags.node_tokens_file);
    std::ostringstream text;
    text << in.rdbuf();
    auto lines = ParseNodeTokensFile(text.str(), flags.node_tokens_file);
    if (!lines.ok()) return lines.status();
    for (NodeTokenLine& line : *lines) {
      tokens.push_back({std::move(line.node_id), std::move(line.token)});
    }
  }
  VERDICT_RETURN_IF_ERROR(SettlementService::CheckTokens(tokens, flags.admin_token));
  return tokens;
}

// The retention windows and partition sizes of `serve` and `retain`.
Result<RetentionOptions> RetentionFrom(const Flags& flags) {
  RetentionOptions options;
  auto events = cli::ParseDurationOrOff(flags.events_older_than);
  if (!events.ok())
    return Status(events.status().code(), "--events-older-than: " + events.status().message());
  auto history = cli::ParseDurationOrOff(flags.history_older_than);
  if (!history.ok())
    return Status(history.status().code(), "--history-older-than: " + history.status().message());
  auto receipts = cli::ParseDurationOrOff(flags.receipts_older_than);
  if (!receipts.ok())
    return Status(receipts.status().code(),
                  "--receipts-older-than: " + receipts.status().message());
  options.events_older_than = *events;
  options.history_older_than = *history;
  options.receipts_older_than = *receipts;
  options.partitions.events_per_partition = flags.events_per_partition;
  options.partitions.matches_per_partition = flags.matches_per_partition;
  options.unsafe_expire_receipts_without_records_for_test =
      flags.unsafe_expire_receipts_without_records;
  return options;
}

// Declares each mode of `path` (--modes-file), as PUT /v1/modes/{mode} would; the first that
// cannot be declared (a bad declaration, a change of a mode in use, a database that cannot be
// reached) stops `serve` from starting, naming it.
Status DeclareModesOfFile(LadderStore& store, const std::string& path) {
  std::ifstream in(path);
  if (!in) return InvalidArgumentError("--modes-file: cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  v1::ModeList list;
  if (Status decoded = wire::DecodeBody(text.str(), wire::BodyFormat::kJson, &list);
      !decoded.ok()) {
    return InvalidArgumentError("--modes-file " + path + ": " + decoded.message());
  }
  for (const v1::Mode& given : list.modes()) {
    auto complete = CompleteMode(given.mode(), given);
    if (!complete.ok()) {
      return InvalidArgumentError("--modes-file " + path + ": mode " + given.mode() + ": " +
                                  complete.status().message());
    }
    auto declared = store.DeclareMode(*complete);
    if (!declared.ok()) return declared.status();
    if (declared->status == DeclareStatus::kInUse) {
      return FailedPreconditionError("--modes-file " + path + ": mode " + given.mode() +
                                     " has rooms, so its declaration is fixed; declare a new "
                                     "mode instead of changing it");
    }
    if (const Answer* answer = AnswerOf(kDeclareAnswers, declared->status);
        answer && !answer->success) {
      return InvalidArgumentError(
          "--modes-file " + path + ": mode " + given.mode() + ": " +
          FillDetail(answer->detail,
                     {.mode = given.mode(), .detail = complete->seed_from().mode()}));
    }
    spdlog::info("mode={}: {}", given.mode(),
                 declared->status == DeclareStatus::kCreated   ? "declared"
                 : declared->status == DeclareStatus::kUpdated ? "declaration changed"
                                                               : "declared as before");
  }
  return Status::Ok();
}

int RunRetain(const Flags& flags) {
  auto options = RetentionFrom(flags);
  if (!options.ok()) return Fail(options.status().message());
  auto report = RetainOnce(ConnectionFrom(flags, true), *options);
  if (!report.ok()) return Fail(report.status().ToString());
  std::printf("retention pass: %s\n", report->ToString().c_str());
  for (const std::string& failed : report->steps_failed) Fail(failed);
  return report->steps_failed.empty() ? 0 : 1;
}

int RunNewEpoch(const Flags& flags) {
  auto epoch = NewEpoch(ConnectionFrom(flags, true));
  if (!epoch.ok()) return Fail(epoch.status().ToString());
  std::printf(
      "the event feed's epoch is now %s: subscribers with an older one are refused "
      "(EPOCH_CHANGED)\n",
      epoch->c_str());
  return 0;
}

int RunMigrate(const Flags& flags) {
  PartitionOptions partitions;
  partitions.events_per_partition = flags.events_per_partition;
  partitions.matches_per_partition = flags.matches_per_partition;
  auto applied = Migrate(ConnectionFrom(flags, true), partitions);
  if (!applied.ok()) return Fail(applied.status().ToString());
  std::printf("schema at version %d (%d migration%s and %d function file%s applied)\n",
              ExpectedSchemaVersion(), applied->migrations, applied->migrations == 1 ? "" : "s",
              applied->functions, applied->functions == 1 ? "" : "s");
  return 0;
}

// Where a room without a receipt is, according to the outbox listings given.
struct Whereabouts {
  std::string state;  // pending, quarantined, dead-lettered, lost, or unchecked
  std::string reason, detail;
};

// Reads the `--outbox NODE_ID=FILE` listings (`verdict-node outbox ls --json`), or the
// `--replicated NODE_ID=FILE` ones (`verdict-node replicated ls --json`), keyed by node.
Result<std::map<std::string, v1::OutboxListing>> ReadListings(
    const std::vector<std::string>& entries, const std::string& flag) {
  std::map<std::string, v1::OutboxListing> listings;
  for (const std::string& entry : entries) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == entry.size()) {
      return InvalidArgumentError(flag + " wants NODE_ID=FILE, got '" + entry + "'");
    }
    const std::string node = entry.substr(0, eq), file = entry.substr(eq + 1);
    std::ifstream in(file);
    if (!in) return InvalidArgumentError("cannot read " + file);
    std::stringstream text;
    text << in.rdbuf();
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = true;  // fields a newer verdict-node may add
    v1::OutboxListing listing;
    if (auto s = google::protobuf::util::JsonStringToMessage(text.str(), &listing, options);
        !s.ok()) {
      return InvalidArgumentError(file +
                                  " is not a listing of `verdict-node outbox ls --json` or " +
                                  "`replicated ls --json`: " + std::string(s.message()));
    }
    if (!listing.complete()) {
      return InvalidArgumentError(file + " is cut short by --limit; list the whole outbox (" +
                                  "`outbox ls --json --limit N` with N above its record count)");
    }
    if (listings.count(node)) return InvalidArgumentError("two listings for node " + node);
    listings[node] = std::move(listing);
  }
  return listings;
}

// A room of no outbox listing, or lost from its node's, that etcd holds is `replicated`: a
// rescue (verdict-node rescue) or the node itself delivers it.
Whereabouts LocateReplicated(const PendingRoom& room, Whereabouts found,
                             const std::map<std::string, v1::OutboxListing>& replicated) {
  if (found.state != "lost" && found.state != "unchecked") return found;
  auto listing = replicated.find(room.node_id);
  if (listing == replicated.end()) return found;
  for (const auto& r : listing->second.records()) {
    if (r.room_id() == room.room_id) return {"replicated", "in etcd", ""};
  }
  return found;
}

Whereabouts Locate(const PendingRoom& room,
                   const std::map<std::string, v1::OutboxListing>& listings) {
  auto listing = listings.find(room.node_id);
  if (listing == listings.end()) return {"unchecked", "no listing from this node", ""};
  // A room may have records in several places (a redriven one, say): the one still to be
  // delivered wins, then quarantine, then dead letter.
  Whereabouts found{"lost", "", ""};
  auto rank = [](const std::string& state) {
    return state == "pending" ? 3 : state == "quarantined" ? 2 : state == "dead-lettered" ? 1 : 0;
  };
  for (const auto& r : listing->second.records()) {
    if (r.room_id() != room.room_id) continue;
    const std::string state = r.where() == "dead-letter"  ? "dead-lettered"
                              : r.where() == "quarantine" ? "quarantined"
                                                          : "pending";
    if (rank(state) > rank(found.state)) found = {state, r.reason(), r.detail()};
  }
  return found;
}

// reconcile's exit status: 3 if a room is lost, else 4 if a receipt has no event, else 5 if a
// room could not be checked against its node's outbox (no listing), else 0.
int ReconcileStatus(int lost, size_t receipts_without_event, int unchecked) {
  return lost > 0 ? 3 : receipts_without_event > 0 ? 4 : unchecked > 0 ? 5 : 0;
}

// Settles each lost room of `rooms` as ABORTED (AbortResult), through the settlement path a
// result takes; sets `aborted[i]` for each one the call settled.
Status AbortLost(PgStore& store, const Flags& flags, const std::vector<PendingRoom>& rooms,
                 const std::vector<Whereabouts>& where, std::vector<bool>* aborted) {
  aborted->assign(rooms.size(), false);
  for (size_t i = 0; i < rooms.size(); ++i) {
    if (where[i].state != "lost") continue;
    auto room = store.GetRoom(rooms[i].room_id);
    if (!room.ok()) return room.status();
    if (!room->has_value()) continue;  // settled meanwhile
    const v1::BattleResult result = AbortResult(**room, flags.abort_reason);
    auto settled = store.SettleBattles({{&result, (*room)->node_id, Fingerprint(result)}},
                                       /*wait=*/true, nullptr);
    if (!settled.front().ok()) return settled.front().status();
    const SettleOutcome& outcome = *settled.front();
    (*aborted)[i] = outcome.status == SettleStatus::kSettled;
    std::fprintf(flags.json ? stderr : stdout, "room %llu: %s (match %llu)\n",
                 static_cast<unsigned long long>(rooms[i].room_id),
                 (*aborted)[i] ? "aborted" : "already settled",
                 static_cast<unsigned long long>(outcome.receipt.match_id()));
  }
  return Status::Ok();
}

int RunReconcile(const Flags& flags) {
  auto listings = ReadListings(flags.outbox_listings, "--outbox");
  if (!listings.ok()) return Fail(listings.status().message());
  auto replicated = ReadListings(flags.replicated_listings, "--replicated");
  if (!replicated.ok()) return Fail(replicated.status().message());
  StoreOptions store_options;
  store_options.connection = ConnectionFrom(flags, true);
  store_options.pool_size = 1;
  auto store = PgStore::Open(store_options);
  if (!store.ok()) return Fail(store.status().ToString());
  auto rooms = (*store)->RoomsWithoutReceipt(flags.older_than_s);
  if (!rooms.ok()) return Fail(rooms.status().ToString());
  auto eventless = (*store)->ReceiptsWithoutEvent(flags.older_than_s);
  if (!eventless.ok()) return Fail(eventless.status().ToString());

  std::map<std::string, int> counts;
  std::vector<Whereabouts> where;
  for (const PendingRoom& r : *rooms) {
    where.push_back(LocateReplicated(r,
                                     listings->empty()
                                         ? Whereabouts{"unchecked", "no listing was given", ""}
                                         : Locate(r, *listings),
                                     *replicated));
    ++counts[where.back().state];
  }
  const auto count = [&](const char* state) { return counts.count(state) ? counts.at(state) : 0; };
  const int status = ReconcileStatus(count("lost"), eventless->size(), count("unchecked"));
  std::vector<bool> aborted(rooms->size(), false);
  if (flags.json) {
    if (flags.abort_lost) {
      if (Status s = AbortLost(**store, flags, *rooms, where, &aborted); !s.ok()) {
        return Fail("aborting the lost rooms: " + s.ToString());
      }
    }
    v1::Reconciliation doc;
    doc.set_older_than_s(static_cast<double>(flags.older_than_s));
    for (size_t i = 0; i < rooms->size(); ++i) {
      const PendingRoom& r = (*rooms)[i];
      v1::Reconciliation::Room* room = doc.add_pending();
      room->set_room_id(r.room_id);
      room->set_node_id(wire::ValidUtf8(r.node_id));
      room->set_allocated_at_ms(static_cast<double>(r.allocated_at_ms));
      room->set_age_s(static_cast<double>(r.age_s));
      room->set_state(where[i].state);
      room->set_reason(wire::ValidUtf8(where[i].reason));
      room->set_detail(wire::ValidUtf8(where[i].detail));
      room->set_released_at_ms(static_cast<double>(r.released_at_ms));
      room->set_aborted(aborted[i]);
    }
    for (const auto& [state, n] : counts) (*doc.mutable_counts())[state] = n;
    for (const ReceiptWithoutEvent& e : *eventless) {
      auto* receipt = doc.add_receipts_without_event();
      receipt->set_room_id(e.room_id);
      receipt->set_node_id(wire::ValidUtf8(e.node_id));
      receipt->set_match_id(e.match_id);
      receipt->set_settled_at_ms(static_cast<double>(e.settled_at_ms));
    }
    auto json = wire::ToJson(doc);
    if (!json.ok()) return Fail(json.status().ToString());
    std::printf("%s\n", json->c_str());
    return status;
  }
  std::printf("%-20s %-24s %10s  %-13s %s\n", "ROOM_ID", "NODE_ID", "AGE_S", "STATE", "REASON");
  for (size_t i = 0; i < rooms->size(); ++i) {
    const PendingRoom& r = (*rooms)[i];
    std::printf("%-20llu %-24s %10lld  %-13s %s%s%s%s\n",
                static_cast<unsigned long long>(r.room_id), r.node_id.c_str(),
                static_cast<long long>(r.age_s), where[i].state.c_str(),
                r.released_at_ms > 0 ? "(players released) " : "", where[i].reason.c_str(),
                where[i].detail.empty() ? "" : ": ", where[i].detail.c_str());
  }
  std::string summary;
  for (const auto& [state, n] : counts) summary += ", " + std::to_string(n) + " " + state;
  std::printf("%zu room%s allocated more than %lld s ago without a receipt%s\n", rooms->size(),
              rooms->size() == 1 ? "" : "s", static_cast<long long>(flags.older_than_s),
              summary.c_str());
  if (count("lost") > 0) {
    std::printf("LOST: %d room%s in no outbox listed and never settled\n", count("lost"),
                count("lost") == 1 ? " is" : "s are");
  }
  if (count("unchecked") > 0) {
    std::printf("UNCHECKED: %d room%s of nodes without a listing (--outbox NODE_ID=FILE)\n",
                count("unchecked"), count("unchecked") == 1 ? "" : "s");
  }
  for (const ReceiptWithoutEvent& e : *eventless) {
    std::printf("NO EVENT: room %llu (node %s, match %llu) has a receipt but no settlement event\n",
                static_cast<unsigned long long>(e.room_id), e.node_id.c_str(),
                static_cast<unsigned long long>(e.match_id));
  }
  if (flags.abort_lost) {
    if (Status s = AbortLost(**store, flags, *rooms, where, &aborted); !s.ok()) {
      return Fail("aborting the lost rooms: " + s.ToString());
    }
  }
  return status;
}

struct Commands {
  CLI::App* migrate;
  CLI::App* serve;
  CLI::App* reconcile;
  CLI::App* retain;
  CLI::App* new_epoch;
};
Commands DefineFlags(CLI::App& app, Flags& flags);

// SIGHUP: parse the command line again (which reads --config again) and reload the node tokens
// it names, from the flags, the config file and --node-tokens-file. A reload that fails keeps
// the tokens in use and says why.
void ReloadTokens(int argc, char** argv, SettlementService& service) {
  Flags fresh;
  CLI::App app;
  DefineFlags(app, fresh);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    spdlog::error("SIGHUP: cannot reload the node tokens: {}; keeping the current ones", e.what());
    return;
  }
  auto tokens = CollectTokens(fresh);
  if (!tokens.ok()) {
    spdlog::error("SIGHUP: cannot reload the node tokens: {}; keeping the current ones",
                  tokens.status().message());
    return;
  }
  const size_t count = tokens->size();
  if (Status replaced = service.ReplaceNodeTokens(std::move(*tokens)); !replaced.ok()) {
    spdlog::error("SIGHUP: cannot reload the node tokens: {}; keeping the current ones",
                  replaced.message());
    return;
  }
  spdlog::info("SIGHUP: node tokens reloaded ({} token{})", count, count == 1 ? "" : "s");
}

// How long `serve` waits for its requests to finish once told to stop: the longest a request's
// statement runs by default (5 s) and then some. A systemd unit's TimeoutStopSec (30 s) is longer.
constexpr std::chrono::seconds kShutdownGrace{10};

// SIGTERM always ends the lobby. Stopping waits for the DB workers to finish their requests, and
// a worker that never does (a bug looping between two statements of a settlement; its locks are
// freed by the server's idle-in-transaction timeout, not by the lobby) would hold the exit for
// ever. So from the first SIGTERM or SIGINT on, the lobby exits (status 1, with an error line)
// once kShutdownGrace has passed, or at once on a second one.
void ExitIfShutdownHangs() {
  std::thread([] {
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    const auto deadline = std::chrono::steady_clock::now() + kShutdownGrace;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      const timespec wait{.tv_sec = static_cast<time_t>(left.count() / 1'000'000'000),
                          .tv_nsec = static_cast<long>(left.count() % 1'000'000'000)};
      if (sigtimedwait(&stop, nullptr, &wait) > 0) break;  // a second signal; else EAGAIN, EINTR
    }
    spdlog::error(
        "shutdown did not finish within {} s, or was asked again: exiting with "
        "requests unfinished (their transactions roll back)",
        kShutdownGrace.count());
    spdlog::default_logger()->flush();
    std::_Exit(1);
  }).detach();
}

int RunServe(const Flags& flags, int argc, char** argv) {
  SetLobbyAllocator();  // lobby/allocator.h says why
  ServerOptions server_options;
  if (!ParseHostPort(flags.listen, &server_options.host, &server_options.port)) {
    return Fail("--listen wants HOST:PORT, got '" + flags.listen + "'");
  }
  ServiceOptions service_options;
  auto tokens = CollectTokens(flags);
  if (!tokens.ok()) return Fail(tokens.status().message());
  service_options.node_tokens = std::move(*tokens);
  service_options.admin_token = flags.admin_token;
  service_options.settlement.coalesce_wait =
      std::chrono::microseconds(static_cast<int64_t>(flags.coalesce_wait_ms * 1000));
  service_options.settlement.settle_concurrency = flags.settle_concurrency;
  service_options.void_replay_limit = flags.void_replay_limit;
  if (service_options.node_tokens.empty()) {
    spdlog::warn("no node tokens configured: every settlement will be refused with 401");
  }
  if (flags.unsafe_release_before_commit) {
    spdlog::error("UNSAFE test switch is on: this lobby releases players before settling");
  }
  MaintenanceOptions maintenance_options;
  {
    auto retention = RetentionFrom(flags);
    if (!retention.ok()) return Fail(retention.status().message());
    maintenance_options.retention = *retention;
    auto interval = cli::ParseDuration(flags.maintenance_interval);
    auto retain_every = cli::ParseDurationOrOff(flags.retain_every);
    auto release_after = cli::ParseDurationOrOff(flags.release_after);
    if (!interval.ok() || interval->count() == 0) {
      return Fail("--maintenance-interval: " +
                  (interval.ok() ? "must be positive" : interval.status().message()));
    }
    if (!retain_every.ok()) return Fail("--retain-every: " + retain_every.status().message());
    if (!release_after.ok()) return Fail("--release-after: " + release_after.status().message());
    maintenance_options.interval = *interval;
    maintenance_options.retain_every = *retain_every;
    maintenance_options.release_after = *release_after;
    if (flags.aging_per_tick < 0) return Fail("--inactivity-per-tick: must be 0 or more");
    maintenance_options.aging_per_tick = flags.aging_per_tick;
  }

  StoreOptions store_options;
  store_options.connection = ConnectionFrom(flags, false);
  store_options.pool_size = flags.db_pool;
  store_options.unsafe_release_before_commit_for_test = flags.unsafe_release_before_commit;
  auto store = PgStore::Open(store_options);
  if (!store.ok()) return Fail(store.status().ToString());
  if (!flags.modes_file.empty()) {
    if (Status declared = DeclareModesOfFile(**store, flags.modes_file); !declared.ok()) {
      return Fail(declared.message());
    }
  }
  // The event feed reads through connections of its own, prepared with the feed's statements
  // only, so subscribers never take the settlements' connections.
  EventHubOptions hub_options;
  StoreOptions feed_options = store_options;
  feed_options.pool_size = 1 + hub_options.page_threads;
  auto feed_store = PgFeedStore::Open(feed_options);
  if (!feed_store.ok()) return Fail(feed_store.status().ToString());

  // Signals are taken by sigwait below; block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // Readiness is probed on a connection of its own, so /readyz never takes a settlement's; its
  // first probe runs before the lobby listens (and logs whether it is ready).
  ReadinessOptions readiness_options;
  readiness_options.interval = std::chrono::milliseconds(flags.readiness_interval_ms);
  const auto probe = OpenReadinessProbe(store_options.connection, readiness_options.timeout);
  ReadinessMonitor readiness([&probe] { return probe->Probe(); }, readiness_options);
  readiness.Start();

  // What bursts of large batches leave in the allocator's arenas goes back once they are over.
  FreeMemoryReturner free_memory;
  service_options.settlement.on_quiet = [&free_memory] { free_memory.Quiet(); };

  metrics::Registry registry;
  metrics::AddProcessMetrics(registry);
  EventHub hub(**feed_store, store_options.connection, hub_options, registry);
  SettlementService service(ServiceStores::Of(**store), &hub, service_options, registry,
                            &readiness);
  server_options.http.io_threads = flags.threads;
  server_options.http.read_timeout = std::chrono::milliseconds(flags.read_timeout_ms);
  server_options.http.max_connections = flags.max_connections;
  server_options.max_subscribers = flags.max_subscribers;
  server_options.subscriber_buffer_bytes = flags.subscriber_buffer_bytes;
  server_options.http.tls_cert_file = flags.tls_cert;
  server_options.http.tls_key_file = flags.tls_key;
  server_options.db_threads = (*store)->workers();
  HttpServer server(server_options, service, hub, registry);
  // Retention's statements may run longer than a request's (moving rows out of a DEFAULT
  // partition); each step runs under the retention's own lock timeout.
  Maintenance maintenance(maintenance_options, **store, **store, ConnectionFrom(flags, true),
                          registry);
  maintenance.Start();
  hub.Start();
  auto port = server.Start();
  if (!port.ok()) return Fail(port.status().ToString());
  std::printf("listening on %s:%u%s\n", server_options.host.c_str(), *port,
              flags.tls_cert.empty() ? "" : " (TLS)");
  std::fflush(stdout);
  // From here SIGHUP reloads: a unit of Type=notify runs no ExecReload before this.
  if (Status told = cli::NotifyServiceReady(); !told.ok()) spdlog::warn("{}", told.message());

  int signal = 0;
  while (sigwait(&signals, &signal) == 0 && signal == SIGHUP) ReloadTokens(argc, argv, service);
  spdlog::info("{}: shutting down", signal == SIGTERM ? "SIGTERM" : "SIGINT");
  ExitIfShutdownHangs();
  server.Stop();
  hub.Stop();
  maintenance.Stop();
  readiness.Stop();
  spdlog::info("stopped");
  return 0;
}

// The sizes of partitions made from now on (migrate, serve and retain make them).
void AddPartitionFlags(CLI::App* command, Flags& flags) {
  command
      ->add_option("--events-per-partition", flags.events_per_partition,
                   "event ids per partition of settlement_events, for partitions made from now on")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  command
      ->add_option("--matches-per-partition", flags.matches_per_partition,
                   "matches per partition of the history, for partitions made from now on")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
}

// The retention windows and partition sizes, shared by `serve` and `retain`.
void AddRetentionFlags(CLI::App* command, Flags& flags) {
  command
      ->add_option("--events-older-than", flags.events_older_than,
                   "drop settlement events older than this (e.g. 7d, 90s), a partition at a "
                   "time; off: keep them")
      ->capture_default_str();
  command
      ->add_option("--history-older-than", flags.history_older_than,
                   "drop matches, their players and replays older than this; off: keep them")
      ->capture_default_str();
  command
      ->add_option("--receipts-older-than", flags.receipts_older_than,
                   "replace receipts older than this by compact records of their rooms (a late "
                   "redelivery is then answered 410 ORIGINAL_EXPIRED); off: keep them")
      ->capture_default_str();
  AddPartitionFlags(command, flags);
}

Commands DefineFlags(CLI::App& app, Flags& flags) {
  app.description(
      "verdict-lobby: settles battle results exactly once on PostgreSQL.\n"
      "The database comes from --db or libpq's PG* environment variables.");
  app.require_subcommand(1);
  app.fallthrough();  // program flags may follow the subcommand
  cli::AddConfigOption(app);
  app.add_option("--db", flags.db, "libpq connection string (default: PG* environment)");
  cli::AddLogLevelOption(app, &flags.log_level);
  cli::AddLogFormatOption(app, &flags.log_format);
  cli::AddVersionOption(app, "verdict-lobby");

  CLI::App* migrate = app.add_subcommand(
      "migrate", "apply the schema migrations this binary has, and make partitions ahead");
  AddPartitionFlags(migrate, flags);

  CLI::App* serve = app.add_subcommand("serve", "run the HTTP settlement service");
  serve->add_option("--listen", flags.listen, "HOST:PORT to listen on; port 0 picks a free one")
      ->capture_default_str();
  serve->add_option("--node-token", flags.node_tokens,
                    "NODE_ID=TOKEN a node authenticates with (repeatable; a node may have "
                    "several tokens at once, for rotation; SIGHUP reloads them)");
  serve->add_option("--node-tokens-file", flags.node_tokens_file,
                    "file of 'node_id token' lines (a node may appear twice); SIGHUP reloads it");
  serve->add_option("--admin-token", flags.admin_token,
                    "bearer token that POST /v1/rooms requires");
  serve->add_option("--db-pool", flags.db_pool, "database connections and DB workers")
      ->capture_default_str()
      ->check(CLI::Range(1, 512));
  serve->add_option("--threads", flags.threads, "I/O threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  serve->add_option("--modes-file", flags.modes_file,
                    "a JSON file of modes to declare at start, {\"modes\": [{\"mode\": …, "
                    "\"rating\": …}, …]}, as PUT /v1/modes/{mode} does (docs/lobby.md)");
  serve
      ->add_option("--read-timeout-ms", flags.read_timeout_ms,
                   "time a client has to send a whole request; also the keep-alive idle limit")
      ->capture_default_str()
      ->check(CLI::Range(100, 3'600'000));
  serve
      ->add_option("--lock-timeout-ms", flags.lock_timeout_ms,
                   "longest wait of a request's statement for a lock (a room another session "
                   "holds) before it answers 503; 0 waits forever")
      ->capture_default_str()
      ->check(CLI::Range(0, 3'600'000));
  serve
      ->add_option("--statement-timeout-ms", flags.statement_timeout_ms,
                   "longest run of a request's statement before it is cancelled and answers "
                   "503, and longest wait of a transaction between two statements before the "
                   "database ends it and frees its locks; 0 never cancels")
      ->capture_default_str()
      ->check(CLI::Range(0, 3'600'000));
  serve
      ->add_option("--readiness-interval-ms", flags.readiness_interval_ms,
                   "time between readiness probes (a write transaction on a connection of their "
                   "own); /readyz answers from the last one")
      ->capture_default_str()
      ->check(CLI::Range(10, 60'000));
  serve
      ->add_option("--coalesce-wait-ms", flags.coalesce_wait_ms,
                   "group commit: settlements of concurrent requests share one transaction, which "
                   "waits up to this long for more to join while another is running; 0 turns it "
                   "off (a transaction per request)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1000.0));
  serve
      ->add_option("--settle-concurrency", flags.settle_concurrency,
                   "settlement transactions at once while coalescing")
      ->capture_default_str()
      ->check(CLI::Range(1, 512));
  serve
      ->add_option("--void-replay-limit", flags.void_replay_limit,
                   "the most later matches a `replay` void of a match may rate again; a void "
                   "that would rate more is refused (409 VOID_TOO_LARGE) and changes nothing")
      ->capture_default_str()
      ->check(CLI::Range(1, 100'000));
  serve
      ->add_option("--max-connections", flags.max_connections,
                   "open connections beyond which new ones get 503")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1'000'000}));
  serve
      ->add_option("--max-subscribers", flags.max_subscribers,
                   "open /v1/events subscriptions beyond which new ones get 503")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{100'000}));
  serve
      ->add_option("--subscriber-buffer-bytes", flags.subscriber_buffer_bytes,
                   "events queued for one subscriber beyond which a live one is closed (1013) "
                   "to resume with ?after=")
      ->capture_default_str()
      ->check(CLI::Range(size_t{4096}, size_t{1} << 30));
  serve->add_option("--tls-cert", flags.tls_cert,
                    "PEM certificate (chain): with --tls-key, serve HTTPS (and WSS) only");
  serve->add_option("--tls-key", flags.tls_key, "PEM private key of --tls-cert");
#ifdef VERDICT_UNSAFE_TEST_SWITCHES
  // verdict-lobby-testing only (lobby/CMakeLists.txt): the tests' negative control for P5.
  serve
      ->add_flag("--unsafe-release-before-commit", flags.unsafe_release_before_commit,
                 "release the players in a transaction of their own before settling")
      ->group("Negative controls (test build only)");
#endif
  AddRetentionFlags(serve, flags);
  serve
      ->add_option("--retain-every", flags.retain_every,
                   "run a retention pass this often (e.g. 1h), with the windows above; off: "
                   "leave it to `verdict-lobby retain` (the systemd timer)")
      ->capture_default_str();
  serve
      ->add_option("--release-after", flags.release_after,
                   "release the players of rooms allocated longer ago than this (e.g. 2h) to a "
                   "pending settlement, which still takes the room's result; off: never")
      ->capture_default_str();
  serve
      ->add_option("--maintenance-interval", flags.maintenance_interval,
                   "how often to make partitions ahead, release rooms (--release-after) and "
                   "check whether a retention pass is due")
      ->capture_default_str();
  serve
      ->add_option("--inactivity-per-tick", flags.aging_per_tick,
                   "ratings the inactivity pass looks at each maintenance tick, in the modes "
                   "that age idle players (tau_idle, period_days); 0: no pass (a rating then "
                   "ages at its next match only)")
      ->capture_default_str();

  CLI::App* reconcile = app.add_subcommand(
      "reconcile", "list rooms allocated longer ago than a threshold that have no receipt");
  // A century is older than any room; beyond some millennia the database cannot even say when
  // "that long ago" was.
  constexpr int64_t kMaxOlderThanS = int64_t{100} * 366 * 24 * 3600;
  reconcile->add_option("--older-than", flags.older_than_s, "threshold in seconds")
      ->required()
      ->check(CLI::Range(int64_t{0}, kMaxOlderThanS));
  reconcile->add_option("--outbox", flags.outbox_listings,
                        "NODE_ID=FILE: that node's `verdict-node outbox ls --json` (repeatable); "
                        "rooms are then classified pending, quarantined, dead-lettered or lost "
                        "(exit status 3 if any is lost)");
  reconcile->add_option(
      "--replicated", flags.replicated_listings,
      "NODE_ID=FILE: that node's `verdict-node replicated ls --json` (repeatable); "
      "a room found there and in no outbox is `replicated`, not lost");
  reconcile->add_flag("--json", flags.json, "print JSON instead of a table");
  reconcile->add_flag("--abort-lost", flags.abort_lost,
                      "after listing them, settle the lost rooms as ABORTED (their players are "
                      "freed; a late result from their node is then refused, OUTCOME_CONFLICT)");
  reconcile->add_option("--abort-reason", flags.abort_reason, "abort_reason of --abort-lost")
      ->capture_default_str();

  CLI::App* retain = app.add_subcommand(
      "retain",
      "one retention pass: drop events and history older than their windows, expire "
      "old receipts into compact records, and make partitions ahead");
  AddRetentionFlags(retain, flags);
#ifdef VERDICT_UNSAFE_TEST_SWITCHES
  // verdict-lobby-testing only: the tests' negative control for the compact records.
  retain
      ->add_flag("--unsafe-expire-receipts-without-records",
                 flags.unsafe_expire_receipts_without_records,
                 "delete old receipts without keeping the compact records of their rooms")
      ->group("Negative controls (test build only)");
#endif
  CLI::App* new_epoch = app.add_subcommand(
      "new-epoch",
      "give the event feed a new epoch, after restoring the database from a backup "
      "(subscribers of the old one are refused with EPOCH_CHANGED)");
  return {migrate, serve, reconcile, retain, new_epoch};
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("lobby"));
  Flags flags;
  CLI::App app;
  const Commands commands = DefineFlags(app, flags);
  CLI11_PARSE(app, argc, argv);
  cli::ApplyLogLevel(flags.log_level);
  cli::ApplyLogFormat(flags.log_format);

  // SIGHUP is blocked since before the loader ran any initialiser (cli/hangup_guard.h): `serve`
  // takes one that came early once it serves; a hang-up ends the other commands, as any command.
  if (commands.serve->parsed()) return RunServe(flags, argc, argv);
  cli::ReleaseHangup();
  if (commands.migrate->parsed()) return RunMigrate(flags);
  if (commands.reconcile->parsed()) return RunReconcile(flags);
  if (commands.retain->parsed()) return RunRetain(flags);
  if (commands.new_epoch->parsed()) return RunNewEpoch(flags);
  return 2;
}
