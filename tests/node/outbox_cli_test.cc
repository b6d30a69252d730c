// The operator's outbox commands, run as the real verdict-node on real outboxes: redrive needs a
// room or --all; ls shows undecodable records as such, escapes what a lobby wrote, says whether
// a listing is complete, and with stats reports a damaged shard instead of failing; ls, show
// and redrive stay within 64 MiB over a 110 MiB quarantine; enqueue adopts an existing outbox's
// shard count, and enqueues racing to create an outbox all store theirs; open errors name their
// cause (a permission, a read-only file system, damage); salvage copies a damaged outbox, names
// what it lost, and never writes inside it.
#include <fcntl.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <span>
#include <thread>

#include "proto/wire.h"
#include "storage/outbox.h"
#include "tests/support/outbox_images.h"
#include "tests/support/process.h"
#include "tests/support/results.h"
#include "tests/support/temp_dir.h"

namespace verdict {
namespace {

namespace fs = std::filesystem;
using testing::MakeResult;
using testing::NodeBinary;
using testing::TempDir;

constexpr uint32_t kShards = 4;

// Runs verdict-node with `args`, standard error merged into the output.
testing::CommandResult Node(const std::vector<std::string>& args,
                            const std::vector<std::string>& prefix = {}) {
  std::vector<std::string> argv = {"/bin/sh", "-c", "exec \"$@\" 2>&1", "sh"};
  argv.insert(argv.end(), prefix.begin(), prefix.end());
  argv.push_back(NodeBinary());
  argv.insert(argv.end(), args.begin(), args.end());
  return testing::RunCommand(argv);
}

testing::CommandResult Outbox(const std::string& dir, const std::vector<std::string>& args) {
  std::vector<std::string> all = {"outbox", "--outbox", dir};
  all.insert(all.end(), args.begin(), args.end());
  return Node(all);
}

// The standard output alone of `verdict-node outbox --outbox DIR ARGS`: a JSON document.
std::string OutboxJson(const std::string& dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {NodeBinary(), "outbox", "--outbox", dir};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto r = testing::RunCommand(argv);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  return r.out;
}

std::unique_ptr<storage::Outbox> MustOpen(const std::string& dir) {
  auto opened = storage::OpenOutbox(dir, {.shard_count = kShards});
  EXPECT_TRUE(opened.ok()) << opened.status().ToString();
  return opened.ok() ? std::move(opened).value() : nullptr;
}

// Dead-letters the records of `rooms`, with `detail` as the lobby's message.
void DeadLetter(storage::Outbox& outbox, const std::set<uint64_t>& rooms,
                const std::string& detail = "unknown room") {
  for (uint32_t s = 0; s < outbox.shard_count(); ++s) {
    auto records = outbox.ReadShard(s, 0, 1000);
    ASSERT_TRUE(records.ok());
    for (const auto& r : *records) {
      if (rooms.count(r.result.room_id())) {
        ASSERT_TRUE(outbox.DeadLetter(r, "ROOM_UNKNOWN", detail).ok());
      }
    }
  }
}

uint64_t DeadLettered(const std::string& dir) {
  auto outbox = storage::OpenOutbox(dir, {.read_only = true});
  EXPECT_TRUE(outbox.ok()) << outbox.status().ToString();
  return outbox.ok() ? (*outbox)->Stats()->dead_lettered : 0;
}

template <typename Message>
Message ParseJson(const std::string& json) {
  // As `verdict-lobby reconcile` reads a listing: any number of records (a request's limits,
  // wire::DecodeLimits, are not a listing's).
  Message message;
  const auto parsed = google::protobuf::util::JsonStringToMessage(json, &message);
  EXPECT_TRUE(parsed.ok()) << parsed.message() << " in " << json;
  return message;
}

// `redrive --from dead-letter 0` used to redrive every room: 0 meant "no room given".
TEST(OutboxCliTest, RedriveNeedsARoomOrAll) {
  TempDir dir;
  const std::string outbox = dir.Sub("outbox");
  {
    auto box = MustOpen(outbox);
    testing::EnqueueRooms(*box, 1, 3);
    DeadLetter(*box, {1, 2, 3});
  }
  auto r = Outbox(outbox, {"redrive", "--from", "dead-letter", "0"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("0 is no room"), std::string::npos) << r.out;
  r = Outbox(outbox, {"redrive", "--from", "dead-letter"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("--all"), std::string::npos) << r.out;
  EXPECT_EQ(DeadLettered(outbox), 3u) << "a refused redrive moved records";

  r = Outbox(outbox, {"redrive", "--from", "dead-letter", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("1 moved"), std::string::npos) << r.out;
  r = Outbox(outbox, {"redrive", "--from", "dead-letter", "--all"});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("2 moved"), std::string::npos) << r.out;
  EXPECT_EQ(DeadLettered(outbox), 0u);
}

// ls printed an undecodable record as room 0, and the lobby's detail raw: escape sequences and
// newlines reached the terminal and could forge listing lines.
TEST(OutboxCliTest, ListShowsUndecodableRecordsAndEscapesWhatItPrints) {
  TempDir dir;
  const std::string outbox = dir.Sub("outbox");
  const std::string forged =
      "bad\x1b[2J\x1b]0;owned\x07\n42                   shard-000             7  pending\xc2\x9b"
      "31m \\ \xff";
  {
    auto box = MustOpen(outbox);
    testing::EnqueueRooms(*box, 1, 2);
    DeadLetter(*box, {1}, forged);
  }
  {
    // Garbage under a shard key, which a writable read moves to quarantine as undecodable.
    rocksdb::DBOptions options;
    std::vector<std::string> names;
    ASSERT_TRUE(rocksdb::DB::ListColumnFamilies(options, outbox, &names).ok());
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
    for (const auto& n : names) cfs.emplace_back(n, rocksdb::ColumnFamilyOptions());
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, outbox, cfs, &handles, &db).ok());
    const size_t shard0 = std::find(names.begin(), names.end(), "shard-000") - names.begin();
    rocksdb::WriteOptions sync;
    sync.sync = true;
    ASSERT_TRUE(db->Put(sync, handles[shard0], std::string(7, '\0') + '\x63', "garbage").ok());
    for (auto* h : handles) ASSERT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
    delete db;
    auto box = MustOpen(outbox);
    ASSERT_TRUE(box->ReadShard(0, 0, 10).ok());
    ASSERT_EQ(box->Stats()->quarantined, 1u);
  }

  const auto ls = Outbox(outbox, {"ls"});
  ASSERT_EQ(ls.exit_code, 0) << ls.out;
  EXPECT_EQ(ls.out.find('\x1b'), std::string::npos) << ls.out;
  EXPECT_EQ(ls.out.find("\xc2\x9b"), std::string::npos) << ls.out;
  EXPECT_EQ(ls.out.find('\x07'), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("bad\\x1b[2J\\x1b]0;owned\\x07\\n42 "), std::string::npos) << ls.out;
  // A byte that is not UTF-8 was stored as U+FFFD, so the record stays readable.
  EXPECT_NE(ls.out.find("\\u009b31m \\\\ \xef\xbf\xbd"), std::string::npos) << ls.out;
  // Header, one pending, one dead-lettered, one quarantined: nothing forged a fifth line.
  EXPECT_EQ(std::count(ls.out.begin(), ls.out.end(), '\n'), 4) << ls.out;
  EXPECT_NE(ls.out.find("\nundecodable          quarantine"), std::string::npos) << ls.out;
  EXPECT_EQ(ls.out.find("\n0 "), std::string::npos) << ls.out;
}

// `ls --json --limit N` on exactly N records said the listing was cut short, so reconciliation
// would refuse a complete listing.
TEST(OutboxCliTest, ListingOfExactlyLimitRecordsIsComplete) {
  TempDir dir;
  const std::string outbox = dir.Sub("outbox");
  testing::EnqueueRooms(*MustOpen(outbox), 1, 3);
  auto ls = Outbox(outbox, {"ls", "--json", "--limit", "3"});
  ASSERT_EQ(ls.exit_code, 0) << ls.out;
  auto listing = ParseJson<v1::OutboxListing>(ls.out);
  EXPECT_EQ(listing.records_size(), 3);
  EXPECT_TRUE(listing.complete()) << ls.out;
  ls = Outbox(outbox, {"ls", "--json", "--limit", "2"});
  listing = ParseJson<v1::OutboxListing>(ls.out);
  EXPECT_EQ(listing.records_size(), 2);
  EXPECT_FALSE(listing.complete()) << ls.out;
  EXPECT_EQ(Outbox(outbox, {"ls", "--limit", "3"}).out.find("first 3 shown"), std::string::npos);
  EXPECT_NE(Outbox(outbox, {"ls", "--limit", "2"}).out.find("first 2 shown"), std::string::npos);
  ls = Outbox(dir.Sub("empty-listing"), {"ls", "--json"});
  EXPECT_NE(ls.exit_code, 0) << "no outbox there: " << ls.out;
}

// `enqueue` without --shards failed on an existing outbox of another count, though its help
// says the flag applies only to a new outbox.
TEST(OutboxCliTest, EnqueueWithoutShardsKeepsTheExistingCount) {
  TempDir dir;
  const std::string outbox = dir.Sub("outbox");
  const std::string file = dir.Sub("results.jsonl");
  {
    std::ofstream out(file);
    for (uint64_t room : {1, 2}) {
      out << wire::EncodeBody(MakeResult(room), wire::BodyFormat::kJson).value() << "\n";
    }
  }
  auto r = Node({"enqueue", "--outbox", outbox, "--shards", "4", file});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::ofstream(file) << wire::EncodeBody(MakeResult(3), wire::BodyFormat::kJson).value();
  r = Node({"enqueue", "--outbox", outbox, file});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("1 new"), std::string::npos) << r.out;
  r = Node({"enqueue", "--outbox", outbox, "--shards", "8", file});
  EXPECT_NE(r.exit_code, 0) << "an explicit --shards that differs is still refused";
  EXPECT_NE(r.out.find("created with 4 shards"), std::string::npos) << r.out;
  auto stats = ParseJson<v1::OutboxStats>(OutboxJson(outbox, {"stats", "--json"}));
  EXPECT_EQ(stats.shards_size(), 4);
  EXPECT_EQ(stats.records(), 3);
}

// A result naming no winner is refused by `enqueue` as by the ingest endpoints (issue 49, item 1:
// it was stored, delivered as protobuf and settled as a draw); the rest of the file is stored.
TEST(OutboxCliTest, EnqueueRefusesAResultNamingNoWinner) {
  TempDir dir;
  const std::string outbox = dir.Sub("outbox");
  const std::string file = dir.Sub("results.jsonl");
  v1::BattleResult unnamed = MakeResult(2);
  unnamed.clear_winner_team();
  {
    std::ofstream out(file);
    out << wire::EncodeBody(MakeResult(1), wire::BodyFormat::kJson).value() << "\n";
    out << wire::EncodeBody(unnamed, wire::BodyFormat::kJson).value() << "\n";
  }
  const auto r = Node({"enqueue", "--outbox", outbox, "--shards", "4", file});
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("room 2: INVALID_ARGUMENT"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("winner_team"), std::string::npos) << r.out;
  auto stats = ParseJson<v1::OutboxStats>(OutboxJson(outbox, {"stats", "--json"}));
  EXPECT_EQ(stats.records(), 1) << "only the result with a winner is stored";
}

// Enqueues started together on a directory with no outbox yet: one creates it, the others wait
// for it (they found half of an outbox and called it damaged, DATA_LOSS, storing nothing).
TEST(OutboxCliTest, ConcurrentEnqueuesIntoANewOutboxAllStoreTheirResults) {
  constexpr int kEnqueues = 8;
  TempDir dir;
  const std::string outbox = dir.Sub("outbox");
  std::vector<std::thread> threads;
  std::vector<testing::CommandResult> results(kEnqueues);
  for (int i = 0; i < kEnqueues; ++i) {
    const std::string file = dir.Sub("r" + std::to_string(i) + ".json");
    std::ofstream(file) << wire::EncodeBody(MakeResult(100 + i), wire::BodyFormat::kJson).value();
    threads.emplace_back([&, i, file] {
      results[i] = Node({"enqueue", "--outbox", outbox, file});
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(r.out.find("DATA_LOSS"), std::string::npos) << r.out;
  }
  auto stats = ParseJson<v1::OutboxStats>(OutboxJson(outbox, {"stats", "--json"}));
  EXPECT_EQ(stats.records(), kEnqueues);
}

// Salvage never writes to the outbox it reads: a target inside it (by name, or through a link)
// is refused and nothing is made there.
TEST(OutboxCliTest, SalvageRefusesATargetInsideTheOutboxItReads) {
  TempDir dir;
  const std::string outbox = dir.Sub("outbox");
  testing::MakeCrashImage(outbox, 100, kShards);
  testing::DamageLogInTheMiddle(outbox);
  const auto listing = [&] {
    std::set<std::string> names;
    for (const auto& e : fs::recursive_directory_iterator(outbox)) names.insert(e.path().string());
    return names;
  };
  const std::set<std::string> before = listing();
  fs::create_directory_symlink(outbox, dir.Sub("link"));
  for (const std::string& to : {outbox + "/new", outbox + "/a/b", dir.Sub("link") + "/new"}) {
    auto r = Outbox(outbox, {"salvage", "--to", to});
    EXPECT_EQ(r.exit_code, 1) << to << ": " << r.out;
    EXPECT_NE(r.out.find("is inside"), std::string::npos) << r.out;
  }
  EXPECT_EQ(listing(), before) << "salvage wrote inside the damaged outbox";
  // Beside it is fine.
  auto r = Outbox(outbox, {"salvage", "--to", dir.Sub("outbox-salvaged")});
  EXPECT_EQ(r.exit_code, 3) << r.out;
}

// `stats` and `ls` failed whole ("DATA_LOSS: scanning shard-000") on one bad block in one
// shard's table file.
TEST(OutboxCliTest, StatsAndListReportADamagedShardAndShowTheRest) {
  TempDir dir;
  const std::string outbox = dir.Sub("outbox");
  testing::MakeClosedOutbox(outbox, 400, kShards);
  testing::FlipBytes(testing::TableFileOf(outbox, 1), 1000, 4);

  auto stats = Outbox(outbox, {"stats"});
  ASSERT_EQ(stats.exit_code, 0) << stats.out;
  EXPECT_NE(stats.out.find("DAMAGED: shard-001"), std::string::npos) << stats.out;
  const auto counted = ParseJson<v1::OutboxStats>(OutboxJson(outbox, {"stats", "--json"}));
  EXPECT_EQ(counted.damaged_shards(), 1);
  ASSERT_EQ(counted.shards_size(), 4);
  EXPECT_NE(counted.shards(1).damage().find("shard-001"), std::string::npos);
  EXPECT_EQ(counted.shards(0).damage(), "");

  const auto listing =
      ParseJson<v1::OutboxListing>(OutboxJson(outbox, {"ls", "--json", "--limit", "100000"}));
  EXPECT_FALSE(listing.complete()) << "a listing without a shard is not complete";
  ASSERT_EQ(listing.damaged_size(), 1);
  EXPECT_NE(listing.damaged(0).find("shard-001"), std::string::npos);
  int from_others = 0;
  for (const auto& r : listing.records()) {
    EXPECT_NE(r.where(), "shard-001");
    ++from_others;
  }
  EXPECT_GT(from_others, 250);
  const auto text = Outbox(outbox, {"ls", "--limit", "100000"});
  EXPECT_NE(text.out.find("(not listed: shard-001"), std::string::npos) << text.out;
}

// The peak resident memory of verdict-node run with `args` (its output discarded), in MiB.
double PeakRssMiB(const std::vector<std::string>& args, int* exit_code) {
  std::vector<std::string> argv = {NodeBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> raw;
  for (auto& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, STDOUT_FILENO);
    ::execv(raw[0], raw.data());
    ::_exit(127);
  }
  int status = 0;
  struct rusage usage {};
  ::wait4(pid, &status, 0, &usage);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return usage.ru_maxrss / 1024.0;  // kilobytes on Linux
}

// `n` random letters (which RocksDB's compression cannot shrink much).
std::string Incompressible(size_t n, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::string text(n, ' ');
  for (size_t i = 0; i < n; i += 8) {
    uint64_t bits = random();
    for (size_t j = i; j < i + 8 && j < n; ++j, bits >>= 8) {
      text[j] = static_cast<char>('a' + (bits & 0xff) % 26);
    }
  }
  return text;
}

// ls, show and redrive held whole column families in memory whatever --limit said: 130 MiB for
// `ls --limit 1` over 110 MiB of quarantine. They read a page at a time now. Here 104 MiB of
// quarantine (52 results of 2 MiB that RocksDB cannot compress), read by `ls --limit 1`, a
// whole listing, `show` and `redrive --all`.
TEST(OutboxCliTest, ListShowAndRedriveStayWithin64MiBOverALargeQuarantine) {
  TempDir dir;
  const std::string outbox = dir.Sub("outbox");
  constexpr int kBig = 52;  // results of 2 MiB, refused as oversize and kept in quarantine
  {
    auto box = MustOpen(outbox);
    for (uint64_t room = 1; room <= kBig; ++room) {
      auto big = MakeResult(room);
      big.set_abort_reason(Incompressible(size_t{2} << 20, room));
      auto out = box->Enqueue(std::span(&big, 1));
      ASSERT_TRUE(out.ok());
      ASSERT_EQ(out->front().status.code(), StatusCode::kResourceExhausted);
    }
    testing::EnqueueRooms(*box, 1000, 3);
    DeadLetter(*box, {1000});
    ASSERT_EQ(box->Stats()->quarantined, uint64_t{kBig});
  }
  uint64_t bytes = 0;
  for (const auto& e : fs::directory_iterator(outbox)) bytes += e.file_size();
  ASSERT_GT(bytes, uint64_t{100} << 20) << "the quarantine should hold over 100 MiB";

  constexpr double kLimitMiB = 64;
  int code = 0;
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"ls", "--limit", "1"},
                                             {"ls", "--json", "--limit", "100000000"},
                                             {"show", "7"},
                                             {"redrive", "--from", "quarantine", "--all"},
                                             {"redrive", "--from", "dead-letter", "--all"}}) {
    std::vector<std::string> full = {"outbox", "--outbox", outbox};
    full.insert(full.end(), args.begin(), args.end());
    const double rss = PeakRssMiB(full, &code);
    EXPECT_EQ(code, 0) << args[0];
    EXPECT_LE(rss, kLimitMiB) << "peak RSS of `outbox " << args[0] << " " << args[1] << "`";
    std::printf("peak RSS of `outbox %s %s %s`: %.1f MiB\n", args[0].c_str(), args[1].c_str(),
                args.size() > 2 ? args[2].c_str() : "", rss);
  }
  EXPECT_EQ(DeadLettered(outbox), 0u) << "the dead-lettered one was redriven";
}

