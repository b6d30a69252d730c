// verdict-bench: measures verdict side by side with the design it replaces and with the
// physical ceiling, in one run, and reports ratios. Modes: ingest, ingest-memory, drain, scale,
// events, ladder, lobby-memory, replicate, replicate-outage, retention.
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "bench/drain.h"
#include "bench/events.h"
#include "bench/ingest.h"
#include "bench/ingest_memory.h"
#include "bench/ladder.h"
#include "bench/latency.h"
#include "bench/lobby_memory.h"
#include "bench/replicate.h"
#include "bench/retention.h"
#include "bench/scale.h"
#include "cli/version.h"

namespace {

// The descriptor that holds verdict-bench's own stdout while pg_virtualenv runs it.
constexpr const char* kStdoutFdVariable = "VERDICT_BENCH_STDOUT_FD";

}  // namespace

int main(int argc, char** argv) {
  // stdout carries the table (or the JSON object); logs go to stderr.
  spdlog::set_default_logger(spdlog::stderr_color_mt("bench"));
  spdlog::set_level(spdlog::level::warn);
  CLI::App app{
      "verdict-bench: durable ingest measured side by side with the file-per-result "
      "design and raw RocksDB."};
  app.require_subcommand(1);
  verdict::cli::AddVersionOption(app, "verdict-bench");
  verdict::bench::IngestOptions ingest;
  CLI::App* ingest_cmd = app.add_subcommand(
      "ingest", "results made durable per second: verdict, file per result, RocksDB ceiling");
  ingest_cmd->add_option("--seconds", ingest.seconds, "seconds per design")
      ->capture_default_str()
      ->check(CLI::Range(0.5, 3600.0));
  ingest_cmd->add_option("--producers", ingest.producers, "producer threads at saturation")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  ingest_cmd
      ->add_option("--load-producers", ingest.load_producers,
                   "producer threads of the open-loop runs (verdict at --load-fraction, then a "
                   "bare log at the same rate)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  ingest_cmd->add_option("--size", ingest.size, "serialized result size in bytes")
      ->capture_default_str()
      ->check(CLI::Range(size_t{200}, size_t{1} << 20));
  ingest_cmd
      ->add_option("--load-fraction", ingest.load_fraction,
                   "then measure latency open loop at this part of verdict's maximum (0: skip)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  ingest_cmd->add_flag("--json", ingest.output.json, "print one JSON object on stdout");
  ingest_cmd->add_flag("--verdict-only", ingest.verdict_only,
                       "measure only verdict's path (for profiling)");
  ingest_cmd->add_option("--csv", ingest.output.csv_dir, "write the raw rows to DIR/ingest.csv");

  verdict::bench::IngestMemoryOptions memory;
  CLI::App* memory_cmd = app.add_subcommand(
      "ingest-memory",
      "verdict-node's resident memory while local connections each hold a 4 MiB batch body "
      "short of its last byte: with its body budget, and without one");
  memory_cmd->add_option("--connections", memory.connections, "connections holding a body")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  memory_cmd->add_option("--budget-mib", memory.budget_mib, "the node's body budget in MiB")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{4}, uint64_t{1} << 19));
  memory_cmd->add_option("--hold-s", memory.hold_s, "seconds the bodies are held, sampled")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  memory_cmd->add_option("--node-binary", memory.node_binary,
                         "verdict-node to run (default: the one built with this benchmark)");
  memory_cmd->add_flag("--json", memory.output.json, "print one JSON object on stdout");
  memory_cmd->add_option("--csv", memory.output.csv_dir,
                         "write the raw rows to DIR/ingest_memory.csv");

  verdict::bench::DrainOptions drain;
  CLI::App* drain_cmd = app.add_subcommand(
      "drain",
      "backlog drain rate after a lobby outage: verdict by shard count, the serial "
      "file-per-result design, and pgbench running the settlement SQL");
  drain_cmd->add_option("--backlog", drain.backlog, "results waiting when the lobby is back")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{100}, uint64_t{5'000'000}));
  drain_cmd->add_option("--shards", drain.shards, "shard counts to measure, comma-separated")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  drain_cmd
      ->add_option("--batch", drain.batches,
                   "records per request to measure, comma-separated (the node's --batch; at 1 "
                   "the drain also runs against a lobby that does not coalesce)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{256}));
  drain_cmd
      ->add_option("--serial-backlog", drain.serial_backlog,
                   "results the serial baseline drains (its rate does not depend on it)")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{100}, uint64_t{5'000'000}));
  drain_cmd->add_option("--pg-concurrency", drain.pg_concurrency, "pgbench clients")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  drain_cmd
      ->add_option("--rtt-ms", drain.rtt_ms,
                   "round trip a latency proxy adds between node and lobby")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1000.0));
  drain_cmd
      ->add_option("--produce-rate", drain.produce_rate,
                   "also drain each shard count while producing this many results/s, and "
                   "compare the time to empty with N/(C-R)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  drain_cmd->add_option("--svg", drain.svg, "write the chart of drain rate by shard count");
  drain_cmd
      ->add_option("--lobby-coalesce-ms", drain.lobby_coalesce_ms,
                   "the lobby's group-commit wait (its --coalesce-wait-ms; 0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1000.0));
  drain_cmd->add_option("--lobby-db-pool", drain.lobby_db_pool, "the lobby's DB workers")
      ->capture_default_str()
      ->check(CLI::Range(1, 512));
  drain_cmd->add_option("--db", drain.db,
                        "libpq conninfo; without it (and without PGHOST) the benchmark runs "
                        "itself inside pg_virtualenv");
  drain_cmd
      ->add_option("--modes", drain.modes,
                   "room shapes and rating systems, TEAMSxSIZE:SYSTEM comma-separated (2x5:elo, "
                   "2x5:openskill, 20x3:openskill): only a drain of each, in a mode of its own, "
                   "at 16 shards (or the most given) and the largest --batch, in rooms/s and "
                   "player results/s against the first")
      ->delimiter(',');
  CLI::Option* baseline_lobby =
      drain_cmd
          ->add_option(
              "--baseline-lobby", drain.baseline_lobby,
              "another build's verdict-lobby: drain --backlog results through it and through "
              "this build's, alternating, each on a database of its own, and report the "
              "ratio (at 16 shards, or the most given, and the largest --batch); nothing else "
              "runs")
          ->check(CLI::ExistingFile);
  drain_cmd->add_option("--lobby-binary", drain.lobby_binary,
                        "this build's verdict-lobby for --baseline-lobby (default: the one built "
                        "with this benchmark)");
  drain_cmd
      ->add_option("--baseline-node", drain.baseline_node,
                   "with --baseline-lobby: each build's own verdict-node process delivers (this "
                   "one the baseline's), from an outbox filled by its `enqueue`, so that the "
                   "ratio covers the node side too; without it both lobbies get this build's "
                   "deliverers")
      ->check(CLI::ExistingFile)
      ->needs(baseline_lobby);
  drain_cmd->add_option("--node-binary", drain.node_binary,
                        "this build's verdict-node for --baseline-node (default: the one built "
                        "with this benchmark)");
  drain_cmd
      ->add_option("--rounds", drain.rounds, "drains through each lobby, with --baseline-lobby")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  drain_cmd
      ->add_option("--ceiling-rounds", drain.ceiling_rounds,
                   "times the headline drain (16 shards, or the most given, at batch 64, or the "
                   "largest) and the batch statement's pgbench ceiling run, alternating; their "
                   "ratio is of the medians (a 2-core machine's rounds spread by 10-20%)")
      ->capture_default_str()
      ->check(CLI::Range(1, 50));
  drain_cmd->add_flag("--json", drain.output.json, "print one JSON object on stdout");
  drain_cmd->add_option("--csv", drain.output.csv_dir, "write the raw rows to DIR/drain.csv");

  verdict::bench::LatencyOptions latency;
  CLI::App* latency_cmd = app.add_subcommand(
      "latency",
      "the time from a battle's end to its settlement on the lobby's feed, open loop at part of "
      "the drain's maximum, beside the floor of its path (durable append, one room's "
      "settlement committed directly, two loopback HTTP exchanges)");
  latency_cmd->add_option("--results", latency.results, "results posted open loop")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{10}, uint64_t{5'000'000}));
  CLI::Option* load_fraction =
      latency_cmd
          ->add_option("--load-fraction", latency.load_fraction,
                       "post at this part of the drain's maximum, measured first")
          ->capture_default_str()
          ->check(CLI::Range(0.01, 1.0));
  latency_cmd
      ->add_option("--rate", latency.rate,
                   "post this many results/s instead (the drain's maximum is not measured)")
      ->check(CLI::Range(1.0, 1e6))
      ->excludes(load_fraction);
  latency_cmd
      ->add_option("--backlog", latency.backlog, "results of the drain that measures the maximum")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{100}, uint64_t{5'000'000}));
  latency_cmd->add_option("--shards", latency.shards, "the node's outbox shards (and the drain's)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  latency_cmd
      ->add_option("--batch", latency.batch, "the node's records per request (and the drain's)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{256}));
  latency_cmd
      ->add_option("--clients", latency.clients,
                   "connections posting to the node, each waiting for its answer")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  latency_cmd
      ->add_option("--floor-samples", latency.floor_samples, "samples of each part of the floor")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{10}, uint64_t{1'000'000}));
  latency_cmd
      ->add_option("--lobby-coalesce-ms", latency.lobby_coalesce_ms,
                   "the lobby's group-commit wait (its --coalesce-wait-ms; default: its own)")
      ->check(CLI::Range(0.0, 1000.0));
  latency_cmd->add_flag("--subscriber-quick-ack", latency.subscriber_quick_ack,
                        "the feed's subscriber acknowledges each segment at once (TCP_QUICKACK), "
                        "to show what the lobby's small writes held for a delayed ACK cost");
  latency_cmd->add_option("--lobby-binary", latency.lobby_binary,
                          "verdict-lobby to run (default: the one built with this benchmark)");
  latency_cmd->add_option("--node-binary", latency.node_binary,
                          "verdict-node to run (default: the one built with this benchmark)");
  latency_cmd->add_option("--db", latency.db,
                          "libpq conninfo; without it (and without PGHOST) the benchmark runs "
                          "itself inside pg_virtualenv");
  latency_cmd->add_flag("--json", latency.output.json, "print one JSON object on stdout");
  latency_cmd->add_option("--csv", latency.output.csv_dir, "write the raw rows to DIR/latency.csv");

  verdict::bench::ScaleOptions scale;
  CLI::App* scale_cmd = app.add_subcommand(
      "scale",
      "a deep backlog: verdict-node's memory over it, and the cost of reading a shard's head "
      "as it is acked");
  scale_cmd->add_option("--records", scale.records, "backlog size")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{100}, uint64_t{100'000'000}));
  scale_cmd->add_option("--size", scale.size, "serialized result size in bytes")
      ->capture_default_str()
      ->check(CLI::Range(size_t{200}, size_t{1} << 20));
  scale_cmd->add_option("--shards", scale.shards, "outbox shards")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  scale_cmd->add_option("--node-seconds", scale.node_seconds, "how long verdict-node runs")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 3600.0));
  scale_cmd->add_option("--node-binary", scale.node_binary,
                        "verdict-node to run (default: the one built with this benchmark)");
  scale_cmd->add_flag("--json", scale.output.json, "print one JSON object on stdout");
  scale_cmd->add_option("--csv", scale.output.csv_dir, "write the raw rows to DIR/scale.csv");

  verdict::bench::EventsOptions events;
  CLI::App* events_cmd = app.add_subcommand(
      "events",
      "one subscriber catching up a deep settlement history: events/s and the lobby's memory");
  events_cmd->add_option("--events", events.events, "events in the history")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{100}, uint64_t{100'000'000}));
  events_cmd->add_option("--payload", events.payload, "padding bytes per event")
      ->capture_default_str()
      ->check(CLI::Range(size_t{0}, size_t{1} << 20));
  events_cmd->add_option("--subscriber-buffer-bytes", events.buffer_bytes,
                         "the lobby's per-subscriber budget (default: the lobby's)");
  events_cmd->add_option("--lobby-binary", events.lobby_binary,
                         "verdict-lobby to run (default: the one built with this benchmark)");
  events_cmd->add_option("--db", events.db,
                         "libpq conninfo; without it (and without PGHOST) the benchmark runs "
                         "itself inside pg_virtualenv");
  events_cmd->add_flag("--json", events.output.json, "print one JSON object on stdout");
  events_cmd->add_option("--csv", events.output.csv_dir, "write the raw rows to DIR/events.csv");

  verdict::bench::LadderOptions ladder;
  CLI::App* ladder_cmd = app.add_subcommand(
      "ladder",
      "at millions of rated players: a leaderboard page of 100 and the release of a room, beside "
      "a count(*) of the ratings and a scan of the players");
  ladder_cmd->add_option("--players", ladder.players, "players, each rated in the mode default")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1000}, uint64_t{100'000'000}));
  ladder_cmd->add_option("--pages", ladder.pages, "leaderboard pages of 100 read, top down")
      ->capture_default_str()
      ->check(CLI::Range(1, 100'000));
  ladder_cmd->add_option("--rooms", ladder.rooms, "rooms of ten allocated, then released")
      ->capture_default_str()
      ->check(CLI::Range(1, 10'000));
  ladder_cmd->add_option("--lobby-binary", ladder.lobby_binary,
                         "verdict-lobby to run (default: the one built with this benchmark)");
  ladder_cmd->add_option("--db", ladder.db,
                         "libpq conninfo; without it (and without PGHOST) the benchmark runs "
                         "itself inside pg_virtualenv");
  ladder_cmd->add_flag("--json", ladder.output.json, "print one JSON object on stdout");
  ladder_cmd->add_option("--csv", ladder.output.csv_dir, "write the raw rows to DIR/ladder.csv");

  verdict::bench::LobbyMemoryOptions lobby_memory;
  CLI::App* lobby_memory_cmd = app.add_subcommand(
      "lobby-memory",
      "verdict-lobby's resident memory idle, after a burst of the largest valid settlement "
      "batches, and once the burst has settled");
  lobby_memory_cmd->add_option("--batches", lobby_memory.batches, "batches in the burst")
      ->capture_default_str()
      ->check(CLI::Range(1, 10'000));
  lobby_memory_cmd->add_option("--rooms", lobby_memory.rooms, "rooms per batch")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  lobby_memory_cmd->add_option("--seats", lobby_memory.seats, "seats per room")
      ->capture_default_str()
      ->check(CLI::Range(2, 200));
  lobby_memory_cmd->add_option("--clients", lobby_memory.clients, "batches in flight at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  lobby_memory_cmd->add_option("--db-pool", lobby_memory.db_pool, "the lobby's --db-pool")
      ->capture_default_str()
      ->check(CLI::Range(1, 512));
  lobby_memory_cmd
      ->add_option("--settle-s", lobby_memory.settle_s,
                   "seconds the lobby is left idle after the burst, its RSS sampled")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  lobby_memory_cmd->add_option("--lobby-binary", lobby_memory.lobby_binary,
                               "verdict-lobby to run (default: the one built with this benchmark)");
  lobby_memory_cmd
      ->add_option("--baseline-lobby", lobby_memory.baseline_lobby,
                   "another build's verdict-lobby, run the same way after this one")
      ->check(CLI::ExistingFile);
  lobby_memory_cmd->add_option("--db", lobby_memory.db,
                               "libpq conninfo; without it (and without PGHOST) the benchmark "
                               "runs itself inside pg_virtualenv");
  lobby_memory_cmd->add_flag("--json", lobby_memory.output.json, "print one JSON object on stdout");
  lobby_memory_cmd->add_option("--csv", lobby_memory.output.csv_dir,
                               "write the raw rows to DIR/lobby_memory.csv");

  verdict::bench::ReplicateOptions replicate;
  CLI::App* replicate_cmd = app.add_subcommand(
      "replicate",
      "the replicated tier: replicated results/s beside local-only ingest, replication lag at "
      "half that rate, and a rescue's drain beside the ordinary drain of the same backlog");
  replicate_cmd->add_option("--seconds", replicate.seconds, "seconds per run")
      ->capture_default_str()
      ->check(CLI::Range(0.5, 3600.0));
  replicate_cmd->add_option("--producers", replicate.producers, "producer threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  replicate_cmd->add_option("--backlog", replicate.backlog, "results of each drain")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{100}, uint64_t{5'000'000}));
  replicate_cmd->add_option("--etcd", replicate.etcd,
                            "etcd://HOST:PORT,...; default: three members started here");
  replicate_cmd->add_option("--db", replicate.db,
                            "libpq conninfo; without it (and without PGHOST) the benchmark runs "
                            "itself inside pg_virtualenv");
  replicate_cmd->add_flag("--json", replicate.output.json, "print one JSON object on stdout");

  verdict::bench::ReplicateOutageOptions outage;
  CLI::App* outage_cmd = app.add_subcommand(
      "replicate-outage",
      "verdict-node's memory while etcd is away and posts with ?durability=replicated keep "
      "coming and are retried, beside the same posts without it");
  outage_cmd->add_option("--results", outage.results, "results posted")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{128}, uint64_t{10'000'000}));
  outage_cmd->add_option("--retries", outage.retries, "times each batch is posted again")
      ->capture_default_str()
      ->check(CLI::Range(0, 100));
  outage_cmd->add_option("--clients", outage.clients, "client threads posting at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  outage_cmd->add_option("--result-bytes", outage.result_bytes, "serialized bytes of a result")
      ->capture_default_str()
      ->check(CLI::Range(size_t{500}, size_t{16'000}));
  outage_cmd->add_option("--node-binary", outage.node_binary,
                         "the verdict-node to measure; default: the one built with this benchmark");
  outage_cmd->add_flag("--json", outage.output.json, "print one JSON object on stdout");

  verdict::bench::RetentionBenchOptions retention;
  CLI::App* retention_cmd = app.add_subcommand(
      "retention",
      "data over time: table sizes while retention runs, the drain with and without retention "
      "passes, and the time to drop a small and a large partition");
  retention_cmd->add_option("--rooms", retention.rooms, "rooms settled in the growth part")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{100}, uint64_t{100'000'000}));
  retention_cmd->add_option("--rate", retention.rate, "rooms settled per second while growing")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e6));
  retention_cmd->add_option("--partition", retention.partition, "ids per partition")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{10}, int64_t{1} << 40));
  retention_cmd->add_option("--pass-s", retention.pass_s, "seconds between retention passes")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  retention_cmd->add_option("--events-window-s", retention.events_window_s, "events' window")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  retention_cmd->add_option("--history-window-s", retention.history_window_s, "history's window")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  retention_cmd->add_option("--receipts-window-s", retention.receipts_window_s, "receipts' window")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  retention_cmd->add_option("--backlog", retention.backlog, "results each drain empties")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{100}, uint64_t{5'000'000}));
  retention_cmd->add_option("--shards", retention.shards, "outbox shards of the drains")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  retention_cmd->add_option("--batch", retention.batch, "records per request of the drains")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{256}));
  retention_cmd->add_option("--drop-small", retention.drop_small, "events in the small partition")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{100'000'000}));
  retention_cmd->add_option("--drop-large", retention.drop_large, "events in the large partition")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{100'000'000}));
  retention_cmd->add_option("--db", retention.db,
                            "libpq conninfo; without it (and without PGHOST) the benchmark runs "
                            "itself inside pg_virtualenv");
  retention_cmd->add_flag("--json", retention.output.json, "print one JSON object on stdout");
  retention_cmd->add_option("--csv", retention.output.csv_dir,
                            "write the raw rows to DIR/retention.csv");

  CLI11_PARSE(app, argc, argv);
  if (ingest_cmd->parsed()) return verdict::bench::RunIngest(ingest);
  if (scale_cmd->parsed()) return verdict::bench::RunScale(scale);
  if (memory_cmd->parsed()) return verdict::bench::RunIngestMemory(memory);
  if (outage_cmd->parsed()) return verdict::bench::RunReplicateOutage(outage);
  const bool needs_db = drain_cmd->parsed() || events_cmd->parsed() || replicate_cmd->parsed() ||
                        retention_cmd->parsed() || ladder_cmd->parsed() ||
                        lobby_memory_cmd->parsed() || latency_cmd->parsed();
  if (needs_db) {
    const std::string& db = drain_cmd->parsed()          ? drain.db
                            : events_cmd->parsed()       ? events.db
                            : replicate_cmd->parsed()    ? replicate.db
                            : ladder_cmd->parsed()       ? ladder.db
                            : lobby_memory_cmd->parsed() ? lobby_memory.db
                            : latency_cmd->parsed()      ? latency.db
                                                         : retention.db;
    if (const char* fd = std::getenv(kStdoutFdVariable)) {
      // Inside pg_virtualenv: take back the stdout it was started with (see below).
      const int saved = std::atoi(fd);
      ::dup2(saved, STDOUT_FILENO);
      ::close(saved);
      ::unsetenv(kStdoutFdVariable);
    }
    if (db.empty() && !std::getenv("PGHOST") && !std::getenv("VERDICT_BENCH_PG_STARTED")) {
      // No database given: run again inside a throwaway cluster. pg_virtualenv reports on its
      // stdout ("Creating new PostgreSQL cluster", "Dropping cluster"), so it gets our stderr
      // there, and the run inside takes our stdout back from a descriptor kept open across exec:
      // stdout carries the table or the one JSON object and nothing else.
      const int saved = ::fcntl(STDOUT_FILENO, F_DUPFD, 3);
      if (saved < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
        std::perror("verdict-bench: cannot set stdout aside");
        return 1;
      }
      ::setenv(kStdoutFdVariable, std::to_string(saved).c_str(), 1);
      ::setenv("VERDICT_BENCH_PG_STARTED", "1", 1);
      std::vector<char*> args = {const_cast<char*>("pg_virtualenv")};
      for (int i = 0; i < argc; ++i) args.push_back(argv[i]);
      args.push_back(nullptr);
      ::execvp("pg_virtualenv", args.data());
      std::perror("pg_virtualenv");
      return 1;
    }
    try {
      if (replicate_cmd->parsed()) return verdict::bench::RunReplicate(replicate);
      if (retention_cmd->parsed()) return verdict::bench::RunRetentionBench(retention);
      if (ladder_cmd->parsed()) return verdict::bench::RunLadder(ladder);
      if (lobby_memory_cmd->parsed()) return verdict::bench::RunLobbyMemory(lobby_memory);
      if (latency_cmd->parsed()) return verdict::bench::RunLatency(latency);
      if (drain_cmd->parsed() && !drain.baseline_lobby.empty()) {
        return verdict::bench::RunLobbyComparison(drain);
      }
      return drain_cmd->parsed() ? verdict::bench::RunDrain(drain)
                                 : verdict::bench::RunEvents(events);
    } catch (const std::exception& e) {  // a run that cannot measure what it set out to
      std::fprintf(stderr, "verdict-bench: %s\n", e.what());
      return 1;
    }
  }
  return 2;
}
