// verdict-node: the battle node as a program. `run` delivers an outbox to the lobby (and, with
// --simulate-*, plays simulated battles into it); `enqueue` stores results given as JSON;
// `outbox` inspects and repairs an outbox. Flags are parsed here only.
#include <signal.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>

#include <google/protobuf/message.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "cli/config_file.h"
#include "node/battle_node.h"
#include "node/simulator.h"
#include "proto/wire.h"
#include "storage/outbox.h"

namespace {

using namespace verdict;
using namespace verdict::node;

struct Flags {
  std::string log_level = "info";
  std::string node_id, outbox, lobby, token, token_file, metrics_listen, admin_token;
  uint32_t shards = 16;
  size_t batch = delivery::DelivererOptions{}.batch;
  uint64_t simulate_rooms = 0;
  uint64_t simulate_first_room = 0;
  uint64_t simulate_first_player = 1;
  double simulate_rate = 50;
  int simulate_battle_ms = 2000;
  bool exit_when_drained = false;
  std::string stored_log;
  std::string tls_ca;
  // Set by verdict-node-testing only.
  bool unsafe_ack_before_send = false;
  bool unsafe_drop_failed_batches = false;
  bool unsafe_ack_whole_batch = false;
  bool outbox_no_preallocate = false;
  int progress_ms = 2000;
  std::string input = "-";
  bool json = false;
  size_t limit = 1000;
  uint64_t room_id = 0;
  std::string from;
};

int Fail(const std::string& message) {
  std::fprintf(stderr, "verdict-node: %s\n", message.c_str());
  return 1;
}

std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::string Seconds(double s) {
  if (std::isinf(s)) return "never";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1fs", s);
  return buf;
}

// A bearer token must be one header-safe word: visible ASCII, no spaces.
Status CheckToken(const std::string& token, const std::string& where) {
  if (token.empty()) return InvalidArgumentError(where + " is empty");
  for (unsigned char c : token) {
    if (c < 0x21 || c > 0x7e) {
      return InvalidArgumentError(where + " holds a character that cannot go in a header");
    }
  }
  return Status::Ok();
}

// The bearer token from --lobby-token-file (its content, surrounding white space trimmed) or
// from --token.
Result<std::string> ReadToken(const Flags& flags) {
  if (flags.token_file.empty()) {
    if (flags.token.empty()) {
      return InvalidArgumentError("--token or --lobby-token-file is required");
    }
    VERDICT_RETURN_IF_ERROR(CheckToken(flags.token, "--token"));
    return flags.token;
  }
  std::ifstream file(flags.token_file);
  if (!file) return NotFoundError("cannot read the token file " + flags.token_file);
  std::stringstream content;
  content << file.rdbuf();
  std::string token = content.str();
  const size_t begin = token.find_first_not_of(" \t\r\n");
  const size_t end = token.find_last_not_of(" \t\r\n");
  token = begin == std::string::npos ? "" : token.substr(begin, end - begin + 1);
  VERDICT_RETURN_IF_ERROR(CheckToken(token, "the token file " + flags.token_file));
  return token;
}

// SIGHUP: the token is read again from where it came from; a broken source keeps the old one.
void ReloadToken(BattleNode& node, const std::function<Result<std::string>()>& reread) {
  auto token = reread();
  if (!token.ok()) {
    spdlog::error("SIGHUP: lobby token not reloaded, the node keeps the one it has: {}",
                  token.status().ToString());
    return;
  }
  node.SetLobbyToken(*token);
  spdlog::info("SIGHUP: lobby token reloaded");
}

// The node's options from the flags, with the token read from where the flags say.
Result<NodeOptions> OptionsFrom(const Flags& flags) {
  auto token = ReadToken(flags);
  if (!token.ok()) return token.status();
  NodeOptions options;
  options.node_id = flags.node_id;
  options.outbox_dir = flags.outbox;
  options.shards = flags.shards;
  options.lobby_urls = SplitComma(flags.lobby);
  options.token = *token;
  options.metrics_listen = flags.metrics_listen;
  options.delivery.tls_ca_file = flags.tls_ca;
  options.delivery.batch = flags.batch;
  options.delivery.unsafe_ack_before_send_for_test = flags.unsafe_ack_before_send;
  options.delivery.unsafe_ack_whole_batch_for_test = flags.unsafe_ack_whole_batch;
  options.writer.unsafe_drop_failed_batches_for_test = flags.unsafe_drop_failed_batches;
  options.preallocate_outbox_files = !flags.outbox_no_preallocate;
  if (flags.unsafe_ack_before_send || flags.unsafe_drop_failed_batches ||
      flags.unsafe_ack_whole_batch) {
    spdlog::error("UNSAFE test switches are on: this node can lose results");
  }
  return options;
}

using StoredLog = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

// --stored-log: opens the file and has the node append one line per result to it, written once
// it is durable: what a crash test may hold the node to. Null when there is none.
Result<StoredLog> OpenStoredLog(const std::string& path, NodeOptions& options) {
  StoredLog log(nullptr, &std::fclose);
  if (path.empty()) return log;
  log.reset(std::fopen(path.c_str(), "a"));
  if (!log) return NotFoundError("cannot append to " + path);
  options.on_stored = [file = log.get()](const std::vector<v1::BattleResult>& batch) {
    for (const auto& r : batch) std::fprintf(file, "%llu\n", (unsigned long long)r.room_id());
    std::fflush(file);
  };
  return log;
}

// Blocks the signals the node waits for (SIGTERM, SIGINT, SIGHUP) in this thread and every
// thread started after it, and returns them for sigtimedwait.
sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

void PrintInitialBacklog(BattleNode& node, const std::string& node_id) {
  if (node.metrics_port()) std::printf("metrics on port %u\n", node.metrics_port());
  if (auto initial = node.outbox().Stats(); initial.ok()) {
    std::printf("node %s: %llu result(s) waiting in the outbox at start\n", node_id.c_str(),
                static_cast<unsigned long long>(initial->records));
    std::fflush(stdout);
  } else {
    // The node runs without the count: writing and delivering do not need it.
    spdlog::warn("node {}: cannot count the outbox's backlog at start: {}", node_id,
                 initial.status().ToString());
  }
}

// The --simulate-* battle host, started; null without --simulate-rooms.
std::unique_ptr<Simulator> StartSimulator(const Flags& flags, const NodeOptions& options,
                                          BattleNode& node) {
  if (flags.simulate_rooms == 0) return nullptr;
  SimulatorOptions sim;
  sim.rooms = flags.simulate_rooms;
  sim.rooms_per_s = flags.simulate_rate;
  sim.battle = std::chrono::milliseconds(flags.simulate_battle_ms);
  sim.lobby_urls = options.lobby_urls;
  sim.admin_token = flags.admin_token;
  sim.first_room_id = flags.simulate_first_room;
  sim.first_player_id = flags.simulate_first_player;
  auto simulator = std::make_unique<Simulator>(sim, node);
  simulator->Start();
  return simulator;
}

// One progress line: the simulator's rooms, what was stored and delivered, the backlog as it
// is now and the drain ETA at the current rates.
void PrintProgress(BattleNode& node, const Simulator* simulator, uint64_t simulate_rooms) {
  auto stats = node.outbox().Stats();
  const NodeRates rates = node.rates();
  std::string sim;
  if (simulator) {
    sim = "rooms " + std::to_string(simulator->counts().finished) + "/" +
          std::to_string(simulate_rooms) + " finished, ";
  }
  const double backlog = stats.ok() ? static_cast<double>(stats->records) : 0;
  const double eta = BacklogDrainEtaS(backlog, rates.ingest_per_s, rates.delivery_per_s);
  std::printf(
      "%sstored %llu, delivered %llu, backlog %.0f, dead letter %llu, "
      "in %.0f/s, out %.0f/s, drain ETA %s\n",
      sim.c_str(), static_cast<unsigned long long>(node.stored()),
      static_cast<unsigned long long>(node.resolved()), backlog,
      static_cast<unsigned long long>(stats.ok() ? stats->dead_lettered : 0), rates.ingest_per_s,
      rates.delivery_per_s, Seconds(eta).c_str());
  std::fflush(stdout);
}

// Runs until SIGTERM or SIGINT, or with --exit-when-drained until the simulator is done and the
// node drained; reloads the token on SIGHUP and prints progress every --progress-ms.
void ServeUntilStopped(const Flags& flags, BattleNode& node, const Simulator* simulator,
                       const sigset_t& signals,
                       const std::function<Result<std::string>()>& reread_token) {
  const timespec tick{0, 200'000'000};
  auto last_progress = std::chrono::steady_clock::now();
  for (;;) {
    const int signal = sigtimedwait(&signals, nullptr, &tick);
    if (signal == SIGTERM || signal == SIGINT) {
      spdlog::info("{}: shutting down; queued results are stored first",
                   signal == SIGTERM ? "SIGTERM" : "SIGINT");
      return;
    }
    if (signal == SIGHUP) ReloadToken(node, reread_token);
    if (std::chrono::steady_clock::now() - last_progress >=
        std::chrono::milliseconds(flags.progress_ms)) {
      PrintProgress(node, simulator, flags.simulate_rooms);
      last_progress = std::chrono::steady_clock::now();
    }
    if (flags.exit_when_drained && (!simulator || simulator->done()) && node.Drained()) {
      std::printf("drained\n");
      return;
    }
  }
}

void PrintSimulatorSummary(const Simulator& simulator) {
  const SimulatorCounts c = simulator.counts();
  std::printf(
      "simulated rooms: %llu finished (%llu aborted, %llu suspect), "
      "%llu allocation retries\n",
      static_cast<unsigned long long>(c.finished), static_cast<unsigned long long>(c.aborted),
      static_cast<unsigned long long>(c.suspect),
      static_cast<unsigned long long>(c.allocation_failures));
}

int RunNode(const Flags& flags, const std::function<Result<std::string>()>& reread_token) {
  auto options = OptionsFrom(flags);
  if (!options.ok()) return Fail(options.status().message());
  auto stored_log = OpenStoredLog(flags.stored_log, *options);
  if (!stored_log.ok()) return Fail(stored_log.status().message());
  if (flags.simulate_rooms > 0 && flags.admin_token.empty()) {
    return Fail("--simulate-rooms needs --admin-token to allocate rooms at the lobby");
  }
  const sigset_t signals = BlockStopSignals();  // before any thread starts

  auto started = BattleNode::Start(*options);
  if (!started.ok()) return Fail(started.status().ToString());
  BattleNode& node = **started;
  PrintInitialBacklog(node, flags.node_id);
  std::unique_ptr<Simulator> simulator = StartSimulator(flags, *options, node);
  ServeUntilStopped(flags, node, simulator.get(), signals, reread_token);
  // The simulator's thread may be blocked handing a result to a full channel (a failing
  // outbox): only Shutdown, at its deadline, releases it, so it is joined after.
  if (simulator) simulator->RequestStop();
  const size_t lost = node.Shutdown();
  if (simulator) simulator->Stop();
  PrintProgress(node, simulator.get(), flags.simulate_rooms);
  if (simulator) PrintSimulatorSummary(*simulator);
  if (lost > 0) {
    return Fail(std::to_string(lost) + " result(s) could not be stored before shutdown");
  }
  return 0;
}

// Reads BattleResults as JSON: one object, or one object per line. Nothing is returned (and
// the error names the line) if any of it is malformed.
Result<std::vector<v1::BattleResult>> ReadResults(std::istream& in) {
  std::stringstream whole;
  whole << in.rdbuf();
  const std::string text = whole.str();
  std::vector<v1::BattleResult> results;
  v1::BattleResult single;
  std::string error;
  if (wire::DecodeBody(text, wire::BodyFormat::kJson, &single, &error)) {
    results.push_back(single);
    return results;
  }
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    v1::BattleResult r;
    if (!wire::DecodeBody(line, wire::BodyFormat::kJson, &r, &error)) {
      return InvalidArgumentError("line " + std::to_string(number) + ": " + error);
    }
    results.push_back(std::move(r));
  }
  if (results.empty()) return InvalidArgumentError("no results in the input");
  return results;
}

