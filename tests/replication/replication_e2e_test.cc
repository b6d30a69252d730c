// The replicated tier end to end: real verdict-node processes replicating to a real
// three-member etcd cluster on loopback ports, a real lobby on PostgreSQL.
//  - Host loss: results stored and replicated while the lobby is down, the node SIGKILLed and its
//    outbox deleted; `reconcile` calls them replicated, a rescuer delivers each exactly once,
//    and nothing is left in etcd. Negative control: the same run without --replicate-to loses
//    them, and `reconcile` says so.
//  - The "dead" node comes back after `run --rescue` delivered its results: no double settlement.
//  - One etcd member killed mid-run: nothing lost, replication goes on.
//  - All members stopped: rooms keep being stored, the unreplicated gauge rises and drains when
//    they return.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "proto/wire.h"
#include "server/http_client.h"
#include "tests/lobby/lobby_fixture.h"
#include "tests/support/etcd_cluster.h"
#include "tests/support/http_client.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace verdict::testing {
namespace {

using namespace std::chrono_literals;
using server::BlockingHttpClient;
using server::ListenAddress;

class ReplicationEndToEndTest : public LobbyFixture {
 protected:
  void SetUp() override {
    LobbyFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    VERDICT_NEED_ETCD();
    etcd_ = EtcdCluster::Start(dir_.path());
    ASSERT_NE(etcd_, nullptr);
    std::ofstream(dir_.Sub("rescue-tokens")) << "# the rescuer's tokens\nnode-a token-a\n";
  }

  std::string Outbox(const std::string& node) { return dir_.Sub(node + ".outbox"); }
  std::string Socket(const std::string& node) { return dir_.Sub(node + ".sock"); }
  std::string LogOf(const std::string& node) { return dir_.Sub(node + ".log"); }

  // verdict-node run for `node` with an ingest socket, delivering to `lobby_port`.
  std::unique_ptr<ChildProcess> StartNode(const std::string& node, const std::string& token,
                                          uint16_t lobby_port,
                                          const std::vector<std::string>& extra) {
    std::vector<std::string> args = {NodeBinary(),
                                     "--log-level",
                                     "info",
                                     "run",
                                     "--node-id",
                                     node,
                                     "--outbox",
                                     Outbox(node),
                                     "--lobby",
                                     "http://127.0.0.1:" + std::to_string(lobby_port),
                                     "--token",
                                     token,
                                     "--ingest-listen",
                                     "unix:" + Socket(node),
                                     "--progress-ms",
                                     "60000"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto child = ChildProcess::Start(args, {}, LogOf(node));
    EXPECT_NE(child, nullptr);
    EXPECT_TRUE(WaitUntil([&] { return Get(node, "/readyz").first == 200; }, 30s))
        << Read(LogOf(node));
    return child;
  }

  std::pair<int, std::string> Get(const std::string& node, const std::string& path) {
    BlockingHttpClient client(ListenAddress::Parse("unix:" + Socket(node)).value(), 5s);
    auto reply = client.Call({"GET", path, "", "", "", ""});
    if (!reply.ok()) return {0, ""};
    return {reply->status, reply->body};
  }

  // Posts the result of `room` to the node's socket; the HTTP status (0: no answer).
  int Post(const std::string& node, uint64_t room, bool replicated) {
    BlockingHttpClient client(ListenAddress::Parse("unix:" + Socket(node)).value(), 30s);
    const std::string body = wire::EncodeBody(MakeResult(room), wire::BodyFormat::kJson).value();
    auto reply =
        client.Call({"POST", replicated ? "/v1/results?durability=replicated" : "/v1/results",
                     "application/json", "", "", body});
    return reply.ok() ? reply->status : 0;
  }

  double Metric(const std::string& node, const std::string& series) {
    return MetricValue(Get(node, "/metrics").second, series, -1);
  }

  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }

