// verdict-node's flags and commands for the replicated tier (replication/): `run --replicate-to`
// with its TLS and auth options, `run --rescue`, `rescue` and `replicated ls`. Flags are parsed
// in main; this file turns them into options and runs the commands.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "common/metrics.h"
#include "common/status.h"
#include "node/battle_node.h"
#include "replication/rescue.h"

namespace verdict::node {

struct ReplicationFlags {
  std::string replicate_to;  // run: etcd://HOST:PORT,...
  std::string from;          // rescue, replicated ls: etcd://HOST:PORT,...
  std::string etcd_ca, etcd_cert, etcd_key, etcd_user, etcd_password_file;
  bool etcd_tls = false;
  std::string etcd_prefix = replication::EtcdOptions{}.key_prefix;
  int lease_ttl_s = static_cast<int>(replication::ReplicationOptions{}.lease_ttl.count());
  bool rescue = false;  // run --rescue
  std::string rescue_tokens_file;
  std::string rescue_dir;
  double rescue_interval_s = 5;
  std::string node_id;        // rescue, replicated ls
  std::string lobby, tls_ca;  // rescue
  double deadline_s = 300;    // rescue
  bool json = false;          // replicated ls
};

struct ReplicationCommands {
  CLI::App* rescue = nullptr;
  CLI::App* replicated_ls = nullptr;
};

// Adds --replicate-to, the etcd options and --rescue* to `run`.
void DeclareReplicationRunFlags(CLI::App* run, ReplicationFlags& flags);
// Adds the `rescue` and `replicated ls` subcommands.
ReplicationCommands DeclareReplicationCommands(CLI::App& app, ReplicationFlags& flags);

// Fills the node's replication options from the run flags (nothing without --replicate-to).
Status ApplyReplicationFlags(const ReplicationFlags& flags, NodeOptions& options);
// For `run --rescue`: the watcher, started; null without --rescue.
Result<std::unique_ptr<replication::RescueWatcher>> StartRescueWatcher(
    const ReplicationFlags& flags, const NodeOptions& options, metrics::Registry* registry);

int RunRescue(const ReplicationFlags& flags);
int RunReplicatedList(const ReplicationFlags& flags);

}  // namespace verdict::node
