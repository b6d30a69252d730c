// EtcdCluster: a real etcd cluster of `members` processes (Debian's etcd-server) on free
// loopback ports, each with its own data directory, for the replicated tier's tests. Members can
// be killed and started again on their data. Stopped when destroyed. Not thread-safe.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/process.h"

// In a test or a fixture's SetUp: skips it when etcd is not installed, and fails it instead when
// VERDICT_REQUIRE_PG is set (./scripts/test installs etcd-server: a run there must not pass by
// skipping).
#define VERDICT_NEED_ETCD()                                                                   \
  do {                                                                                        \
    if (!::verdict::testing::EtcdCluster::Installed()) {                                      \
      if (std::getenv("VERDICT_REQUIRE_PG")) FAIL() << "etcd is not installed (etcd-server)"; \
      GTEST_SKIP() << "etcd is not installed (etcd-server)";                                  \
    }                                                                                         \
  } while (0)

namespace verdict::testing {

class EtcdCluster {
 public:
  // Starts the members in `dir` and waits until the cluster has a leader; null (after printing
  // why) if it does not come up, or if etcd is not installed.
  // `extra_args` go to every member (a quota, say).
  static std::unique_ptr<EtcdCluster> Start(const std::string& dir, int members = 3,
                                            const std::vector<std::string>& extra_args = {});
  ~EtcdCluster();

  // "etcd://127.0.0.1:P1,127.0.0.1:P2,…", for --replicate-to and --from.
  std::string url() const;
  int size() const { return static_cast<int>(members_.size()); }
  // SIGKILLs member `i`.
  void Kill(int i);
  // Starts member `i` again on its data directory (after Kill).
  bool Restart(int i);
  // SIGSTOPs member `i`: it keeps its connections and answers nothing (a member stuck on its
  // disk), until Resume SIGCONTs it.
  void Pause(int i);
  void Resume(int i);
  // True once a quorum of the running members answers /health.
  bool Healthy();
  // Whether Debian's etcd is installed (the tests that need it skip otherwise).
  static bool Installed();

 private:
  struct Member {
    std::string name, data_dir, log;
    uint16_t client_port = 0, peer_port = 0;
    std::unique_ptr<ChildProcess> process;
  };
  EtcdCluster() = default;
  // Starts member `i`; a restarted member finds its cluster in its data directory.
  bool Launch(int i);
  std::string initial_cluster_;
  std::vector<std::string> extra_args_;
  std::vector<Member> members_;
};

}  // namespace verdict::testing