int RunEnqueue(const Flags& flags) {
  std::ifstream file;
  if (flags.input != "-") {
    file.open(flags.input);
    if (!file) return Fail("cannot read " + flags.input);
  }
  auto results = ReadResults(flags.input == "-" ? std::cin : file);
  if (!results.ok()) return Fail(results.status().message() + " (nothing was enqueued)");
  auto outbox = storage::OpenOutbox(flags.outbox, {.shard_count = flags.shards});
  if (!outbox.ok()) return Fail(outbox.status().ToString());
  size_t fresh = 0, present = 0, refused = 0;
  constexpr size_t kBatch = 1000;
  for (size_t i = 0; i < results->size(); i += kBatch) {
    const size_t n = std::min(kBatch, results->size() - i);
    auto out = (*outbox)->Enqueue(std::span(results->data() + i, n));
    if (!out.ok()) {
      return Fail(out.status().ToString() + " (" + std::to_string(fresh) + " stored before)");
    }
    for (size_t j = 0; j < n; ++j) {
      const storage::EnqueueResult& r = (*out)[j];
      if (!r.status.ok()) {
        ++refused;
        std::fprintf(stderr, "room %llu: %s\n",
                     static_cast<unsigned long long>((*results)[i + j].room_id()),
                     r.status.ToString().c_str());
      } else if (r.already_present) {
        ++present;
      } else {
        ++fresh;
      }
    }
  }
  std::printf("%zu new, %zu already present", fresh, present);
  if (refused) std::printf(", %zu refused", refused);
  std::printf("\n");
  return refused ? 1 : 0;
}

