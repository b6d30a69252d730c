#include "node/outbox_cli.h"

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <vector>

#include "common/bearer_token.h"
#include "proto/problem.h"
#include "proto/wire.h"
#include "server/http_client.h"
#include "storage/outbox.h"
#include "storage/outbox_salvage.h"
#include "verdict/v1/verdict.pb.h"

namespace verdict::node {
namespace {

// Records read from a shard at a time: records are at most 1 MiB (OutboxOptions), so this bounds
// what a listing holds; ListSidePage bounds the side areas by their bytes.
constexpr size_t kShardPage = 16;
constexpr size_t kSidePage = 16;
// How long `redrive --via-node` waits for the node's answer: a redrive writes each record
// synced, so moving a large dead letter takes a while.
constexpr std::chrono::minutes kRedriveThroughNodeWait{10};
// At most one progress line per interval of a long salvage.
constexpr std::chrono::seconds kProgressInterval{1};
// Lost rooms printed per line of salvage's report.
constexpr size_t kRoomsPerLine = 10;

int Fail(const std::string& message) {
  std::fprintf(stderr, "verdict-node: %s\n", message.c_str());
  return 1;
}

// One record as `ls` and `show` print it.
struct Listed {
  bool decodable = false;
  uint64_t room_id = 0;  // when decodable
  std::string where;     // "shard-NNN", "quarantine", "dead-letter"
  uint64_t sequence = 0;
  std::string reason;  // "pending", or why it was set aside
  std::string detail;
  const v1::BattleResult* result = nullptr;  // when decodable
};

// Calls `visit` with every record of `outbox` (each shard's in order, then quarantine, then dead
// letter), those of `room` only when it is set, a page at a time, until `visit` returns false.
// A damaged shard is skipped and named in `damaged`.
Status ForEachRecord(storage::Outbox& outbox, std::optional<uint64_t> room,
                     const std::function<bool(const Listed&)>& visit,
                     std::vector<std::string>& damaged) {
  for (uint32_t s = 0; s < outbox.shard_count(); ++s) {
    if (room && storage::RoomShard(*room, outbox.shard_count()) != s) continue;
    char where[32];
    std::snprintf(where, sizeof(where), "shard-%03u", s);
    for (uint64_t after = 0;;) {
      auto page = outbox.ReadShard(s, after, kShardPage);
      if (page.status().code() == StatusCode::kDataLoss) {
        damaged.push_back(page.status().message());
        break;
      }
      if (!page.ok()) return page.status();
      if (page->empty()) break;
      for (const storage::OutboxRecord& r : *page) {
        after = r.sequence;
        if (room && r.result.room_id() != *room) continue;
        if (!visit({true, r.result.room_id(), where, r.sequence, "pending", "", &r.result})) {
          return Status::Ok();
        }
      }
    }
  }
  for (auto area : {storage::SideArea::kQuarantine, storage::SideArea::kDeadLetter}) {
    for (uint64_t after = 0;;) {
      auto page = outbox.ListSidePage(area, room, after, kSidePage);
      if (!page.ok()) return page.status();
      if (page->empty()) break;
      for (const storage::SideRecord& r : *page) {
        after = r.sequence;
        if (!visit({r.decodable, r.decodable ? r.result.room_id() : 0, storage::SideAreaName(area),
                    r.sequence, r.reason, r.detail, r.decodable ? &r.result : nullptr})) {
          return Status::Ok();
        }
      }
    }
  }
  return Status::Ok();
}

// Prints a listing as it is read: a table, or one JSON OutboxListing written a record at a time
// (wire::ToJson for each record and for the rest of the document, so that it reads as the
// message does).
class ListingPrinter {
 public:
  ListingPrinter(bool json, bool with_results) : json_(json), with_results_(with_results) {}

