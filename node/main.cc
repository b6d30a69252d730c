// verdict-node: the battle node as a program. `run` delivers an outbox to the lobby, takes
// results from battle hosts on its ingest listeners (and, with --simulate-*, plays simulated
// battles into it); `enqueue` stores results given as JSON, through a running node or straight
// into a stopped node's outbox; `outbox` inspects and repairs an outbox (node/outbox_cli.h).
// Flags are parsed here only.
#include <signal.h>
#include <sys/resource.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <thread>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "cli/config_file.h"
#include "cli/hangup_guard.h"
#include "cli/log_format.h"
#include "cli/log_level.h"
#include "cli/service_notify.h"
#include "cli/version.h"
#include "common/bearer_token.h"
#include "node/battle_node.h"
#include "node/outbox_cli.h"
#include "node/replication_commands.h"
#include "node/simulator.h"
#include "proto/problem.h"
#include "proto/validation.h"
#include "proto/wire.h"
#include "server/http_client.h"
#include "storage/outbox.h"

namespace {

using namespace verdict;
using namespace verdict::node;

struct Flags {
  std::string log_level = "info";
  std::string log_format = "text";
  std::string node_id, outbox, lobby, token, token_file, metrics_listen, admin_token;
  uint32_t shards = 16;
  size_t batch = delivery::DelivererOptions{}.batch;
  double max_backoff_s = delivery::DelivererOptions{}.max_backoff.count() / 1000.0;
  uint64_t simulate_rooms = 0;
  uint64_t simulate_first_room = 0;
  uint64_t simulate_first_player = 1;
  double simulate_rate = 50;
  int simulate_battle_ms = 2000;
  std::string simulate_modes;  // empty: SimulatorOptions' default
  bool exit_when_drained = false;
  std::string stored_log;
  std::string tls_ca;
  std::vector<std::string> ingest_listen;
  std::string ingest_token, ingest_token_file;
  uint64_t ingest_body_budget_mib = IngestOptions{}.max_body_bytes_in_flight >> 20;
  double drain_on_exit_s = 0;
  std::string to;  // enqueue --to
  // Set by verdict-node-testing only.
  bool unsafe_ack_before_send = false;
  bool unsafe_drop_failed_batches = false;
  bool unsafe_ack_whole_batch = false;
  bool unsafe_answer_before_durable = false;
  bool outbox_no_preallocate = false;
  int progress_ms = 2000;
  std::string input = "-";
  ReplicationFlags replication;  // --replicate-to, --rescue, `rescue`, `replicated ls`
};

int Fail(const std::string& message) {
  cli::PrintError("verdict-node", message);
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

// The lobby's bearer token, from --lobby-token-file or --token.
Result<std::string> ReadToken(const Flags& flags) {
  auto token = BearerTokenFrom(flags.token, flags.token_file, "--token", "--lobby-token-file");
  if (token.ok() && token->empty()) {
    return InvalidArgumentError("--token or --lobby-token-file is required");
  }
  return token;
}

// The token TCP ingest listeners require, from --ingest-token-file or --ingest-token; may be
// empty (then only Unix sockets may listen).
Result<std::string> ReadIngestToken(const Flags& flags) {
  return BearerTokenFrom(flags.ingest_token, flags.ingest_token_file, "--ingest-token",
                         "--ingest-token-file");
}

// Both tokens as configured now, each read on its own: a broken source of one leaves the other
// to be reloaded.
struct Tokens {
  Result<std::string> lobby;
  Result<std::string> ingest;
};

// SIGHUP: the tokens are read again from where they came from, each on its own; a broken source
// keeps its old token, and only that one.
void ReloadTokens(BattleNode& node, const std::function<Tokens()>& reread) {
  const Tokens tokens = reread();
  const auto reload = [](const char* which, const Result<std::string>& token,
                         const std::function<Status(std::string)>& set) {
    const Status s = token.ok() ? set(*token) : token.status();
    if (s.ok()) {
      spdlog::info("SIGHUP: {} token reloaded", which);
    } else {
      spdlog::error("SIGHUP: {} token not reloaded, the node keeps the one it has: {}", which,
                    s.ToString());
    }
  };
  reload("lobby", tokens.lobby, [&](std::string t) { return node.SetLobbyToken(std::move(t)); });
  reload("ingest", tokens.ingest, [&](std::string t) { return node.SetIngestToken(std::move(t)); });
}

// The node's options from the flags, with the token read from where the flags say.
Result<NodeOptions> OptionsFrom(const Flags& flags) {
  auto token = ReadToken(flags);
  if (!token.ok()) return token.status();
  auto ingest_token = ReadIngestToken(flags);
  if (!ingest_token.ok()) return ingest_token.status();
  NodeOptions options;
  options.node_id = flags.node_id;
  options.outbox_dir = flags.outbox;
  options.shards = flags.shards;
  options.lobby_urls = SplitComma(flags.lobby);
  options.token = *token;
  options.metrics_listen = flags.metrics_listen;
  options.ingest.listen = flags.ingest_listen;
  options.ingest.token = *ingest_token;
  options.ingest.max_body_bytes_in_flight = flags.ingest_body_budget_mib << 20;
  options.ingest.unsafe_answer_before_durable_for_test = flags.unsafe_answer_before_durable;
  options.delivery.tls_ca_file = flags.tls_ca;
  options.delivery.batch = flags.batch;
  options.delivery.max_backoff =
      std::chrono::milliseconds(static_cast<int64_t>(flags.max_backoff_s * 1000));
  options.delivery.unsafe_ack_before_send_for_test = flags.unsafe_ack_before_send;
  options.delivery.unsafe_ack_whole_batch_for_test = flags.unsafe_ack_whole_batch;
  options.writer.unsafe_drop_failed_batches_for_test = flags.unsafe_drop_failed_batches;
  options.preallocate_outbox_files = !flags.outbox_no_preallocate;
  if (Status s = ApplyReplicationFlags(flags.replication, options); !s.ok()) return s;
  if (flags.unsafe_ack_before_send || flags.unsafe_drop_failed_batches ||
      flags.unsafe_ack_whole_batch || flags.unsafe_answer_before_durable) {
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
  options.on_stored = [file = log.get()](const std::vector<v1::BattleResult>& batch,
                                         const std::vector<storage::EnqueueResult>& outcomes) {
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!outcomes[i].status.ok() || outcomes[i].already_present) continue;  // not new
      std::fprintf(file, "%llu\n", static_cast<unsigned long long>(batch[i].room_id()));
    }
    std::fflush(file);
  };
  return log;
}

// Raises the soft limit on open descriptors to the hard one: each of the node's listeners has
// its own connection cap (server::HttpServerOptions::max_connections), and under a soft limit of
// 1024 they would be lowered to fit it together.
void RaiseDescriptorLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    spdlog::warn("cannot raise the limit on open descriptors to {}: {}", limit.rlim_max,
                 std::strerror(errno));
  }
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

