// The log scanner follows RocksDB's rules for record types (db/log_format.h): the metadata types a
// current RocksDB writes (9, 10, 11, 130, 131) are not damage, nor is a type unknown to it whose
// high bit (kRecordTypeSafeIgnoreMask, 0x80) says a reader may skip it; any other unknown type is
// damage, as RocksDB's own reader reports it. The logs are written here byte by byte, with a CRC32C
// of this file's own, so the test does not share the scanner's idea of the format.
#include <gtest/gtest.h>
#include <rocksdb/file_system.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "storage/log_scan.h"
#include "tests/support/temp_dir.h"

namespace verdict::storage {
namespace {

using testing::TempDir;

constexpr uint32_t kLogNumber = 7;

// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), bit by bit.
uint32_t Crc32c(const std::string& data) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char c : data) {
    crc ^= c;
    for (int i = 0; i < 8; ++i) crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

// RocksDB masks the CRC it stores (util/crc32c.h: rotate right by 15, add a constant).
uint32_t Masked(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

void PutLittleEndian(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// One physical record: masked CRC, length, type, for a recyclable type the log's number, payload.
std::string Record(uint8_t type, const std::string& payload, bool recyclable = false) {
  std::string covered(1, static_cast<char>(type));
  if (recyclable) PutLittleEndian(covered, kLogNumber, 4);
  covered += payload;
  std::string out;
  PutLittleEndian(out, Masked(Crc32c(covered)), 4);
  PutLittleEndian(out, payload.size(), 2);
  out += covered;
  return out;
}

// A log of the records, in one block, as NUMBER.log in `dir`.
void WriteLog(const std::string& dir, const std::vector<std::string>& records) {
  std::ofstream out(dir + "/00000" + std::to_string(kLogNumber) + ".log", std::ios::binary);
  for (const std::string& r : records) out << r;
}

LogScan Scan(const std::string& dir) {
  auto scan = ScanLogs(*rocksdb::FileSystem::Default(), dir, 0);
  EXPECT_TRUE(scan.ok()) << scan.status().ToString();
  return scan.ok() ? *scan : LogScan{};
}

// A write batch's bytes as far as the scanner cares: any payload of a Full record.
const std::string kBatch = std::string(12, 'b');

TEST(LogScanTest, TheMetadataTypesOfACurrentRocksDbAreNotDamage) {
  TempDir dir;
  WriteLog(dir.path(), {
                           Record(9, std::string(4, '\0')),        // kSetCompressionType
                           Record(10, std::string(6, 'u')),        // kUserDefinedTimestampSizeType
                           Record(11, std::string(6, 'u'), true),  // … recyclable
                           Record(130, std::string(17, 'p')),      // kPredecessorWALInfoType
                           Record(131, std::string(17, 'p'), true),  // … recyclable
                           Record(1, kBatch),
                       });
  const LogScan scan = Scan(dir.path());
  EXPECT_EQ(scan.logs_scanned, 1u);
  EXPECT_TRUE(scan.damage.empty())
      << scan.damage.front().what << " at " << scan.damage.front().offset;
}

TEST(LogScanTest, AnUnknownTypeMarkedSafeToIgnoreIsPassedOver) {
  TempDir dir;
  WriteLog(dir.path(), {Record(1, kBatch), Record(0x80 | 42, "future"), Record(1, kBatch)});
  const LogScan scan = Scan(dir.path());
  EXPECT_TRUE(scan.damage.empty()) << scan.damage.front().what;
}

TEST(LogScanTest, AnUnknownTypeWithoutTheIgnoreBitIsDamageInTheMiddle) {
  TempDir dir;
  const std::string first = Record(1, kBatch);
  WriteLog(dir.path(), {first, Record(42, "unknown"), Record(1, kBatch)});
  const LogScan scan = Scan(dir.path());
  ASSERT_EQ(scan.damage.size(), 1u);
  EXPECT_EQ(scan.damage[0].what, "unknown record type 42");
  EXPECT_EQ(scan.damage[0].offset, first.size());
  EXPECT_EQ(scan.intact_records_after_damage, 1u);  // what recovery stopping there would drop
}

TEST(LogScanTest, AMetadataRecordWithABadChecksumIsStillDamage) {
  TempDir dir;
  std::string bad = Record(130, std::string(17, 'p'));
  bad.back() ^= 1;
  WriteLog(dir.path(), {Record(1, kBatch), bad, Record(1, kBatch)});
  const LogScan scan = Scan(dir.path());
  ASSERT_EQ(scan.damage.size(), 1u);
  EXPECT_EQ(scan.damage[0].what, "checksum mismatch");
}

}  // namespace
}  // namespace verdict::storage
