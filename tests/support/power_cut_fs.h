// PowerCutFs: a RocksDB file system for tests that remembers what has reached the disk for good
// (the bytes of each file up to its last fsync, the directory entries up to their directory's
// last fsync) and, at a simulated power cut, throws everything else away. Power-loss tests hand
// it to the outbox through OutboxOptions::env. Thread-safe: RocksDB calls it from any thread.
//
// The model, after RocksDB's FaultInjectionTestFS (utilities/fault_injection_fs.cc), smaller:
//  - File data: Sync and Fsync make every byte appended so far durable. RangeSync does not
//    (sync_file_range promises nothing about metadata or the drive's cache). Syncs are recorded,
//    not performed: what survives is decided by the model, not by the real disk.
//  - Directory entries: a file created, or the target of a rename, exists after a cut only if
//    its directory was fsynced since; otherwise it is deleted, or a file it replaced by rename
//    gets its old contents back (RocksDB installs CURRENT that way). Deletes are durable at once
//    (as in RocksDB's model: RocksDB only deletes files it no longer needs).
//  - Files that existed before this object was made count as durable.
//  - After the cut nothing fails: a machine without power reports no errors, it loses what it
//    does from then on. Writes still go to the files (and are dropped with the rest), syncs and
//    directory syncs make nothing durable, deletes are ignored. This also keeps RocksDB off its
//    I/O-error paths, where version 7.8 built with assertions (Debian's) can abort. Whatever the
//    code under test reports after the cut comes from a dead machine: tests ignore it.
// Use: hand NewEnv(fs) to the database, Cut() (or CutAfterWrites) at a random moment, note what
// was reported before is_cut(), close the database, DropUnsynced(), then reopen with a fresh
// PowerCutFs. POSIX only.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <rocksdb/env.h>
#include <rocksdb/file_system.h>

namespace verdict::testing {

// What a power cut destroyed.
struct PowerCutDamage {
  uint64_t files_truncated = 0;  // files that lost an unsynced tail
  uint64_t bytes_dropped = 0;
  uint64_t entries_reverted = 0;  // directory entries removed or given their old contents back
};

class PowerCutFs : public rocksdb::FileSystemWrapper {
 public:
  explicit PowerCutFs(std::shared_ptr<rocksdb::FileSystem> base = rocksdb::FileSystem::Default());

  // An Env doing all file I/O through `fs` (for OutboxOptions::env).
  static std::shared_ptr<rocksdb::Env> NewEnv(const std::shared_ptr<PowerCutFs>& fs);

  static const char* kClassName() { return "PowerCutFs"; }
  const char* Name() const override { return kClassName(); }

  // The power goes off: nothing from now on becomes durable (see the model above).
  void Cut();
  // The power goes off at the n-th (n >= 1) write-like operation from now: that operation and
  // all later ones are lost. Lets a test cut at a random point of the I/O stream.
  void CutAfterWrites(uint64_t n);
  bool is_cut() const;

  // Makes the disk look as it would after the cut: truncates files to their last synced length
  // and reverts unsynced directory entries. Call after Cut() once the database is closed; the
  // object is spent afterwards. An error means the real file system refused a repair.
  rocksdb::IOStatus DropUnsynced(PowerCutDamage* damage);

  rocksdb::IOStatus NewWritableFile(const std::string& fname, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* result,
                                    rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReopenWritableFile(const std::string& fname,
                                       const rocksdb::FileOptions& options,
                                       std::unique_ptr<rocksdb::FSWritableFile>* result,
                                       rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReuseWritableFile(const std::string& fname, const std::string& old_fname,
                                      const rocksdb::FileOptions& options,
                                      std::unique_ptr<rocksdb::FSWritableFile>* result,
                                      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewRandomRWFile(const std::string& fname, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSRandomRWFile>* result,
                                    rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewDirectory(const std::string& name, const rocksdb::IOOptions& options,
                                 std::unique_ptr<rocksdb::FSDirectory>* result,
                                 rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus RenameFile(const std::string& src, const std::string& target,
                               const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus LinkFile(const std::string& src, const std::string& target,
                             const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus DeleteFile(const std::string& fname, const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus CreateDir(const std::string& dirname, const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus CreateDirIfMissing(const std::string& dirname,
                                       const rocksdb::IOOptions& options,
                                       rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus DeleteDir(const std::string& dirname, const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override;

 private:
  friend class PowerCutFile;
  friend class PowerCutDirectory;

  struct FileState {
    uint64_t size = 0;    // bytes written through this object
    uint64_t synced = 0;  // of which durable
  };

  // Runs `op` under the lock, counting it toward CutAfterWrites.
  template <typename Op>
  rocksdb::IOStatus Mutate(Op op);
  // Before `path`'s directory entry changes: remembers what a cut must restore, unless an
  // earlier unsynced change already did. Requires mu_.
  void RememberEntry(const std::string& path);
  void DirectorySynced(const std::string& dir);

  mutable std::mutex mu_;
  bool cut_ = false;                        // guarded by mu_
  std::optional<uint64_t> cut_in_;          // guarded by mu_: writes left before the cut
  std::map<std::string, FileState> files_;  // guarded by mu_: files written since creation
  // Paths whose directory entry changed since their directory's last fsync, with what a cut
  // restores: nullopt = no file, else the old contents. Guarded by mu_.
  std::map<std::string, std::optional<std::string>> unsynced_entries_;
};

}  // namespace verdict::testing