void PrintInitialBacklog(BattleNode& node, const Flags& flags) {
  const std::string& node_id = flags.node_id;
  if (node.metrics_port()) std::printf("metrics on port %u\n", node.metrics_port());
  for (size_t i = 0; i < flags.ingest_listen.size(); ++i) {
    const uint16_t port = node.ingest_ports()[i];
    if (port) {
      std::printf("ingest on port %u\n", port);
    } else {
      std::printf("ingest on %s\n", flags.ingest_listen[i].c_str());
    }
  }
  if (auto initial = node.OutboxStats(); initial.ok()) {
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
                                          std::vector<SimulatedMode> modes, BattleNode& node) {
  if (flags.simulate_rooms == 0) return nullptr;
  SimulatorOptions sim;
  if (!modes.empty()) sim.modes = std::move(modes);
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
  auto stats = node.OutboxStats();
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
      static_cast<unsigned long long>(node.delivered()), backlog,
      static_cast<unsigned long long>(stats.ok() ? stats->dead_lettered : 0), rates.ingest_per_s,
      rates.delivery_per_s, Seconds(eta).c_str());
  std::fflush(stdout);
}

// Runs until SIGTERM or SIGINT (true), or with --exit-when-drained until the simulator is done
// and the node drained (false); reloads the tokens on SIGHUP and prints progress every
// --progress-ms.
bool ServeUntilStopped(const Flags& flags, BattleNode& node, const Simulator* simulator,
                       const sigset_t& signals, const std::function<Tokens()>& reread) {
  const timespec tick{0, 200'000'000};
  auto last_progress = std::chrono::steady_clock::now();
  for (;;) {
    const int signal = sigtimedwait(&signals, nullptr, &tick);
    if (signal == SIGTERM || signal == SIGINT) {
      spdlog::info("{}: shutting down; queued results are stored first",
                   signal == SIGTERM ? "SIGTERM" : "SIGINT");
      return true;
    }
    if (signal == SIGHUP) ReloadTokens(node, reread);
    if (std::chrono::steady_clock::now() - last_progress >=
        std::chrono::milliseconds(flags.progress_ms)) {
      PrintProgress(node, simulator, flags.simulate_rooms);
      last_progress = std::chrono::steady_clock::now();
    }
    if (flags.exit_when_drained && (!simulator || simulator->done()) && node.Drained()) {
      std::printf("drained\n");
      return false;
    }
  }
}

