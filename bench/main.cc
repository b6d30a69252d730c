// verdict-bench: measures verdict side by side with the design it replaces and with the
// physical ceiling, in one run, and reports ratios. Modes: ingest.
#include <CLI/CLI.hpp>

#include <spdlog/spdlog.h>

#include "bench/ingest.h"

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  CLI::App app{
      "verdict-bench: durable ingest measured side by side with the file-per-result "
      "design and raw RocksDB."};
  app.require_subcommand(1);
  verdict::bench::IngestOptions ingest;
  CLI::App* ingest_cmd = app.add_subcommand(
      "ingest", "results made durable per second: verdict, file per result, RocksDB ceiling");
  ingest_cmd->add_option("--seconds", ingest.seconds, "seconds per design")
      ->capture_default_str()
      ->check(CLI::Range(0.5, 3600.0));
  ingest_cmd->add_option("--producers", ingest.producers, "producer threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  ingest_cmd->add_option("--size", ingest.size, "serialized result size in bytes")
      ->capture_default_str()
      ->check(CLI::Range(size_t{200}, size_t{1} << 20));
  ingest_cmd->add_flag("--json", ingest.output.json, "print one JSON object on stdout");
  ingest_cmd->add_flag("--verdict-only", ingest.verdict_only,
                       "measure only verdict's path (for profiling)");
  ingest_cmd->add_option("--csv", ingest.output.csv_dir, "write the raw rows to DIR/ingest.csv");
  CLI11_PARSE(app, argc, argv);
  if (ingest_cmd->parsed()) return verdict::bench::RunIngest(ingest);
  return 2;
}