Result<std::unique_ptr<storage::Outbox>> OpenForReading(const Flags& flags) {
  return storage::OpenOutbox(flags.outbox, {.read_only = true});
}

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
  }
  doc.set_records(static_cast<double>(stats.records));
  doc.set_bytes(static_cast<double>(stats.bytes));
  doc.set_quarantined(static_cast<double>(stats.quarantined));
  doc.set_dead_lettered(static_cast<double>(stats.dead_lettered));
  doc.set_free_disk_bytes(static_cast<double>(stats.free_disk_bytes));
  return doc;
}

int RunStats(const Flags& flags) {
  auto outbox = OpenForReading(flags);
  if (!outbox.ok()) return Fail(outbox.status().ToString());
  auto stats = (*outbox)->Stats();
  if (!stats.ok()) return Fail(stats.status().ToString());
  if (flags.json) return PrintJson(StatsDocument(*stats));
  std::printf("%-6s %10s %12s %14s\n", "SHARD", "RECORDS", "BYTES", "OLDEST_AGE_S");
  for (const auto& s : stats->shards) {
    std::printf("%-6u %10llu %12llu %14.1f\n", s.shard, static_cast<unsigned long long>(s.records),
                static_cast<unsigned long long>(s.bytes), s.oldest_age_ms / 1000.0);
  }
  std::printf("pending %llu (%llu bytes), quarantine %llu, dead letter %llu, free disk %.1f GiB\n",
              static_cast<unsigned long long>(stats->records),
              static_cast<unsigned long long>(stats->bytes),
              static_cast<unsigned long long>(stats->quarantined),
              static_cast<unsigned long long>(stats->dead_lettered),
              stats->free_disk_bytes / double(1 << 30));
  return 0;
}