// The exit status of a node told to drain on exit (EX_TEMPFAIL when results remain).
constexpr int kExitResultsRemain = 75;

// --drain-on-exit: stops taking results and keeps delivering until the outbox is empty or the
// deadline passes; a second SIGTERM or SIGINT ends the wait at once. SIGHUP reloads the tokens
// as while serving: a drain held up by a refused lobby token goes on with the corrected one.
// True if it drained.
bool DrainBeforeExit(const Flags& flags, BattleNode& node, const Simulator* simulator,
                     const sigset_t& signals, const std::function<Tokens()>& reread) {
  node.BeginDrain();
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(flags.drain_on_exit_s * 1000));
  std::printf("draining: delivering what the outbox holds for up to %s before exit\n",
              Seconds(flags.drain_on_exit_s).c_str());
  std::fflush(stdout);
  const timespec tick{0, 100'000'000};
  auto last_progress = std::chrono::steady_clock::now();
  while (!node.Drained()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    const int signal = sigtimedwait(&signals, nullptr, &tick);
    if (signal == SIGTERM || signal == SIGINT) {
      spdlog::warn("second stop signal: ending the drain now");
      return false;
    }
    if (signal == SIGHUP) ReloadTokens(node, reread);
    if (std::chrono::steady_clock::now() - last_progress >=
        std::chrono::milliseconds(flags.progress_ms)) {
      PrintProgress(node, simulator, flags.simulate_rooms);
      last_progress = std::chrono::steady_clock::now();
    }
  }
  return true;
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

