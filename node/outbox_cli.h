// The operator's commands on an outbox: `verdict-node outbox stats | ls | show | redrive |
// salvage`. main.cc declares them on verdict-node's command line and runs the one given. stats,
// ls and show read through a read-only open, so they work while a node holds the outbox, and
// print as they read, so their memory does not grow with the outbox; salvage needs the node
// stopped, and so does redrive, unless it goes through the running node's ingest API
// (--via-node). Not thread-safe: one command per process.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

namespace verdict::node {

class OutboxCommands {
 public:
  // Declares `outbox` and its subcommands on `app`, bound to this object, which must outlive
  // the parse.
  explicit OutboxCommands(CLI::App& app);
  OutboxCommands(const OutboxCommands&) = delete;
  OutboxCommands& operator=(const OutboxCommands&) = delete;

  // Runs the subcommand the parsed command line named: its exit status, or nullopt if it named
  // none of them.
  std::optional<int> Run() const;

  // Exit status of `salvage` when it copied what it could but some stored records could not be
  // read (as `verdict-lobby reconcile` exits when a room is lost).
  static constexpr int kExitRecordsLost = 3;

 private:
  struct Flags {
    std::string outbox;
    bool json = false;
    size_t limit = 1000;
    uint64_t room_id = 0;
    std::string from;      // redrive: quarantine or dead-letter
    bool all = false;      // redrive: every record
    std::string to;        // salvage: the new outbox
    std::string via_node;  // redrive: a running node's ingest listener
    std::string ingest_token, ingest_token_file;
    uint32_t shards = 0;
  };

  int Stats() const;
  int List() const;
  int Show() const;
  int Redrive() const;
  // Redrive through the running node at --via-node (POST /v1/outbox:redrive).
  int RedriveThroughNode() const;
  int Salvage() const;

  Flags flags_;
  CLI::App* stats_ = nullptr;
  CLI::App* ls_ = nullptr;
  CLI::App* show_ = nullptr;
  CLI::App* redrive_ = nullptr;
  CLI::App* salvage_ = nullptr;
  CLI::Option* redrive_room_ = nullptr;
};

}  // namespace verdict::node
