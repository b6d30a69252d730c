#include "node/replication_commands.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include <spdlog/spdlog.h>

#include "common/bearer_token.h"
#include "proto/wire.h"
#include "replication/etcd_client.h"
#include "replication/keys.h"

namespace verdict::node {
namespace {

// verdict-node's exit status when results are left for later (as for --drain-on-exit).
constexpr int kExitResultsRemain = 75;
// verdict-node's exit status when the lobby refused results (they stay in etcd).
constexpr int kExitRefused = 3;

int Fail(const std::string& message) {
  std::fprintf(stderr, "verdict-node: %s\n", message.c_str());
  return 1;
}

Result<std::string> ReadFile(const std::string& path, const std::string& flag) {
  std::ifstream in(path);
  if (!in) return NotFoundError("cannot read " + path + " (" + flag + ")");
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

// node id -> the token a rescue delivers that node's results with, from a node tokens file
// (common/bearer_token.h); of a node named twice, the last line's.
Result<std::map<std::string, std::string>> ReadRescueTokens(const std::string& path,
                                                            const std::string& flag) {
  auto text = ReadFile(path, flag);
  if (!text.ok()) return text.status();
  auto lines = ParseNodeTokensFile(*text, path);
  if (!lines.ok()) return lines.status();
  std::map<std::string, std::string> tokens;
  for (NodeTokenLine& line : *lines) tokens[line.node_id] = std::move(line.token);
  return tokens;
}

void AddEtcdFlags(CLI::App* app, ReplicationFlags& flags) {
  const char* group = "etcd (replicated tier)";
  app->add_option("--etcd-ca", flags.etcd_ca,
                  "PEM file of the CAs of the etcd members' certificates (implies TLS)")
      ->group(group);
  app->add_option("--etcd-cert", flags.etcd_cert,
                  "PEM client certificate for etcd (implies TLS; with --etcd-key)")
      ->group(group);
  app->add_option("--etcd-key", flags.etcd_key, "PEM private key of --etcd-cert")->group(group);
  app->add_flag("--etcd-tls", flags.etcd_tls, "talk TLS to etcd, trusting the system's CAs")
      ->group(group);
  app->add_option("--etcd-user", flags.etcd_user, "etcd user (etcd auth enabled)")->group(group);
  app->add_option("--etcd-password-file", flags.etcd_password_file,
                  "file holding the password of --etcd-user")
      ->group(group);
  app->add_option("--etcd-prefix", flags.etcd_prefix, "prefix of every key verdict writes")
      ->capture_default_str()
      ->group(group);
}

Result<replication::EtcdOptions> EtcdOptionsFrom(const ReplicationFlags& flags,
                                                 const std::string& url) {
  replication::EtcdOptions etcd;
  VERDICT_RETURN_IF_ERROR(replication::ParseEtcdUrl(url, &etcd));
  etcd.tls = flags.etcd_tls;
  etcd.ca_file = flags.etcd_ca;
  etcd.cert_file = flags.etcd_cert;
  etcd.key_file = flags.etcd_key;
  etcd.user = flags.etcd_user;
  etcd.key_prefix = flags.etcd_prefix;
  if (!flags.etcd_password_file.empty()) {
    auto password = ReadFile(flags.etcd_password_file, "--etcd-password-file");
    if (!password.ok()) return password.status();
    std::string p = *password;
    while (!p.empty() && (p.back() == '\n' || p.back() == '\r')) p.pop_back();
    etcd.password = p;
  }
  if (!etcd.user.empty() && etcd.password.empty()) {
    return InvalidArgumentError("--etcd-user needs --etcd-password-file");
  }
  return etcd;
}

std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, ',');) {
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

}  // namespace

void DeclareReplicationRunFlags(CLI::App* run, ReplicationFlags& flags) {
  run->add_option("--replicate-to", flags.replicate_to,
                  "etcd://HOST:PORT[,HOST:PORT...]: copy every stored result to this etcd "
                  "cluster (deleted after the lobby's receipt), and keep a lease there")
      ->group("etcd (replicated tier)");
  AddEtcdFlags(run, flags);
  run->add_option("--lease-ttl", flags.lease_ttl_s,
                  "seconds of the node's etcd lease: a node silent this long may be rescued")
      ->capture_default_str()
      ->check(CLI::Range(2, 3600))
      ->group("etcd (replicated tier)");
  run->add_flag("--rescue", flags.rescue,
                "watch etcd for nodes whose lease expired and deliver their replicated results "
                "(needs --replicate-to and --rescue-tokens-file)")
      ->group("etcd (replicated tier)");
  run->add_option("--rescue-tokens-file", flags.rescue_tokens_file,
                  "'node_id token' lines: the token the lobby accepts for each node this one may "
                  "rescue")
      ->group("etcd (replicated tier)");
  run->add_option("--rescue-dir", flags.rescue_dir,
                  "where rescues keep their scratch outboxes (default: OUTBOX.rescue)")
      ->group("etcd (replicated tier)");
  run->add_option("--rescue-interval", flags.rescue_interval_s, "seconds between looks at etcd")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0))
      ->group("etcd (replicated tier)");
}