int RunNode(const Flags& flags, const std::function<Tokens()>& reread) {
  auto options = OptionsFrom(flags);
  if (!options.ok()) return Fail(options.status().message());
  auto stored_log = OpenStoredLog(flags.stored_log, *options);
  if (!stored_log.ok()) return Fail(stored_log.status().message());
  if (flags.simulate_rooms > 0 && flags.admin_token.empty()) {
    return Fail("--simulate-rooms needs --admin-token to allocate rooms at the lobby");
  }
  std::vector<SimulatedMode> simulate_modes;
  if (!flags.simulate_modes.empty()) {
    auto parsed = ParseSimulatedModes(flags.simulate_modes);
    if (!parsed.ok()) return Fail(parsed.status().message());
    simulate_modes = std::move(*parsed);
  }
  const sigset_t signals = BlockStopSignals();  // before any thread starts
  RaiseDescriptorLimit();

  auto started = BattleNode::Start(*options);
  if (!started.ok()) return Fail(started.status().ToString());
  BattleNode& node = **started;
  auto rescue_watcher = StartRescueWatcher(flags.replication, *options, &node.metrics());
  if (!rescue_watcher.ok()) return Fail(rescue_watcher.status().ToString());
  PrintInitialBacklog(node, flags);
  // From here SIGHUP reloads: a unit of Type=notify runs no ExecReload before this.
  if (Status told = cli::NotifyServiceReady(); !told.ok()) spdlog::warn("{}", told.message());
  std::unique_ptr<Simulator> simulator =
      StartSimulator(flags, *options, std::move(simulate_modes), node);
  const bool signalled = ServeUntilStopped(flags, node, simulator.get(), signals, reread);
  const bool drain = signalled && flags.drain_on_exit_s > 0;
  if (drain && simulator) simulator->RequestStop();
  const bool drained = drain && DrainBeforeExit(flags, node, simulator.get(), signals, reread);
  // The simulator's thread may be blocked handing a result to a full channel (a failing
  // outbox): only Shutdown, at its deadline, releases it, so it is joined after.
  if (simulator) simulator->RequestStop();
  if (*rescue_watcher) (*rescue_watcher)->Stop();
  const size_t lost = node.Shutdown();
  if (simulator) simulator->Stop();
  PrintProgress(node, simulator.get(), flags.simulate_rooms);
  if (simulator) PrintSimulatorSummary(*simulator);
  if (lost > 0) {
    return Fail(std::to_string(lost) + " result(s) could not be stored before shutdown");
  }
  if (drain && !drained) {
    auto stats = node.OutboxStats();
    cli::PrintError("verdict-node", (stats.ok() ? std::to_string(stats->records) : "some") +
                                        " result(s) remain undelivered in the outbox " +
                                        flags.outbox + "; a node started on it delivers them");
    return kExitResultsRemain;
  }
  if (drain) std::printf("drained: the outbox is empty\n");
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

// How `enqueue` went: what was stored anew, found stored already, or refused.
struct EnqueueCounts {
  size_t fresh = 0, present = 0, refused = 0;
};

int PrintEnqueueCounts(const EnqueueCounts& n) {
  std::printf("%zu new, %zu already present", n.fresh, n.present);
  if (n.refused) std::printf(", %zu refused", n.refused);
  std::printf("\n");
  return n.refused ? 1 : 0;
}

// How long `enqueue --to` keeps retrying a node that answers 503 or cannot be reached.
constexpr std::chrono::seconds kEnqueueRetryFor{60};

// enqueue --to: posts the results to a running node's ingest listener in batches (under its
// limits of count and bytes), retrying what it answers 503 (or could not answer) until
// kEnqueueRetryFor has passed without progress.
int EnqueueThroughNode(const Flags& flags, const std::vector<v1::BattleResult>& results) {
  auto to = server::ListenAddress::Parse(flags.to);
  if (!to.ok()) return Fail(to.status().message());
  auto token = ReadIngestToken(flags);
  if (!token.ok()) return Fail(token.status().message());
  if (to->kind == server::ListenAddress::Kind::kTcp && token->empty()) {
    return Fail("--to " + flags.to + " needs the node's --ingest-token or --ingest-token-file");
  }
  server::BlockingHttpClient client(*to);
  EnqueueCounts n;
  std::vector<const v1::BattleResult*> left;
  for (const auto& r : results) left.push_back(&r);
  auto last_progress = std::chrono::steady_clock::now();
  std::chrono::milliseconds pause{200};
  while (!left.empty()) {
    // As many as the node takes in one batch, by count and by bytes (at least one).
    size_t count = 0;
    for (size_t bytes = 0; count < left.size() && count < wire::kMaxBatchResults; ++count) {
      bytes += left[count]->ByteSizeLong() + wire::kBatchBytesPerResult;
      if (count > 0 && bytes > wire::kMaxBatchResultBytes) break;
    }
    v1::SettlementBatch batch;
    for (size_t i = 0; i < count; ++i) *batch.add_results() = *left[i];
    server::HttpRequest request{"POST",
                                "/v1/results:batch",
                                std::string(wire::kProtobufType),
                                std::string(wire::kProtobufType),
                                token->empty() ? "" : "Bearer " + *token,
                                wire::EncodeBody(batch, wire::BodyFormat::kProtobuf).value()};
    auto reply = client.Call(request);
    std::string why;
    std::vector<const v1::BattleResult*> again;
    if (!reply.ok()) {
      why = reply.status().message();
    } else if (reply->status == 200) {
      v1::StoredBatchReply items;
      std::string error;
      if (!wire::DecodeBody(reply->body, wire::BodyFormat::kProtobuf, &items, &error) ||
          items.items_size() != static_cast<int>(count)) {
        return Fail("the node's answer cannot be read (" + error + "); " + std::to_string(n.fresh) +
                    " stored before");
      }
      for (size_t i = 0; i < count; ++i) {
        const v1::StoredItem& item = items.items(static_cast<int>(i));
        if (item.has_stored()) {
          ++(item.stored().duplicate() ? n.present : n.fresh);
        } else if (item.problem().retryable()) {
          why = item.problem().detail();
          again.push_back(left[i]);
        } else {
          ++n.refused;
          std::fprintf(stderr, "room %llu: %s: %s\n",
                       static_cast<unsigned long long>(left[i]->room_id()),
                       item.problem().code().c_str(), item.problem().detail().c_str());
        }
      }
      left.erase(left.begin(), left.begin() + static_cast<long>(count));
      left.insert(left.begin(), again.begin(), again.end());
      if (again.size() < count) {
        last_progress = std::chrono::steady_clock::now();
        pause = std::chrono::milliseconds(200);
      }
      if (again.empty()) continue;
    } else {
      auto problem = wire::ParseProblem(reply->body, reply->content_type);
      if (reply->status != 503 && (!problem || !problem->retryable())) {
        PrintEnqueueCounts(n);
        return Fail("the node refused the batch: " + std::to_string(reply->status) + " " +
                    (problem ? problem->code() + ": " + problem->detail() : reply->body));
      }
      why = problem ? problem->detail() : "HTTP " + std::to_string(reply->status);
    }
    if (std::chrono::steady_clock::now() - last_progress > kEnqueueRetryFor) {
      PrintEnqueueCounts(n);
      return Fail("gave up after " + std::to_string(kEnqueueRetryFor.count()) +
                  " s without progress: " + why + " (" + std::to_string(left.size()) +
                  " result(s) not stored)");
    }
    spdlog::warn("{}; retrying in {} ms", why, pause.count());
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(5000));
  }
  return PrintEnqueueCounts(n);
}