  // `verdict-node replicated ls --json` of `node`, written to a file; the number of records.
  int ListReplicated(const std::string& node, const std::string& file) {
    const CommandResult ls = RunCommand(
        {NodeBinary(), "replicated", "ls", "--from", etcd_->url(), "--node-id", node, "--json"});
    EXPECT_EQ(ls.exit_code, 0) << ls.out;
    std::ofstream(file) << ls.out;
    v1::OutboxListing listing;
    std::string error;
    EXPECT_TRUE(wire::DecodeBody(ls.out, wire::BodyFormat::kJson, &listing, &error)) << error;
    return listing.records_size();
  }

  // verdict-lobby reconcile, with the listings given; its JSON report and exit status.
  std::pair<v1::Reconciliation, int> Reconcile(const std::vector<std::string>& listings) {
    std::vector<std::string> args = {LobbyBinary(),  "--db", db_->conninfo(), "reconcile",
                                     "--older-than", "0",    "--json"};
    args.insert(args.end(), listings.begin(), listings.end());
    const CommandResult r = RunCommand(args);
    v1::Reconciliation report;
    std::string error;
    EXPECT_TRUE(wire::DecodeBody(r.out, wire::BodyFormat::kJson, &report, &error))
        << error << " in " << r.out;
    return {report, r.exit_code};
  }

  static int Count(const v1::Reconciliation& r, const std::string& state) {
    auto it = r.counts().find(state);
    return it == r.counts().end() ? 0 : static_cast<int>(it->second);
  }

  // Rooms in [first, first + n) without exactly one receipt and one match (one query: the
  // tests poll it).
  std::vector<uint64_t> NotSettledOnce(uint64_t first, uint64_t n) {
    const std::string rooms =
        Q("SELECT coalesce(string_agg(r::text, ','), '') FROM generate_series(" +
          std::to_string(first) + ", " + std::to_string(first + n - 1) +
          ") r WHERE (SELECT count(*) FROM settlement_receipts s WHERE s.room_id = r) <> 1 OR "
          "(SELECT count(*) FROM matches m WHERE m.room_id = r) <> 1");
    std::vector<uint64_t> wrong;
    std::stringstream in(rooms);
    for (std::string room; std::getline(in, room, ',');) wrong.push_back(std::stoull(room));
    return wrong;
  }

  // Allocates the rooms with a lobby that is stopped again: the lobby is down from here on.
  void AllocateWhileUp(uint64_t first, uint64_t n) {
    auto lobby = StartLobby();
    ASSERT_NE(lobby, nullptr);
    for (uint64_t room = first; room < first + n; ++room) MustAllocate(lobby->port(), room);
    lobby_port_ = lobby->port();  // down, and stays so until a test starts a lobby again
  }

  // Stores and replicates `n` results on a node while the lobby is down, and SIGKILLs the node.
  void StoreThenKill(uint64_t first, uint64_t n, bool replicate) {
    AllocateWhileUp(first, n);
    std::vector<std::string> extra;
    if (replicate) extra = {"--replicate-to", etcd_->url()};
    auto node = StartNode("node-a", "token-a", lobby_port_, extra);
    ASSERT_NE(node, nullptr);
    for (uint64_t room = first; room < first + n; ++room) {
      ASSERT_EQ(Post("node-a", room, replicate), 201) << "room " << room << Read(LogOf("node-a"));
    }
    ::kill(node->pid(), SIGKILL);
    node->WaitFor(10s);
  }

