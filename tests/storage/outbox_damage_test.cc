// A damaged outbox never loses stored results silently. Each test damages real RocksDB files the
// way disks and operators do (bytes flipped in the middle of the write-ahead log, CURRENT and
// the log deleted, CURRENT alone deleted, a truncated MANIFEST, a bad block in one shard's table
// file) and checks that the open refuses with DATA_LOSS and changes nothing, or, for one shard,
// that only that shard stops; then that salvage copies every record that can be read into a new
// outbox and names the rooms of those that cannot. The negative control opens with RocksDB's
// point-in-time recovery alone and shows the silent loss the log check prevents.
#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/utilities/options_util.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "storage/outbox.h"
#include "storage/outbox_salvage.h"
#include "tests/support/outbox_images.h"
#include "tests/support/results.h"
#include "tests/support/temp_dir.h"

namespace verdict::storage {
namespace {

namespace fs = std::filesystem;
using testing::EnqueueRooms;
using testing::FlipBytes;
using testing::MakeResult;
using testing::OnlyFile;
using testing::TableFileOf;
using testing::TempDir;

constexpr uint32_t kShards = 4;

void MakeCrashImage(const std::string& dir, uint64_t n) {
  testing::MakeCrashImage(dir, n, kShards);
}
void MakeClosedOutbox(const std::string& dir, uint64_t n) {
  testing::MakeClosedOutbox(dir, n, kShards);
}

// Every file of `dir` with its contents: what a failed open must leave as it was.
std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    files[e.path().filename().string()] = std::string(std::istreambuf_iterator<char>(in), {});
  }
  return files;
}

std::set<std::string> Names(const std::map<std::string, std::string>& snapshot) {
  std::set<std::string> names;
  for (const auto& [name, bytes] : snapshot) names.insert(name);
  return names;
}

uint64_t StoredRecords(const std::string& dir, OutboxOptions options = {.read_only = true}) {
  auto outbox = OpenOutbox(dir, options);
  EXPECT_TRUE(outbox.ok()) << outbox.status().ToString();
  if (!outbox.ok()) return 0;
  auto stats = (*outbox)->Stats();
  EXPECT_TRUE(stats.ok()) << stats.status().ToString();
  return stats.ok() ? stats->records : 0;
}

// Expects both a writable and a read-only open of `dir` to fail with `code` and a message
// holding each of `parts`, and the directory to be exactly as before.
void ExpectRefused(const std::string& dir, StatusCode code, const std::vector<std::string>& parts) {
  const auto before = Snapshot(dir);
  for (bool read_only : {false, true}) {
    auto opened = OpenOutbox(dir, {.shard_count = kShards, .read_only = read_only});
    ASSERT_FALSE(opened.ok()) << (read_only ? "read-only" : "writable") << " open succeeded";
    EXPECT_EQ(opened.status().code(), code) << opened.status().ToString();
    for (const auto& part : parts) {
      EXPECT_NE(opened.status().message().find(part), std::string::npos)
          << "'" << part << "' not in: " << opened.status().message();
    }
    if (code == StatusCode::kDataLoss) {
      EXPECT_EQ(opened.status().message().find("not a verdict outbox"), std::string::npos);
    }
  }
  const auto after = Snapshot(dir);
  EXPECT_EQ(Names(after), Names(before)) << "a failed open added or removed files";
  EXPECT_TRUE(after == before) << "a failed open changed a file";
}