ReplicationCommands DeclareReplicationCommands(CLI::App& app, ReplicationFlags& flags) {
  ReplicationCommands c;
  c.rescue = app.add_subcommand(
      "rescue",
      "deliver a dead node's replicated results to the lobby under its identity, then delete "
      "them from etcd");
  c.rescue->add_option("--from", flags.from, "etcd://HOST:PORT[,HOST:PORT...]")->required();
  c.rescue->add_option("--node-id", flags.node_id, "the node to rescue")->required();
  c.rescue->add_option("--lobby", flags.lobby, "lobby URL(s), comma-separated")->required();
  c.rescue
      ->add_option("--tokens-file", flags.rescue_tokens_file,
                   "'node_id token' lines; the line of --node-id is used")
      ->required();
  c.rescue->add_option("--tls-ca", flags.tls_ca, "PEM CAs for an https lobby");
  c.rescue->add_option("--work-dir", flags.rescue_dir, "where the scratch outbox goes")->required();
  c.rescue->add_option("--deadline", flags.deadline_s, "seconds the rescue may take")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 86400.0));
  AddEtcdFlags(c.rescue, flags);

  CLI::App* replicated = app.add_subcommand("replicated", "inspect the replicated tier");
  replicated->require_subcommand(1);
  c.replicated_ls = replicated->add_subcommand(
      "ls", "a node's results held in etcd (for `verdict-lobby reconcile --replicated`)");
  c.replicated_ls->add_option("--from", flags.from, "etcd://HOST:PORT[,HOST:PORT...]")->required();
  c.replicated_ls->add_option("--node-id", flags.node_id, "the node")->required();
  c.replicated_ls->add_flag("--json", flags.json, "print JSON");
  AddEtcdFlags(c.replicated_ls, flags);
  return c;
}

Status ApplyReplicationFlags(const ReplicationFlags& flags, NodeOptions& options) {
  if (flags.replicate_to.empty()) {
    if (flags.rescue) return InvalidArgumentError("--rescue needs --replicate-to");
    return Status::Ok();
  }
  auto etcd = EtcdOptionsFrom(flags, flags.replicate_to);
  if (!etcd.ok()) return etcd.status();
  options.replication.etcd = *etcd;
  options.replication.lease_ttl = std::chrono::seconds(flags.lease_ttl_s);
  if (flags.rescue && flags.rescue_tokens_file.empty()) {
    return InvalidArgumentError("--rescue needs --rescue-tokens-file");
  }
  return Status::Ok();
}