// A permission error was reported as "in use by another process". As root (as CI runs), the
// commands run as `nobody`; otherwise the outbox's LOCK file is made read-only to its owner.
TEST(OutboxCliTest, PermissionErrorIsNotTakenForAnotherProcess) {
  TempDir dir;
  const std::string outbox = dir.Sub("outbox");
  const std::string file = dir.Sub("result.json");
  std::ofstream(file) << wire::EncodeBody(MakeResult(1), wire::BodyFormat::kJson).value();
  testing::MakeClosedOutbox(outbox, 10, kShards);
  std::vector<std::string> as;
  if (::geteuid() == 0) {
    as = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"};
    fs::permissions(dir.path(), fs::perms::owner_all | fs::perms::group_read |
                                    fs::perms::group_exec | fs::perms::others_read |
                                    fs::perms::others_exec);
    fs::permissions(file, fs::perms::others_read, fs::perm_options::add);
    // The directory is not nobody's: the check before RocksDB refuses.
    auto r = Node({"enqueue", "--outbox", outbox, file}, as);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("permission denied"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("uid 65534"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("in use"), std::string::npos) << r.out;
    // Reading it is allowed.
    auto stats = Node({"outbox", "--outbox", outbox, "stats"}, as);
    EXPECT_EQ(stats.exit_code, 0) << stats.out;
    // The directory open to all, its files not: RocksDB's own error, about the LOCK file.
    fs::permissions(outbox, fs::perms::all);
  } else {
    fs::permissions(outbox + "/LOCK", fs::perms::owner_read);
  }
  auto r = Node({"enqueue", "--outbox", outbox, file}, as);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("ermission denied"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("in use by another process"), std::string::npos) << r.out;
}

// A read-only file system was reported as "in use by another process". The outbox is made
// read-only with a bind mount in a mount namespace of the command's own (unshare).
TEST(OutboxCliTest, ReadOnlyFileSystemIsNotTakenForAnotherProcess) {
  TempDir dir;
  const std::string outbox = dir.Sub("outbox");
  const std::string file = dir.Sub("result.json");
  std::ofstream(file) << wire::EncodeBody(MakeResult(1), wire::BodyFormat::kJson).value();
  testing::MakeClosedOutbox(outbox, 10, kShards);
  // unshare(1), through the shell that finds it.
  const std::vector<std::string> unshare = {"/bin/sh", "-c", "exec unshare \"$@\"", "sh",
                                            ::geteuid() == 0 ? "-m" : "-Urm"};
  auto in_read_only_mount = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = unshare;
    for (const char* part :
         {"/bin/sh", "-c",
          "mount --bind \"$1\" \"$1\" && mount -o remount,ro,bind \"$1\" || exit 99; shift; "
          "exec \"$@\" 2>&1",
          "sh"}) {
      argv.push_back(part);
    }
    argv.push_back(outbox);
    argv.push_back(NodeBinary());
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::RunCommand(argv);
  };
  auto r = in_read_only_mount({"enqueue", "--outbox", outbox, file});
  if (r.exit_code == 99 || r.out.find("unshare failed") != std::string::npos) {
    GTEST_SKIP() << "cannot make a read-only mount here (unshare or mount refused): " << r.out;
  }
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("read-only file system"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("in use"), std::string::npos) << r.out;
  auto stats = in_read_only_mount({"outbox", "--outbox", outbox, "stats"});
  EXPECT_EQ(stats.exit_code, 0) << "reading works on a read-only file system: " << stats.out;
}