  Status Print(const Listed& l) {
    if (!json_) {
      if (!started_) {
        std::printf("%-20s %-12s %10s  %s\n", "ROOM_ID", "WHERE", "SEQUENCE", "REASON");
        started_ = true;
      }
      const std::string room = l.decodable ? std::to_string(l.room_id) : "undecodable";
      std::printf("%-20s %-12s %10llu  %s%s%s\n", room.c_str(), l.where.c_str(),
                  static_cast<unsigned long long>(l.sequence),
                  wire::EscapeForTerminal(l.reason).c_str(), l.detail.empty() ? "" : ": ",
                  wire::EscapeForTerminal(l.detail).c_str());
      return Status::Ok();
    }
    v1::OutboxListing::Record record;
    record.set_room_id(l.room_id);
    record.set_where(l.where);
    record.set_sequence(l.sequence);
    record.set_reason(wire::ValidUtf8(l.reason));
    record.set_detail(wire::ValidUtf8(l.detail));
    if (with_results_ && l.result) *record.mutable_result() = *l.result;
    auto json = wire::ToJson(record);
    if (!json.ok()) return json.status();
    std::fputs(started_ ? "," : "{\"records\":[", stdout);
    std::fputs(json->c_str(), stdout);
    started_ = true;
    return Status::Ok();
  }

  // Ends the listing: complete or not, and the damaged shards left out. `cut_at` is the limit
  // that cut it short (0 if none did).
  Status Finish(bool complete, const std::vector<std::string>& damaged, size_t cut_at) {
    if (!json_) {
      if (!started_)
        std::printf("%-20s %-12s %10s  %s\n", "ROOM_ID", "WHERE", "SEQUENCE", "REASON");
      if (cut_at) std::printf("(first %zu shown; use --limit)\n", cut_at);
      for (const std::string& d : damaged) {
        std::printf("(not listed: %s)\n", wire::EscapeForTerminal(d).c_str());
      }
      return Status::Ok();
    }
    v1::OutboxListing rest;
    rest.set_complete(complete);
    for (const std::string& d : damaged) rest.add_damaged(wire::ValidUtf8(d));
    auto json = wire::ToJson(rest);
    if (!json.ok()) return json.status();
    // {"records":[],"complete":…} without its empty records: what follows the records printed.
    constexpr std::string_view kNoRecords = "{\"records\":[]";
    if (!std::string_view(*json).starts_with(kNoRecords)) {
      return InternalError("unexpected JSON for a listing: " + *json);
    }
    std::fputs(started_ ? "]" : "{\"records\":[]", stdout);
    std::printf("%s\n", json->c_str() + kNoRecords.size());
    return Status::Ok();
  }