// How long `enqueue --outbox` waits for another enqueue holding the outbox to finish.
constexpr std::chrono::seconds kOutboxLockWait{3};

// `shards_given`: --shards was on the command line (else an existing outbox keeps its count).
int RunEnqueue(const Flags& flags, bool shards_given) {
  std::ifstream file;
  if (flags.input != "-") {
    file.open(flags.input);
    if (!file) return Fail("cannot read " + flags.input);
  }
  auto results = ReadResults(flags.input == "-" ? std::cin : file);
  if (!results.ok()) return Fail(results.status().message() + " (nothing was enqueued)");
  if (!flags.to.empty()) return EnqueueThroughNode(flags, *results);
  if (flags.outbox.empty()) return Fail("enqueue needs --to (a running node) or --outbox DIR");
  // Another enqueue may hold the outbox for a moment: wait for it, a while.
  const auto give_up = std::chrono::steady_clock::now() + kOutboxLockWait;
  const storage::OutboxOptions options{.shard_count = flags.shards,
                                       .adopt_existing_shard_count = !shards_given};
  auto outbox = storage::OpenOutbox(flags.outbox, options);
  while (!outbox.ok() && outbox.status().code() == StatusCode::kUnavailable &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    outbox = storage::OpenOutbox(flags.outbox, options);
  }
  if (!outbox.ok()) {
    if (outbox.status().code() == StatusCode::kUnavailable) {
      return Fail(outbox.status().ToString() +
                  "; to hand results to a running node, use enqueue --to unix:PATH or "
                  "HOST:PORT (its --ingest-listen)");
    }
    return Fail(outbox.status().ToString());
  }
  EnqueueCounts n;
  size_t& fresh = n.fresh;
  size_t& present = n.present;
  size_t& refused = n.refused;
  // What the lobby would certainly refuse is refused here, as the ingest endpoints do.
  std::vector<v1::BattleResult> valid;
  for (auto& r : *results) {
    if (Status ok = wire::ValidateResult(r); !ok.ok()) {
      ++refused;
      std::fprintf(stderr, "room %llu: INVALID_ARGUMENT: %s\n",
                   static_cast<unsigned long long>(r.room_id()), ok.message().c_str());
      continue;
    }
    valid.push_back(std::move(r));
  }
  *results = std::move(valid);
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
  return PrintEnqueueCounts(n);
}

}  // namespace