// The first report: bytes flipped a third of the way into the log of an outbox holding
// 20,000 stored results, and `run` started with "6000 result(s) waiting".
TEST(OutboxCliTest, RunRefusesAnOutboxWhoseLogIsDamagedInTheMiddle) {
  TempDir dir;
  const std::string outbox = dir.Sub("outbox");
  testing::MakeCrashImage(outbox, 20'000, 16);
  testing::DamageLogInTheMiddle(outbox);
  auto r = Node({"run", "--node-id", "node-a", "--outbox", outbox, "--lobby", "http://127.0.0.1:1",
                 "--token", "token-a"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("DATA_LOSS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(testing::OnlyFile(outbox, ".log")), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("byte offset"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("waiting"), std::string::npos) << r.out;
}

TEST(OutboxCliTest, SalvageCopiesADamagedOutboxAndNamesWhatItLost) {
  TempDir dir;
  const std::string outbox = dir.Sub("outbox");
  testing::MakeCrashImage(outbox, 20'000, kShards);
  testing::DamageLogInTheMiddle(outbox);
  auto r = Outbox(outbox, {"salvage", "--to", dir.Sub("salvaged")});
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_NE(r.out.find("salvage: reading shard-000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("19900 pending"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("damaged: " + testing::OnlyFile(outbox, ".log")), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("could not be read: 100 stored result(s)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nlost rooms: "), std::string::npos) << r.out;
  auto stats = ParseJson<v1::OutboxStats>(OutboxJson(dir.Sub("salvaged"), {"stats", "--json"}));
  EXPECT_EQ(stats.records(), 19'900);

  // An intact outbox salvages whole; the target must be new.
  r = Outbox(dir.Sub("salvaged"), {"salvage", "--to", dir.Sub("again")});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("nothing stored was lost"), std::string::npos) << r.out;
  r = Outbox(outbox, {"salvage", "--to", dir.Sub("again")});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("holds an outbox already"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace verdict