struct Listed {
  uint64_t room_id;
  std::string where, reason, detail;
  uint64_t sequence;
  v1::BattleResult result;
  bool decodable;
};

// Every record of the outbox (pending, quarantined, dead-lettered), at most `limit`, optionally
// only those of one room.
Result<std::vector<Listed>> ListAll(storage::Outbox& outbox, size_t limit,
                                    std::optional<uint64_t> room) {
  std::vector<Listed> out;
  for (uint32_t s = 0; s < outbox.shard_count() && out.size() < limit; ++s) {
    if (room && storage::RoomShard(*room, outbox.shard_count()) != s) continue;
    auto records = outbox.ReadShard(s, 0, room ? SIZE_MAX : limit - out.size());
    if (!records.ok()) return records.status();
    char where[32];
    std::snprintf(where, sizeof(where), "shard-%03u", s);
    for (auto& r : *records) {
      if (room && r.result.room_id() != *room) continue;
      if (out.size() >= limit) break;
      out.push_back({r.result.room_id(), where, "pending", "", r.sequence, r.result, true});
    }
  }
  for (auto area : {storage::SideArea::kQuarantine, storage::SideArea::kDeadLetter}) {
    auto side = outbox.ListSide(area, room);
    if (!side.ok()) return side.status();
    for (auto& r : *side) {
      if (out.size() >= limit) break;
      out.push_back({r.decodable ? r.result.room_id() : 0, storage::SideAreaName(area), r.reason,
                     r.detail, r.sequence, r.result, r.decodable});
    }
  }
  return out;
}