struct Commands {
  CLI::App *run, *enqueue;
  CLI::Option* enqueue_shards;
  std::unique_ptr<OutboxCommands> outbox;
  ReplicationCommands replication;
};

constexpr char kDescription[] =
    "verdict-node: keeps battle results durable on this host and delivers them to "
    "the lobby exactly as often as needed.";

// `enqueue`: results given as JSON into an outbox, through a running node or straight into it.
void DeclareEnqueue(CLI::App& app, Flags& flags, Commands& c) {
  c.enqueue = app.add_subcommand(
      "enqueue",
      "store BattleResults given as JSON (one, or one per line): through a running node with "
      "--to, or straight into a stopped node's outbox with --outbox");
  auto* to = c.enqueue->add_option("--to", flags.to,
                                   "a running node's ingest listener: unix:PATH or HOST:PORT");
  c.enqueue->add_option("--outbox", flags.outbox, "outbox directory of a stopped node")
      ->excludes(to);
  auto* enqueue_token = c.enqueue->add_option("--ingest-token", flags.ingest_token,
                                              "the node's ingest token (for a HOST:PORT --to)");
  c.enqueue
      ->add_option("--ingest-token-file", flags.ingest_token_file,
                   "read the ingest token from FILE")
      ->excludes(enqueue_token);
  c.enqueue_shards = c.enqueue
                         ->add_option("--shards", flags.shards,
                                      "shards if the outbox is new (an existing one keeps its own)")
                         ->capture_default_str()
                         ->check(CLI::Range(1, 1000));
  c.enqueue->add_option("input", flags.input, "file to read, or - for standard input")
      ->capture_default_str();
}