Result<std::unique_ptr<replication::RescueWatcher>> StartRescueWatcher(
    const ReplicationFlags& flags, const NodeOptions& options, metrics::Registry* registry) {
  if (!flags.rescue) return std::unique_ptr<replication::RescueWatcher>();
  auto tokens = ReadRescueTokens(flags.rescue_tokens_file, "--rescue-tokens-file");
  if (!tokens.ok()) return tokens.status();
  replication::RescueWatcherOptions watch;
  watch.rescue.etcd = options.replication.etcd;
  watch.rescue.delivery = options.delivery;
  watch.rescue.delivery.lobby_urls = options.lobby_urls;
  watch.rescue.work_dir =
      flags.rescue_dir.empty() ? options.outbox_dir + ".rescue" : flags.rescue_dir;
  watch.self_node_id = options.node_id;
  watch.tokens = std::move(*tokens);
  watch.interval = std::chrono::milliseconds(static_cast<int64_t>(flags.rescue_interval_s * 1000));
  auto watcher = std::make_unique<replication::RescueWatcher>(std::move(watch), registry);
  VERDICT_RETURN_IF_ERROR(watcher->Start());
  return watcher;
}

int RunRescue(const ReplicationFlags& flags) {
  auto etcd = EtcdOptionsFrom(flags, flags.from);
  if (!etcd.ok()) return Fail(etcd.status().message());
  auto tokens = ReadRescueTokens(flags.rescue_tokens_file, "--tokens-file");
  if (!tokens.ok()) return Fail(tokens.status().message());
  auto token = tokens->find(flags.node_id);
  if (token == tokens->end()) {
    return Fail(flags.rescue_tokens_file + " has no token for node " + flags.node_id);
  }
  replication::RescueOptions options;
  options.etcd = *etcd;
  options.delivery.lobby_urls = SplitComma(flags.lobby);
  options.delivery.tls_ca_file = flags.tls_ca;
  options.work_dir = flags.rescue_dir;
  options.deadline = std::chrono::milliseconds(static_cast<int64_t>(flags.deadline_s * 1000));
  auto report = replication::RescueNode(flags.node_id, token->second, options);
  if (!report.ok()) return Fail(report.status().ToString());
  std::printf(
      "rescued node %s: %llu found in etcd, %llu delivered, %llu refused by the lobby, %llu left\n",
      flags.node_id.c_str(), static_cast<unsigned long long>(report->found),
      static_cast<unsigned long long>(report->delivered),
      static_cast<unsigned long long>(report->refused),
      static_cast<unsigned long long>(report->left));
  if (report->left > 0) return kExitResultsRemain;
  if (report->refused + report->undecodable > 0) return kExitRefused;
  return 0;
}

int RunReplicatedList(const ReplicationFlags& flags) {
  auto etcd = EtcdOptionsFrom(flags, flags.from);
  if (!etcd.ok()) return Fail(etcd.status().message());
  auto client = replication::EtcdClient::Create(*etcd);
  if (!client.ok()) return Fail(client.status().ToString());
  const std::string prefix = replication::NodeResultsPrefix(etcd->key_prefix, flags.node_id);
  const std::string end = replication::PrefixEnd(prefix);
  v1::OutboxListing doc;
  for (std::string from = prefix;;) {
    auto page = (*client)->Range(from, end, 256, /*keys_only=*/false);
    if (!page.ok()) return Fail(page.status().ToString());
    for (const replication::KeyValue& kv : page->kvs) {
      v1::BattleResult r;
      v1::OutboxListing::Record* record = doc.add_records();
      record->set_where("etcd");
      if (r.ParseFromString(kv.value)) {
        record->set_room_id(r.room_id());
        record->set_reason("replicated");
      } else {
        record->set_reason("undecodable");
        record->set_detail(wire::ValidUtf8(kv.key));
      }
    }
    if (!page->more || page->kvs.empty()) break;
    from = page->kvs.back().key + '\0';
  }
  doc.set_complete(true);
  if (flags.json) {
    auto json = wire::ToJson(doc);
    if (!json.ok()) return Fail(json.status().ToString());
    std::printf("%s\n", json->c_str());
    return 0;
  }
  std::printf("%-20s %s\n", "ROOM_ID", "STATE");
  for (const auto& r : doc.records()) {
    std::printf("%-20llu %s\n", static_cast<unsigned long long>(r.room_id()), r.reason().c_str());
  }
  std::printf("%d result(s) of node %s in etcd\n", doc.records_size(), flags.node_id.c_str());
  return 0;
}

}  // namespace verdict::node