 private:
  const bool json_;
  const bool with_results_;
  bool started_ = false;
};

// Prints `message` as one line of JSON; the exit status.
int PrintJson(const google::protobuf::Message& message) {
  auto json = wire::ToJson(message);
  if (!json.ok()) return Fail(json.status().ToString());
  std::printf("%s\n", json->c_str());
  return 0;
}

v1::OutboxStats StatsDocument(const storage::OutboxStats& stats) {
  v1::OutboxStats doc;
  for (const storage::ShardStats& s : stats.shards) {
    v1::OutboxStats::Shard* shard = doc.add_shards();
    shard->set_shard(s.shard);
    shard->set_records(static_cast<double>(s.records));
    shard->set_bytes(static_cast<double>(s.bytes));
    shard->set_oldest_age_ms(static_cast<double>(s.oldest_age_ms));
    shard->set_damage(wire::ValidUtf8(s.damage));
  }
  doc.set_records(static_cast<double>(stats.records));
  doc.set_bytes(static_cast<double>(stats.bytes));
  doc.set_quarantined(static_cast<double>(stats.quarantined));
  doc.set_dead_lettered(static_cast<double>(stats.dead_lettered));
  doc.set_free_disk_bytes(static_cast<double>(stats.free_disk_bytes));
  doc.set_damaged_shards(static_cast<double>(stats.damaged_shards));
  return doc;
}

Result<std::unique_ptr<storage::Outbox>> OpenForReading(const std::string& dir) {
  return storage::OpenOutbox(dir, {.read_only = true});
}

}  // namespace

OutboxCommands::OutboxCommands(CLI::App& app) {
  CLI::App* outbox = app.add_subcommand("outbox", "inspect or repair an outbox");
  outbox->require_subcommand(1);
  // Required by every command but `redrive --via-node` (Run checks it).
  outbox->add_option("--outbox", flags_.outbox, "outbox directory");
  stats_ = outbox->add_subcommand("stats", "records, bytes and ages per shard");
  stats_->add_flag("--json", flags_.json, "print JSON");
  ls_ = outbox->add_subcommand("ls", "pending, quarantined and dead-lettered records");
  ls_->add_flag("--json", flags_.json, "print JSON");
  ls_->add_option("--limit", flags_.limit, "most records to list")->capture_default_str();
  show_ = outbox->add_subcommand("show", "every record of one room, as JSON");
  show_->add_option("room_id", flags_.room_id, "the room")->required();
  redrive_ = outbox->add_subcommand(
      "redrive", "move records of one room (or --all) back from quarantine or dead letter");
  redrive_->add_option("--from", flags_.from, "quarantine or dead-letter")->required();
  redrive_room_ = redrive_->add_option("room_id", flags_.room_id, "the room whose records move");
  redrive_->add_flag("--all", flags_.all, "move every record that can be delivered")
      ->excludes(redrive_room_);
  redrive_->add_option("--via-node", flags_.via_node,
                       "redrive through the node running on the outbox, at its ingest listener "
                       "unix:PATH or HOST:PORT (instead of --outbox)");
  auto* token = redrive_->add_option("--ingest-token", flags_.ingest_token,
                                     "the node's ingest token (for a HOST:PORT --via-node)");
  redrive_
      ->add_option("--ingest-token-file", flags_.ingest_token_file,
                   "read the ingest token from FILE")
      ->excludes(token);
  salvage_ = outbox->add_subcommand(
      "salvage",
      "copy every record that can still be read from a damaged outbox (--outbox) into a new one "
      "(--to), and say what could not be read; exit 0 if nothing was lost, 3 if some was");
  salvage_->add_option("--to", flags_.to, "the new outbox: an absent or empty directory")
      ->required();
  salvage_->add_option("--shards", flags_.shards, "shards of the new outbox (default: as before)")
      ->check(CLI::Range(1, 1000));
}

std::optional<int> OutboxCommands::Run() const {
  const bool via_node = redrive_->parsed() && !flags_.via_node.empty();
  if (via_node && !flags_.outbox.empty()) {
    return Fail("redrive takes --outbox (a stopped node) or --via-node (a running one), not both");
  }
  if (!via_node && flags_.outbox.empty() &&
      (stats_->parsed() || ls_->parsed() || show_->parsed() || redrive_->parsed() ||
       salvage_->parsed())) {
    return Fail(redrive_->parsed() ? "redrive needs --outbox DIR (a stopped node) or --via-node "
                                     "unix:PATH|HOST:PORT (a running one)"
                                   : "outbox needs --outbox DIR");
  }
  if (stats_->parsed()) return Stats();
  if (ls_->parsed()) return List();
  if (show_->parsed()) return Show();
  if (redrive_->parsed()) return Redrive();
  if (salvage_->parsed()) return Salvage();
  return std::nullopt;
}

int OutboxCommands::Stats() const {
  auto outbox = OpenForReading(flags_.outbox);
  if (!outbox.ok()) return Fail(outbox.status().ToString());
  auto stats = (*outbox)->Stats();
  if (!stats.ok()) return Fail(stats.status().ToString());
  if (flags_.json) return PrintJson(StatsDocument(*stats));
  std::printf("%-6s %10s %12s %14s\n", "SHARD", "RECORDS", "BYTES", "OLDEST_AGE_S");
  for (const auto& s : stats->shards) {
    std::printf("%-6u %10llu %12llu %14.1f%s\n", s.shard,
                static_cast<unsigned long long>(s.records),
                static_cast<unsigned long long>(s.bytes), s.oldest_age_ms / 1000.0,
                s.damage.empty() ? "" : "  DAMAGED");
  }
  std::printf("pending %llu (%llu bytes), quarantine %llu, dead letter %llu, free disk %.1f GiB\n",
              static_cast<unsigned long long>(stats->records),
              static_cast<unsigned long long>(stats->bytes),
              static_cast<unsigned long long>(stats->quarantined),
              static_cast<unsigned long long>(stats->dead_lettered),
              stats->free_disk_bytes / double(1 << 30));
  for (const auto& s : stats->shards) {
    if (!s.damage.empty()) std::printf("DAMAGED: %s\n", wire::EscapeForTerminal(s.damage).c_str());
  }
  return 0;
}

int OutboxCommands::List() const {
  auto outbox = OpenForReading(flags_.outbox);
  if (!outbox.ok()) return Fail(outbox.status().ToString());
  ListingPrinter printer(flags_.json, /*with_results=*/false);
  size_t listed = 0;
  bool cut = false;
  Status printed;
  std::vector<std::string> damaged;
  Status read = ForEachRecord(
      **outbox, std::nullopt,
      [&](const Listed& l) {
        // One record past the limit tells a cut listing from one of exactly --limit records.
        if (listed == flags_.limit) {
          cut = true;
          return false;
        }
        ++listed;
        printed = printer.Print(l);
        return printed.ok();
      },
      damaged);
  if (!read.ok()) return Fail(read.ToString());
  if (!printed.ok()) return Fail(printed.ToString());
  // Complete unless --limit cut it short or a damaged shard is missing from it (reconciliation
  // refuses an incomplete listing).
  Status finished = printer.Finish(!cut && damaged.empty(), damaged, cut ? flags_.limit : 0);
  return finished.ok() ? 0 : Fail(finished.ToString());
}

int OutboxCommands::Show() const {
  auto outbox = OpenForReading(flags_.outbox);
  if (!outbox.ok()) return Fail(outbox.status().ToString());
  ListingPrinter printer(/*json=*/true, /*with_results=*/true);
  size_t found = 0;
  Status printed;
  std::vector<std::string> damaged;
  Status read = ForEachRecord(
      **outbox, flags_.room_id,
      [&](const Listed& l) {
        ++found;
        printed = printer.Print(l);
        return printed.ok();
      },
      damaged);
  if (!read.ok()) return Fail(read.ToString());
  if (!printed.ok()) return Fail(printed.ToString());
  if (found == 0 && damaged.empty()) {
    return Fail("no record of room " + std::to_string(flags_.room_id));
  }
  Status finished = printer.Finish(damaged.empty(), damaged, 0);
  return finished.ok() ? 0 : Fail(finished.ToString());
}

int OutboxCommands::Redrive() const {
  storage::SideArea from;
  if (flags_.from == "quarantine") {
    from = storage::SideArea::kQuarantine;
  } else if (flags_.from == "dead-letter") {
    from = storage::SideArea::kDeadLetter;
  } else {
    return Fail("--from must be quarantine or dead-letter");
  }
  if (!flags_.all && redrive_room_->count() == 0) {
    return Fail("redrive needs the room whose records move, or --all to move every one");
  }
  if (!flags_.all && flags_.room_id == 0) {
    return Fail("0 is no room (undecodable records cannot be redriven); give a room, or --all");
  }
  if (!flags_.via_node.empty()) return RedriveThroughNode();
  // Read-only first, so that a mistyped directory is an error rather than a new outbox.
  if (auto found = OpenForReading(flags_.outbox); !found.ok()) {
    return Fail(found.status().ToString());
  }
  auto outbox = storage::OpenOutbox(flags_.outbox, {.adopt_existing_shard_count = true});
  if (!outbox.ok() && outbox.status().code() == StatusCode::kUnavailable) {
    return Fail(outbox.status().ToString() +
                "; to redrive through the running node, use redrive --via-node unix:PATH or "
                "HOST:PORT (its --ingest-listen)");
  }
  if (!outbox.ok()) return Fail(outbox.status().ToString());
  auto report = (*outbox)->Redrive(from, flags_.all ? std::nullopt : std::optional(flags_.room_id));
  if (!report.ok()) return Fail(report.status().ToString());
  std::printf("%llu moved back to their shards, %llu left (undecodable or oversize)\n",
              static_cast<unsigned long long>(report->moved),
              static_cast<unsigned long long>(report->skipped));
  return 0;
}

int OutboxCommands::RedriveThroughNode() const {
  auto to = server::ListenAddress::Parse(flags_.via_node);
  if (!to.ok()) return Fail(to.status().message());
  auto token = BearerTokenFrom(flags_.ingest_token, flags_.ingest_token_file, "--ingest-token",
                               "--ingest-token-file");
  if (!token.ok()) return Fail(token.status().message());
  if (to->kind == server::ListenAddress::Kind::kTcp && token->empty()) {
    return Fail("--via-node " + flags_.via_node +
                " needs the node's --ingest-token or --ingest-token-file");
  }
  std::string target = "/v1/outbox:redrive?from=" + flags_.from;
  target += flags_.all ? "&all=true" : "&room_id=" + std::to_string(flags_.room_id);
  server::BlockingHttpClient client(*to, kRedriveThroughNodeWait);
  auto reply = client.Call(
      {"POST", target, "", "application/json", token->empty() ? "" : "Bearer " + *token, ""});
  if (!reply.ok()) {
    return Fail(reply.status().message() +
                " (a redrive the node began goes on; `outbox stats` shows what is left)");
  }
  unsigned long long moved = 0, skipped = 0;
  if (reply->status != 200 || std::sscanf(reply->body.c_str(), "{\"moved\":%llu,\"skipped\":%llu}",
                                          &moved, &skipped) != 2) {
    auto problem = wire::ParseProblem(reply->body, reply->content_type);
    return Fail("the node refused the redrive: " + std::to_string(reply->status) + " " +
                (problem ? problem->code() + ": " + problem->detail()
                         : wire::EscapeForTerminal(reply->body)));
  }
  std::printf("%llu moved back to their shards, %llu left (undecodable or oversize)\n", moved,
              skipped);
  return 0;
}

int OutboxCommands::Salvage() const {
  std::printf("salvage: copying what can be read of %s into %s\n", flags_.outbox.c_str(),
              flags_.to.c_str());
  std::fflush(stdout);
  storage::SalvageOptions options;
  options.shard_count = flags_.shards;
  auto last = std::chrono::steady_clock::now() - kProgressInterval;
  options.progress = [&last](const storage::SalvageProgress& p) {
    if (std::chrono::steady_clock::now() - last < kProgressInterval) return;
    last = std::chrono::steady_clock::now();
    std::printf("salvage: reading %s, %llu records copied\n", p.area.c_str(),
                static_cast<unsigned long long>(p.copied));
    std::fflush(stdout);
  };
  auto report = storage::SalvageOutbox(flags_.outbox, flags_.to, options);
  if (!report.ok()) return Fail(report.status().ToString());
  std::printf(
      "salvage: copied into %s (%u shards): %llu pending, %llu quarantined (%llu of them "
      "undecodable), %llu dead-lettered\n",
      flags_.to.c_str(), report->shard_count, static_cast<unsigned long long>(report->pending),
      static_cast<unsigned long long>(report->quarantined),
      static_cast<unsigned long long>(report->undecodable),
      static_cast<unsigned long long>(report->dead_lettered));
  for (const std::string& d : report->damage) {
    std::printf("damaged: %s\n", wire::EscapeForTerminal(d).c_str());
  }
  if (report->lost == 0 && !report->more_may_be_lost) {
    std::printf("nothing stored was lost; run the node on %s\n", flags_.to.c_str());
    return 0;
  }
  std::printf("could not be read: %llu stored result(s)%s\n",
              static_cast<unsigned long long>(report->lost),
              report->more_may_be_lost ? ", and maybe more that nothing left names" : "");
  for (size_t i = 0; i < report->lost_rooms.size(); i += kRoomsPerLine) {
    std::string line = "lost rooms:";
    for (size_t j = i; j < report->lost_rooms.size() && j < i + kRoomsPerLine; ++j) {
      line += " " + std::to_string(report->lost_rooms[j]);
    }
    std::printf("%s\n", line.c_str());
  }
  std::printf(
      "run the node on %s; `verdict-lobby reconcile` shows the lost rooms, to settle as aborted\n",
      flags_.to.c_str());
  return kExitRecordsLost;
}

}  // namespace verdict::node