// Declares every flag of verdict-node on `app`, bound to `flags`. Used to parse the command line
// and again to re-read it (with its --config file) when SIGHUP reloads the token.
Commands DeclareFlags(CLI::App& app, Flags& flags) {
  Commands c{};
  app.require_subcommand(1);
  app.fallthrough();  // program flags may follow the subcommand
  cli::AddConfigOption(app);
  cli::AddLogLevelOption(app, &flags.log_level);
  cli::AddLogFormatOption(app, &flags.log_format);
  cli::AddVersionOption(app, "verdict-node");

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
  c.run
      ->add_option("--max-backoff", flags.max_backoff_s,
                   "longest wait, in seconds, before a failed delivery is retried; a lobby's "
                   "Retry-After is obeyed up to it")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 86400.0));
  c.run->add_option("--metrics-listen", flags.metrics_listen,
                    "HOST:PORT for /metrics, /healthz and /readyz");
  c.run->add_option("--ingest-listen", flags.ingest_listen,
                    "take results from battle hosts at unix:PATH (a socket of mode 0660) or "
                    "HOST:PORT (needs --ingest-token): POST /v1/results and /v1/results:batch; "
                    "repeatable");
  auto* ingest_token =
      c.run->add_option("--ingest-token", flags.ingest_token,
                        "bearer token that TCP ingest listeners require of battle hosts");
  c.run
      ->add_option("--ingest-token-file", flags.ingest_token_file,
                   "read the ingest token from FILE instead (SIGHUP reads it again)")
      ->excludes(ingest_token);
  c.run
      ->add_option("--ingest-body-budget-mib", flags.ingest_body_budget_mib,
                   "MiB of request bodies the listeners hold at once; a request past it is "
                   "answered 503 with Retry-After")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{4}, uint64_t{1} << 20));
  c.run
      ->add_option("--drain-on-exit", flags.drain_on_exit_s,
                   "on SIGTERM, refuse new results (503) and keep delivering for up to SECONDS "
                   "until the outbox is empty; exit 0 if it is, 75 if results remain (0: exit "
                   "at once, delivering after the next start)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  c.run->add_option("--simulate-rooms", flags.simulate_rooms, "simulated battles to play");
  c.run->add_option("--simulate-rate", flags.simulate_rate, "simulated battles started per second")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 100000.0));
  c.run->add_option("--simulate-battle-ms", flags.simulate_battle_ms, "length of a battle")
      ->capture_default_str()
      ->check(CLI::Range(0, 3'600'000));
  c.run->add_option("--simulate-modes", flags.simulate_modes,
                    "the kinds of simulated battle, played in turn: MODE=TEAMSxSIZE,… (for "
                    "example ranked-5v5=2x5,ffa-8=8x1,royale-trios=20x3; each mode declared at "
                    "the lobby); default: 5v5s in the lobby's default mode");
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
  c.run
      ->add_flag("--unsafe-answer-before-durable", flags.unsafe_answer_before_durable,
                 "answer ingest requests 201 before their results are fsynced")
      ->group(negative_controls);
#endif
  // For the fault suite: a full disk then fails the next write, not the next flush.
  c.run->add_flag("--outbox-no-preallocate", flags.outbox_no_preallocate)->group("");
  c.run->add_option("--stored-log", flags.stored_log,
                    "append the room id of every result to FILE once it is newly durable");
  c.run->add_flag("--exit-when-drained", flags.exit_when_drained,
                  "exit 0 once the simulator is done and the outbox is empty");
  c.run->add_option("--progress-ms", flags.progress_ms, "interval of progress lines")
      ->capture_default_str()
      ->check(CLI::Range(100, 3'600'000));

  DeclareEnqueue(app, flags, c);
  c.outbox = std::make_unique<OutboxCommands>(app);
  DeclareReplicationRunFlags(c.run, flags.replication);
  c.replication = DeclareReplicationCommands(app, flags.replication);
  return c;
}

// The tokens as configured now: the command line and its --config file parsed afresh (a flag on
// the command line still wins), then the token files if any are named.
Tokens RereadTokens(int argc, char** argv) {
  CLI::App app{kDescription};
  Flags fresh;
  DeclareFlags(app, fresh);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const Status unread =
        InvalidArgumentError(std::string("cannot read the flags again: ") + e.what());
    return Tokens{unread, unread};
  }
  return Tokens{ReadToken(fresh), ReadIngestToken(fresh)};
}

int main(int argc, char** argv) {
  // SIGHUP is blocked since before the loader ran any initialiser (cli/hangup_guard.h): `run`
  // takes one that came early once it serves; the other commands take it back once parsed.
  spdlog::set_default_logger(spdlog::stderr_color_mt("node"));
  Flags flags;
  CLI::App app{kDescription};
  const Commands c = DeclareFlags(app, flags);
  CLI11_PARSE(app, argc, argv);
  cli::ApplyLogLevel(flags.log_level);
  cli::ApplyLogFormat(flags.log_format);

  if (c.run->parsed()) return RunNode(flags, [argc, argv] { return RereadTokens(argc, argv); });
  cli::ReleaseHangup();  // a hang-up ends them, as it ends any command
  if (c.enqueue->parsed()) return RunEnqueue(flags, c.enqueue_shards->count() > 0);
  if (c.replication.rescue->parsed()) return RunRescue(flags.replication);
  if (c.replication.replicated_ls->parsed()) return RunReplicatedList(flags.replication);
  if (std::optional<int> status = c.outbox->Run()) return *status;
  return 2;
}