int RunList(const Flags& flags, std::optional<uint64_t> room) {
  auto outbox = OpenForReading(flags);
  if (!outbox.ok()) return Fail(outbox.status().ToString());
  auto listed = ListAll(**outbox, room ? SIZE_MAX : flags.limit, room);
  if (!listed.ok()) return Fail(listed.status().ToString());
  if (room && listed->empty()) return Fail("no record of room " + std::to_string(*room));
  if (flags.json || room) {
    v1::OutboxListing doc;
    for (const Listed& l : *listed) {
      v1::OutboxListing::Record* record = doc.add_records();
      record->set_room_id(l.room_id);
      record->set_where(l.where);
      record->set_sequence(l.sequence);
      record->set_reason(wire::ValidUtf8(l.reason));
      record->set_detail(wire::ValidUtf8(l.detail));
      if (room && l.decodable) *record->mutable_result() = l.result;
    }
    // Complete unless --limit cut it short (reconciliation refuses a partial listing).
    doc.set_complete(room || listed->size() < flags.limit);
    return PrintJson(doc);
  }
  std::printf("%-20s %-12s %10s  %s\n", "ROOM_ID", "WHERE", "SEQUENCE", "REASON");
  for (const Listed& l : *listed) {
    std::printf("%-20llu %-12s %10llu  %s%s%s\n", static_cast<unsigned long long>(l.room_id),
                l.where.c_str(), static_cast<unsigned long long>(l.sequence), l.reason.c_str(),
                l.detail.empty() ? "" : ": ", l.detail.c_str());
  }
  if (listed->size() >= flags.limit) std::printf("(first %zu shown; use --limit)\n", flags.limit);
  return 0;
}

int RunRedrive(const Flags& flags, std::optional<uint64_t> room) {
  storage::SideArea from;
  if (flags.from == "quarantine") {
    from = storage::SideArea::kQuarantine;
  } else if (flags.from == "dead-letter") {
    from = storage::SideArea::kDeadLetter;
  } else {
    return Fail("--from must be quarantine or dead-letter");
  }
  auto outbox = storage::OpenOutbox(flags.outbox, {.read_only = true});
  if (!outbox.ok()) return Fail(outbox.status().ToString());
  const uint32_t shards = (*outbox)->shard_count();
  outbox.value().reset();
  auto writable = storage::OpenOutbox(flags.outbox, {.shard_count = shards});
  if (!writable.ok()) return Fail(writable.status().ToString());
  auto report = (*writable)->Redrive(from, room);
  if (!report.ok()) return Fail(report.status().ToString());
  std::printf("%llu moved back to their shards, %llu left (undecodable or oversize)\n",
              static_cast<unsigned long long>(report->moved),
              static_cast<unsigned long long>(report->skipped));
  return 0;
}

}  // namespace

struct Commands {
  CLI::App *run, *enqueue, *stats, *ls, *show, *redrive;
};

constexpr char kDescription[] =
    "verdict-node: keeps battle results durable on this host and delivers them to "
    "the lobby exactly as often as needed.";

// `enqueue`, and `outbox` with its subcommands: the operator's commands on an outbox.
void DeclareOutboxCommands(CLI::App& app, Flags& flags, Commands& c) {
  c.enqueue =
      app.add_subcommand("enqueue", "store BattleResults given as JSON (one, or one per line)");
  c.enqueue->add_option("--outbox", flags.outbox, "outbox directory")->required();
  c.enqueue->add_option("--shards", flags.shards, "shards if the outbox is new")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  c.enqueue->add_option("input", flags.input, "file to read, or - for standard input")
      ->capture_default_str();

  CLI::App* outbox = app.add_subcommand("outbox", "inspect or repair an outbox");
  outbox->require_subcommand(1);
  outbox->add_option("--outbox", flags.outbox, "outbox directory")->required();
  c.stats = outbox->add_subcommand("stats", "records, bytes and ages per shard");
  c.stats->add_flag("--json", flags.json, "print JSON");
  c.ls = outbox->add_subcommand("ls", "pending, quarantined and dead-lettered records");
  c.ls->add_flag("--json", flags.json, "print JSON");
  c.ls->add_option("--limit", flags.limit, "most records to list")->capture_default_str();
  c.show = outbox->add_subcommand("show", "every record of one room, as JSON");
  c.show->add_option("room_id", flags.room_id, "the room")->required();
  c.redrive = outbox->add_subcommand("redrive", "move records back from quarantine or dead letter");
  c.redrive->add_option("--from", flags.from, "quarantine or dead-letter")->required();
  c.redrive->add_option("room_id", flags.room_id, "only this room");
}