// Bytes flipped a third of the way into the log of an outbox holding 20,000 stored results (the
// issue's figures): point-in-time recovery would stop there and start with about a third.
TEST(OutboxDamageTest, DamageInTheMiddleOfTheLogFailsTheOpenNamingFileAndOffset) {
  TempDir dir;
  const std::string outbox = dir.Sub("outbox");
  MakeCrashImage(outbox, 20'000);
  const std::string log = OnlyFile(outbox, ".log");
  const uint64_t flipped_at = fs::file_size(outbox + "/" + log) / 3;
  FlipBytes(outbox + "/" + log, flipped_at, 4);

  ExpectRefused(outbox, StatusCode::kDataLoss, {log, "salvage"});
  auto opened = OpenOutbox(outbox, {.shard_count = kShards});
  const std::string message = opened.status().message();
  // The offset named is the damaged record's, within the 32 KiB block holding the flip.
  const size_t at = message.find("offset ");
  ASSERT_NE(at, std::string::npos) << message;
  const uint64_t offset = std::stoull(message.substr(at + 7));
  EXPECT_LE(offset, flipped_at);
  EXPECT_LT(flipped_at - offset, 32768u);
}

// The negative control: without the log check, RocksDB's point-in-time recovery opens the same
// outbox without an error and most stored results are gone.
TEST(OutboxDamageTest, NegativeControlPointInTimeRecoveryAloneDropsStoredResultsSilently) {
  TempDir dir;
  const std::string outbox = dir.Sub("outbox");
  MakeCrashImage(outbox, 20'000);
  const std::string log = outbox + "/" + OnlyFile(outbox, ".log");
  FlipBytes(log, fs::file_size(log) / 3, 4);
  const uint64_t left =
      StoredRecords(outbox, {.shard_count = kShards, .unsafe_skip_log_check_for_test = true});
  EXPECT_LT(left, 10'000u) << "point-in-time recovery kept what follows the damage";
  EXPECT_GT(left, 0u);
}

// A crash or power cut tears the log's last record: that is not damage, and every earlier
// record opens.
TEST(OutboxDamageTest, TornLogTailIsAcceptedWithEveryEarlierRecord) {
  TempDir dir;
  MakeCrashImage(dir.Sub("image"), 2'000);
  const std::string log = OnlyFile(dir.Sub("image"), ".log");
  const uint64_t size = fs::file_size(dir.Sub("image") + "/" + log);

  // Cut inside the last batch (100 results).
  fs::copy(dir.Sub("image"), dir.Sub("cut"), fs::copy_options::recursive);
  fs::resize_file(dir.Sub("cut") + "/" + log, size - 500);
  EXPECT_EQ(StoredRecords(dir.Sub("cut"), {.shard_count = kShards}), 1'900u);

  // The last batch's bytes half written: its checksum fails, and nothing follows it.
  fs::copy(dir.Sub("image"), dir.Sub("garbled"), fs::copy_options::recursive);
  FlipBytes(dir.Sub("garbled") + "/" + log, size - 300, 4);
  EXPECT_EQ(StoredRecords(dir.Sub("garbled"), {.shard_count = kShards}), 1'900u);

  // Zeros where the tail should be (written space the data never reached).
  fs::copy(dir.Sub("image"), dir.Sub("zeroed"), fs::copy_options::recursive);
  {
    std::ofstream tail(dir.Sub("zeroed") + "/" + log, std::ios::binary | std::ios::app);
    const std::string zeros(70'000, '\0');
    tail.write(zeros.data(), zeros.size());
  }
  EXPECT_EQ(StoredRecords(dir.Sub("zeroed"), {.shard_count = kShards}), 2'000u);
}

// A block of the log zeroed in the middle (a lost write): RocksDB skips a zeroed block without
// a word in every recovery mode; the check finds the intact records after it.
TEST(OutboxDamageTest, ZeroedBlockInTheMiddleOfTheLogIsDamage) {
  TempDir dir;
  const std::string outbox = dir.Sub("outbox");
  MakeCrashImage(outbox, 20'000);
  const std::string log = OnlyFile(outbox, ".log");
  {
    std::fstream f(outbox + "/" + log, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(32768 * 50);
    const std::string zeros(32768, '\0');
    f.write(zeros.data(), zeros.size());
  }
  ExpectRefused(outbox, StatusCode::kDataLoss, {log, "offset 1638400", "zeroed"});
}

// CURRENT and the log deleted: the table files still hold the results. A writable open used to
// create a fresh outbox over them, and RocksDB then deleted the old table files.
TEST(OutboxDamageTest, OutboxWithoutCurrentAndLogIsNotTakenForANewOne) {
  TempDir dir;
  const std::string outbox = dir.Sub("outbox");
  MakeClosedOutbox(outbox, 50);
  fs::remove(outbox + "/CURRENT");
  fs::remove(outbox + "/" + OnlyFile(outbox, ".log"));
  ExpectRefused(outbox, StatusCode::kDataLoss, {"no CURRENT", "table files", "salvage"});
}

// Only CURRENT deleted, the results in the log: a failed open used to write a new CURRENT and
// MANIFEST-000001, after which every open said "not a verdict outbox".
TEST(OutboxDamageTest, OutboxWithoutCurrentIsNotWrittenTo) {
  TempDir dir;
  const std::string outbox = dir.Sub("outbox");
  MakeCrashImage(outbox, 50);
  fs::remove(outbox + "/CURRENT");
  ExpectRefused(outbox, StatusCode::kDataLoss, {"no CURRENT", ".log", "salvage"});
  ExpectRefused(outbox, StatusCode::kDataLoss, {"no CURRENT"});  // and again, the same
}

// A truncated MANIFEST is damage, not another program's database.
TEST(OutboxDamageTest, TruncatedManifestIsDamageNotAForeignDatabase) {
  TempDir dir;
  MakeClosedOutbox(dir.Sub("image"), 50);
  const std::string manifest = OnlyFile(dir.Sub("image"), "MANIFEST-");
  const uint64_t size = fs::file_size(dir.Sub("image") + "/" + manifest);
  // Cut before the column families were recorded, among them, and before the last table files.
  for (uint64_t keep : {uint64_t{40}, uint64_t{300}, size - 150}) {
    SCOPED_TRACE("MANIFEST cut to " + std::to_string(keep) + " of " + std::to_string(size));
    const std::string outbox = dir.Sub("cut-" + std::to_string(keep));
    fs::copy(dir.Sub("image"), outbox, fs::copy_options::recursive);
    fs::resize_file(outbox + "/" + manifest, keep);
    ExpectRefused(outbox, StatusCode::kDataLoss, {"is damaged", "salvage"});
  }
}

TEST(OutboxDamageTest, AnotherProgramsDatabaseIsNotAnOutbox) {
  TempDir dir;
  {
    rocksdb::Options options;
    options.create_if_missing = true;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, dir.Sub("db"), &db).ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "key", "value").ok());
    delete db;
  }
  ExpectRefused(dir.Sub("db"), StatusCode::kFailedPrecondition, {});
  auto opened = OpenOutbox(dir.Sub("db"), {});
  EXPECT_NE(opened.status().message().find("not a verdict outbox"), std::string::npos)
      << opened.status().message();
}

TEST(OutboxDamageTest, OnlyAnEmptyOrAbsentDirectoryBecomesAnOutbox) {
  TempDir dir;
  fs::create_directories(dir.Sub("other"));
  std::ofstream(dir.Sub("other") + "/notes.txt") << "not an outbox";
  auto refused = OpenOutbox(dir.Sub("other"), {});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("notes.txt"), std::string::npos);
  EXPECT_EQ(Names(Snapshot(dir.Sub("other"))), std::set<std::string>{"notes.txt"});

  EXPECT_TRUE(OpenOutbox(dir.Sub("absent/outbox"), {.shard_count = 1}).ok());
  fs::create_directories(dir.Sub("empty"));
  EXPECT_TRUE(OpenOutbox(dir.Sub("empty"), {.shard_count = 1}).ok());
  // The root of a file system of its own holds lost+found.
  fs::create_directories(dir.Sub("volume/lost+found"));
  EXPECT_TRUE(OpenOutbox(dir.Sub("volume"), {.shard_count = 1}).ok());
}

// A bad block in one shard's table file used to fail every open ("DATA_LOSS: scanning
// shard-001"), so no shard delivered. Now that shard stops, reported by Stats, and the rest of
// the outbox works: its shards read and ack, and results are still stored, also in the damaged
// shard, through enough memtable flushes that a compaction of it would have run.
TEST(OutboxDamageTest, BadBlockInOneShardStopsOnlyThatShard) {
  TempDir dir;
  const std::string outbox = dir.Sub("outbox");
  MakeClosedOutbox(outbox, 2'000);
  const std::string table = TableFileOf(outbox, 1);
  {
    // A few of the shard's records delivered, and more stored, before the damage: a second
    // table file whose acks overlap the first one's keys, so that a compaction of the shard has
    // to read the damaged file rather than move it.
    auto before = OpenOutbox(outbox, {.shard_count = kShards});
    ASSERT_TRUE(before.ok());
    auto delivered = (*before)->ReadShard(1, 0, 10);
    ASSERT_TRUE(delivered.ok());
    for (const auto& r : *delivered) ASSERT_TRUE((*before)->Ack(r).ok());
    EnqueueRooms(**before, 5'000, 4'000);
  }
  ASSERT_TRUE(fs::exists(table));
  FlipBytes(table, 1000, 4);  // inside its first data block

  OutboxOptions options{.shard_count = kShards, .total_memtable_bytes = 256 << 10};
  auto opened = OpenOutbox(outbox, options);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Outbox& box = **opened;
  auto stats = box.Stats();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->damaged_shards, 1u);
  EXPECT_NE(stats->shards[1].damage.find("shard-001"), std::string::npos);
  EXPECT_NE(stats->shards[1].damage.find(fs::path(table).filename().string()), std::string::npos)
      << stats->shards[1].damage;
  for (uint32_t s : {0u, 2u, 3u}) EXPECT_EQ(stats->shards[s].damage, "");

  auto damaged = box.ReadShard(1, 0, 10);
  EXPECT_EQ(damaged.status().code(), StatusCode::kDataLoss);
  auto healthy = box.ReadShard(0, 0, 10);
  ASSERT_TRUE(healthy.ok()) << healthy.status().ToString();
  ASSERT_EQ(healthy->size(), 10u);
  for (const auto& r : *healthy) ASSERT_TRUE(box.Ack(r).ok());

  // 20,000 more results, a quarter of them into the damaged shard: dozens of flushes of 256 KiB,
  // after which RocksDB would compact the shard (and, meeting the damage, stop every write).
  EnqueueRooms(box, 10'000, 20'000);
  auto later = box.Stats();
  ASSERT_TRUE(later.ok()) << later.status().ToString();
  EXPECT_EQ(later->damaged_shards, 1u);
  opened.value().reset();

  // Read-only (outbox stats, ls): the same report, not a failure.
  auto viewer = OpenOutbox(outbox, {.read_only = true});
  ASSERT_TRUE(viewer.ok()) << viewer.status().ToString();
  auto viewed = (*viewer)->Stats();
  ASSERT_TRUE(viewed.ok());
  EXPECT_EQ(viewed->damaged_shards, 1u);
  EXPECT_EQ((*viewer)->ReadShard(1, 0, 10).status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE((*viewer)->ReadShard(2, 0, 10).ok());
}

// Every room of the outbox in `dir`, with where its record is: its shard's records in order,
// then "quarantine:REASON" and "dead-letter:REASON".
struct Contents {
  std::map<uint32_t, std::vector<uint64_t>> shards;  // rooms in each shard, in order
  std::multimap<uint64_t, std::string> where;        // room → "shard-N", "quarantine:…", …
};
Contents Read(const std::string& dir) {
  Contents c;
  auto outbox = OpenOutbox(dir, {.read_only = true});
  EXPECT_TRUE(outbox.ok()) << outbox.status().ToString();
  if (!outbox.ok()) return c;
  for (uint32_t s = 0; s < (*outbox)->shard_count(); ++s) {
    auto records = (*outbox)->ReadShard(s, 0, 1'000'000);
    EXPECT_TRUE(records.ok()) << records.status().ToString();
    for (const auto& r : *records) {
      c.shards[s].push_back(r.result.room_id());
      c.where.emplace(r.result.room_id(), "shard");
    }
  }
  for (SideArea area : {SideArea::kQuarantine, SideArea::kDeadLetter}) {
    auto side = (*outbox)->ListSide(area, std::nullopt);
    EXPECT_TRUE(side.ok());
    for (const auto& r : *side) {
      c.where.emplace(r.decodable ? r.result.room_id() : 0,
                      std::string(SideAreaName(area)) + ":" + r.reason);
    }
  }
  return c;
}

// An outbox holding 6,000 results as a crash leaves it, two of them dead-lettered, and one
// more quarantined as oversize.
class SalvageTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kRooms = 6'000;

  void SetUp() override {
    TempDir live;
    auto outbox = OpenOutbox(live.Sub("outbox"), {.shard_count = kShards});
    ASSERT_TRUE(outbox.ok()) << outbox.status().ToString();
    EnqueueRooms(**outbox, 1, kRooms);
    auto head = (*outbox)->ReadShard(2, 0, 2);
    ASSERT_TRUE(head.ok());
    for (const auto& r : *head) {
      ASSERT_TRUE((*outbox)->DeadLetter(r, "ROSTER_MISMATCH", "players differ").ok());
      dead_lettered_.insert(r.result.room_id());
    }
    auto big = MakeResult(kRooms + 1);
    big.set_abort_reason(std::string(size_t{2} << 20, 'x'));
    ASSERT_EQ((*outbox)->Enqueue(std::span(&big, 1))->front().status.code(),
              StatusCode::kResourceExhausted);
    fs::copy(live.Sub("outbox"), damaged(), fs::copy_options::recursive);
  }

  std::string damaged() const { return dir_.Sub("damaged"); }
  std::string salvaged() const { return dir_.Sub("salvaged"); }

  // Every stored room is in the salvaged outbox, in the same place, or named lost; each
  // shard's rooms are in their old order.
  void ExpectEverythingCopiedOrNamed(const SalvageReport& report) {
    const Contents after = Read(salvaged());
    const std::set<uint64_t> lost(report.lost_rooms.begin(), report.lost_rooms.end());
    EXPECT_EQ(lost.size(), report.lost);
    for (uint64_t room = 1; room <= kRooms + 1; ++room) {
      const size_t copies = after.where.count(room);
      if (lost.count(room)) {
        EXPECT_EQ(copies, 0u) << "room " << room << " named lost but copied";
        continue;
      }
      ASSERT_EQ(copies, 1u) << "room " << room << " neither copied nor named lost";
      const std::string where = after.where.find(room)->second;
      if (dead_lettered_.count(room)) {
        EXPECT_EQ(where, "dead-letter:ROSTER_MISMATCH");
      } else if (room == kRooms + 1) {
        EXPECT_EQ(where, "quarantine:oversize");
      } else {
        EXPECT_EQ(where, "shard") << "room " << room;
      }
    }
    for (const auto& [shard, rooms] : after.shards) {
      EXPECT_TRUE(std::is_sorted(rooms.begin(), rooms.end())) << "shard " << shard;
    }
    EXPECT_EQ(report.pending + report.lost + dead_lettered_.size() + 1, kRooms + 1);
  }

  TempDir dir_;
  std::set<uint64_t> dead_lettered_;
};

TEST_F(SalvageTest, DamagedLogCopiesEveryReadableRecordAndNamesTheRoomsOfTheRest) {
  const std::string log = damaged() + "/" + OnlyFile(damaged(), ".log");
  FlipBytes(log, fs::file_size(log) / 3, 4);
  const auto before = Snapshot(damaged());
  std::vector<SalvageProgress> progress;
  auto report =
      SalvageOutbox(damaged(), salvaged(),
                    {.progress = [&](const SalvageProgress& p) { progress.push_back(p); }});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(Snapshot(damaged()) == before) << "salvage wrote to the damaged outbox";

  // One write batch of 100 results is unreadable; its rooms are named from its bytes (each
  // record by its value or its index entry; the flipped bytes may garble one of them beyond
  // recognition, which more_may_be_lost then admits).
  EXPECT_EQ(report->lost, 100u);
  ASSERT_EQ(report->lost_rooms.size(), 100u);
  EXPECT_EQ(report->lost_rooms.back() - report->lost_rooms.front(), 99u) << "one batch";
  ASSERT_FALSE(report->damage.empty());
  EXPECT_NE(report->damage.front().find("checksum mismatch"), std::string::npos);
  EXPECT_EQ(report->shard_count, kShards);
  EXPECT_EQ(report->dead_lettered, 2u);
  EXPECT_EQ(report->quarantined, 1u);
  ExpectEverythingCopiedOrNamed(*report);
  ASSERT_GE(progress.size(), 2u);
  EXPECT_EQ(progress.front().area, "shard-000");

  // The new outbox opens for writing, with its index rebuilt: a copied result is a repeat.
  auto opened = OpenOutbox(salvaged(), {.shard_count = kShards});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  const auto again = MakeResult(report->lost_rooms.front() - 1);
  EXPECT_TRUE((*opened)->Enqueue(std::span(&again, 1))->front().already_present);
}

TEST_F(SalvageTest, BadTableBlockCopiesTheRestOfTheShardAndNamesTheRoomsOfTheBlock) {
  {
    auto closed = OpenOutbox(damaged(), {.shard_count = kShards});  // flushes on close
    ASSERT_TRUE(closed.ok()) << closed.status().ToString();
  }
  FlipBytes(TableFileOf(damaged(), 1), 20'000, 4);
  auto report = SalvageOutbox(damaged(), salvaged(), {});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_GT(report->lost, 0u);
  EXPECT_LT(report->lost, 50u) << "more than a block";
  EXPECT_FALSE(report->more_may_be_lost);
  for (uint64_t room : report->lost_rooms) EXPECT_EQ(RoomShard(room, kShards), 1u);
  EXPECT_NE(report->damage.front().find("shard-001"), std::string::npos);
  ExpectEverythingCopiedOrNamed(*report);
}

TEST_F(SalvageTest, MissingCurrentIsReadThroughTheNewestManifestWithoutTouchingTheOutbox) {
  fs::remove(damaged() + "/CURRENT");
  const auto before = Snapshot(damaged());
  auto report = SalvageOutbox(damaged(), salvaged(), {});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(Snapshot(damaged()) == before);
  EXPECT_FALSE(fs::exists(salvaged() + ".salvage-work"));
  EXPECT_EQ(report->lost, 0u);
  EXPECT_NE(report->damage.front().find("CURRENT is missing"), std::string::npos);
  ExpectEverythingCopiedOrNamed(*report);
}

TEST_F(SalvageTest, RefusesATargetThatIsNotNewOrAnOutboxInUse) {
  fs::create_directories(salvaged());
  std::ofstream(salvaged() + "/keep") << "x";
  auto report = SalvageOutbox(damaged(), salvaged(), {});
  EXPECT_EQ(report.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(SalvageOutbox(damaged(), damaged(), {}).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(SalvageOutbox(dir_.Sub("nothing"), dir_.Sub("new"), {}).status().code(),
            StatusCode::kNotFound);
  // A node holding the outbox would write records the copy misses.
  auto held = OpenOutbox(damaged(), {.shard_count = kShards});
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  auto refused = SalvageOutbox(damaged(), dir_.Sub("new"), {});
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("in use"), std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace verdict::storage