  TempDir dir_;
  std::unique_ptr<EtcdCluster> etcd_;
  uint16_t lobby_port_ = 0;
};

constexpr uint64_t kFirst = 5000;
constexpr uint64_t kRooms = 40;

TEST_F(ReplicationEndToEndTest, HostLossIsRescuedAndEachResultSettlesOnce) {
  StoreThenKill(kFirst, kRooms, /*replicate=*/true);
  std::filesystem::remove_all(Outbox("node-a"));  // the host and its disk are gone
  std::ofstream(dir_.Sub("empty.json")) << "{\"records\": [], \"complete\": true}";
  ASSERT_EQ(ListReplicated("node-a", dir_.Sub("etcd.json")), static_cast<int>(kRooms));

  auto [before, before_exit] = Reconcile({"--outbox", "node-a=" + dir_.Sub("empty.json"),
                                          "--replicated", "node-a=" + dir_.Sub("etcd.json")});
  EXPECT_EQ(before_exit, 0);
  EXPECT_EQ(Count(before, "replicated"), static_cast<int>(kRooms));
  EXPECT_EQ(Count(before, "lost"), 0);

  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  const CommandResult rescue =
      RunCommand({NodeBinary(), "rescue", "--from", etcd_->url(), "--node-id", "node-a", "--lobby",
                  "http://127.0.0.1:" + std::to_string(lobby->port()), "--tokens-file",
                  dir_.Sub("rescue-tokens"), "--work-dir", dir_.Sub("rescuer")});
  ASSERT_EQ(rescue.exit_code, 0) << rescue.out;
  EXPECT_NE(rescue.out.find("40 delivered"), std::string::npos) << rescue.out;
  EXPECT_EQ(NotSettledOnce(kFirst, kRooms), std::vector<uint64_t>{});
  EXPECT_EQ(ListReplicated("node-a", dir_.Sub("after.json")), 0) << "copies left after receipts";

  auto [after, after_exit] = Reconcile({"--outbox", "node-a=" + dir_.Sub("empty.json")});
  EXPECT_EQ(after_exit, 0);
  EXPECT_EQ(after.pending_size(), 0);
}

// Negative control: without --replicate-to the same host loss loses every result.
TEST_F(ReplicationEndToEndTest, WithoutReplicationHostLossLosesResults) {
  StoreThenKill(kFirst, kRooms, /*replicate=*/false);
  std::filesystem::remove_all(Outbox("node-a"));
  std::ofstream(dir_.Sub("empty.json")) << "{\"records\": [], \"complete\": true}";
  ASSERT_EQ(ListReplicated("node-a", dir_.Sub("etcd.json")), 0);
  auto [report, exit_code] = Reconcile({"--outbox", "node-a=" + dir_.Sub("empty.json"),
                                        "--replicated", "node-a=" + dir_.Sub("etcd.json")});
  EXPECT_EQ(exit_code, 3) << "reconcile did not report the lost rooms";
  EXPECT_EQ(Count(report, "lost"), static_cast<int>(kRooms));
}

// `run --rescue` on another node delivers the dead node's results once its lease expires; the
// dead node then comes back on its outbox and redelivers everything: each answered duplicate.
TEST_F(ReplicationEndToEndTest, DeadNodeComingBackAfterItsRescueSettlesNothingTwice) {
  AllocateWhileUp(kFirst, kRooms);
  auto node = StartNode("node-a", "token-a", lobby_port_,
                        {"--replicate-to", etcd_->url(), "--lease-ttl", "2"});
  ASSERT_NE(node, nullptr);
  for (uint64_t room = kFirst; room < kFirst + kRooms; ++room) {
    ASSERT_EQ(Post("node-a", room, true), 201) << room;
  }
  ::kill(node->pid(), SIGKILL);
  node->WaitFor(10s);

  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  auto rescuer = StartNode("node-b", "token-b", lobby->port(),
                           {"--replicate-to", etcd_->url(), "--rescue", "--rescue-tokens-file",
                            dir_.Sub("rescue-tokens"), "--rescue-interval", "0.2"});
  ASSERT_NE(rescuer, nullptr);
  ASSERT_TRUE(WaitUntil([&] { return Q("SELECT count(*) FROM settlement_receipts") == "40"; }, 60s))
      << Read(LogOf("node-b"));
  ASSERT_TRUE(WaitUntil([&] { return ListReplicated("node-a", dir_.Sub("ls.json")) == 0; }, 30s));
  // Counted once the rescue has returned, just after its last delete.
  EXPECT_TRUE(
      WaitUntil([&] { return Metric("node-b", "verdict_node_rescued_results_total") == 40; }, 30s));

  // The dead node returns with its outbox: it delivers all 40 again.
  node = StartNode("node-a", "token-a", lobby->port(), {"--replicate-to", etcd_->url()});
  ASSERT_NE(node, nullptr);
  ASSERT_TRUE(WaitUntil(
      [&] { return Metric("node-a", "verdict_node_delivered_total{result=\"duplicate\"}") >= 40; },
      60s))
      << Get("node-a", "/metrics").second;
  EXPECT_EQ(NotSettledOnce(kFirst, kRooms), std::vector<uint64_t>{});
  EXPECT_EQ(Q("SELECT count(*) FROM matches"), "40");
  EXPECT_TRUE(WaitUntil([&] { return ListReplicated("node-a", dir_.Sub("ls.json")) == 0; }, 30s))
      << "the returned node's acks did not delete its copies";
}

TEST_F(ReplicationEndToEndTest, OneMemberKilledMidRunLosesNothingAndReplicationGoesOn) {
  AllocateWhileUp(kFirst, kRooms);
  auto node = StartNode("node-a", "token-a", lobby_port_, {"--replicate-to", etcd_->url()});
  ASSERT_NE(node, nullptr);
  for (uint64_t room = kFirst; room < kFirst + kRooms / 2; ++room) {
    ASSERT_EQ(Post("node-a", room, true), 201) << room;
  }
  etcd_->Kill(0);
  for (uint64_t room = kFirst + kRooms / 2; room < kFirst + kRooms; ++room) {
    ASSERT_EQ(Post("node-a", room, true), 201) << room << Read(LogOf("node-a"));
  }
  EXPECT_EQ(ListReplicated("node-a", dir_.Sub("ls.json")), static_cast<int>(kRooms));
  EXPECT_EQ(Metric("node-a", "verdict_node_replication_unreplicated_records"), 0);

  // The lobby returns: every result settles once, and every copy goes with its receipt.
  auto lobby = StartLobby();
  ASSERT_NE(lobby, nullptr);
  node->Terminate();
  node = StartNode("node-a", "token-a", lobby->port(), {"--replicate-to", etcd_->url()});
  ASSERT_TRUE(WaitUntil([&] { return NotSettledOnce(kFirst, kRooms).empty(); }, 60s));
  EXPECT_TRUE(WaitUntil([&] { return ListReplicated("node-a", dir_.Sub("ls.json")) == 0; }, 30s));
}

TEST_F(ReplicationEndToEndTest, AllMembersStoppedRoomsKeepFinishingAndTheGaugeDrainsOnReturn) {
  AllocateWhileUp(kFirst, kRooms);
  auto node = StartNode("node-a", "token-a", lobby_port_, {"--replicate-to", etcd_->url()});
  ASSERT_NE(node, nullptr);
  for (int i = 0; i < etcd_->size(); ++i) etcd_->Kill(i);
  for (uint64_t room = kFirst; room < kFirst + kRooms; ++room) {
    ASSERT_EQ(Post("node-a", room, false), 201) << room;  // stored: never held back
  }
  EXPECT_EQ(Metric("node-a", "verdict_node_replication_unreplicated_records"),
            static_cast<double>(kRooms));
  EXPECT_TRUE(WaitUntil(
      [&] { return Metric("node-a", "verdict_node_replication_etcd_unavailable") == 1; }, 30s));

  for (int i = 0; i < etcd_->size(); ++i) ASSERT_TRUE(etcd_->Restart(i));
  ASSERT_TRUE(WaitUntil([&] { return etcd_->Healthy(); }, 30s));
  EXPECT_TRUE(WaitUntil(
      [&] { return Metric("node-a", "verdict_node_replication_unreplicated_records") == 0; }, 60s))
      << Read(LogOf("node-a"));
  EXPECT_EQ(Metric("node-a", "verdict_node_replication_etcd_unavailable"), 0);
  EXPECT_EQ(ListReplicated("node-a", dir_.Sub("ls.json")), static_cast<int>(kRooms));
}

}  // namespace
}  // namespace verdict::testing