// Declares every flag of verdict-node on `app`, bound to `flags`. Used to parse the command line
// and again to re-read it (with its --config file) when SIGHUP reloads the token.
Commands DeclareFlags(CLI::App& app, Flags& flags) {
  Commands c{};
  app.require_subcommand(1);
  app.fallthrough();  // program flags may follow the subcommand
  cli::AddConfigOption(app);
  app.add_option("--log-level", flags.log_level, "trace, debug, info, warn or error")
      ->capture_default_str();

  c.run = app.add_subcommand("run", "deliver the outbox to the lobby (and simulate)");
  c.run->add_option("--node-id", flags.node_id, "this node's id at the lobby")->required();
  c.run->add_option("--outbox", flags.outbox, "outbox directory (created if missing)")->required();
  c.run->add_option("--lobby", flags.lobby, "lobby URL(s), comma-separated, in failover order")
      ->required();
  auto* token = c.run->add_option("--token", flags.token, "this node's bearer token");
  c.run
      ->add_option("--lobby-token-file", flags.token_file,
                   "read the bearer token from FILE instead (SIGHUP reads it again)")
      ->excludes(token);
  c.run->add_option("--tls-ca", flags.tls_ca,
                    "PEM certificate authorities to trust for https:// lobbies (default: the "
                    "system's)");
  c.run->add_option("--shards", flags.shards, "outbox shards (fixed at creation)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  c.run
      ->add_option("--batch", flags.batch,
                   "results per delivery request (POST /v1/settlements:batch); 1 sends each "
                   "alone to POST /v1/settlements")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  c.run->add_option("--metrics-listen", flags.metrics_listen, "HOST:PORT for /metrics, /healthz");
  c.run->add_option("--simulate-rooms", flags.simulate_rooms, "simulated battles to play");
  c.run->add_option("--simulate-rate", flags.simulate_rate, "simulated battles started per second")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 100000.0));
  c.run->add_option("--simulate-battle-ms", flags.simulate_battle_ms, "length of a battle")
      ->capture_default_str()
      ->check(CLI::Range(0, 3'600'000));
  c.run->add_option("--admin-token", flags.admin_token, "lobby admin token (room allocation)");
  c.run->add_option("--simulate-first-room", flags.simulate_first_room,
                    "first simulated room id (default: from the clock)");
  c.run
      ->add_option("--simulate-first-player", flags.simulate_first_player,
                   "first simulated player id")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 62));
#ifdef VERDICT_UNSAFE_TEST_SWITCHES
  // verdict-node-testing only (node/CMakeLists.txt): negative controls for the fault suite,
  // each turning a protection off.
  const char* negative_controls = "Negative controls (test build only)";
  c.run
      ->add_flag("--unsafe-ack-before-send", flags.unsafe_ack_before_send,
                 "ack each record before sending it")
      ->group(negative_controls);
  c.run
      ->add_flag("--unsafe-drop-failed-batches", flags.unsafe_drop_failed_batches,
                 "report a batch the outbox could not write as stored")
      ->group(negative_controls);
  c.run
      ->add_flag("--unsafe-ack-whole-batch", flags.unsafe_ack_whole_batch,
                 "take a batch's 200 as the ack of every record in it, unread")
      ->group(negative_controls);
#endif
  // For the fault suite: a full disk then fails the next write, not the next flush.
  c.run->add_flag("--outbox-no-preallocate", flags.outbox_no_preallocate)->group("");
  c.run->add_option("--stored-log", flags.stored_log,
                    "append the room id of every result to FILE once it is durable");
  c.run->add_flag("--exit-when-drained", flags.exit_when_drained,
                  "exit 0 once the simulator is done and the outbox is empty");
  c.run->add_option("--progress-ms", flags.progress_ms, "interval of progress lines")
      ->capture_default_str()
      ->check(CLI::Range(100, 3'600'000));

  DeclareOutboxCommands(app, flags, c);
  return c;
}

// The token as configured now: the command line and its --config file parsed afresh (a flag on
// the command line still wins), then the token file if one is named.
Result<std::string> RereadToken(int argc, char** argv) {
  CLI::App app{kDescription};
  Flags fresh;
  DeclareFlags(app, fresh);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return InvalidArgumentError(std::string("cannot read the flags again: ") + e.what());
  }
  return ReadToken(fresh);
}

int main(int argc, char** argv) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("node"));
  Flags flags;
  CLI::App app{kDescription};
  const Commands c = DeclareFlags(app, flags);
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::from_str(flags.log_level));

  if (c.run->parsed()) return RunNode(flags, [argc, argv] { return RereadToken(argc, argv); });
  if (c.enqueue->parsed()) return RunEnqueue(flags);
  if (c.stats->parsed()) return RunStats(flags);
  if (c.ls->parsed()) return RunList(flags, std::nullopt);
  if (c.show->parsed()) return RunList(flags, flags.room_id);
  if (c.redrive->parsed()) {
    return RunRedrive(flags, flags.room_id ? std::optional<uint64_t>(flags.room_id) : std::nullopt);
  }
  return 2;
}
