#include "cli/hangup_guard.h"

#include <signal.h>

namespace verdict::cli {
namespace {

void BlockHangup(int, char**, char**) {
  sigset_t hangup;
  sigemptyset(&hangup);
  sigaddset(&hangup, SIGHUP);
  sigprocmask(SIG_BLOCK, &hangup, nullptr);
}

// Run by the dynamic loader before every initialiser (ELF gABI, "Initialization and
// Termination Functions"). Only an executable's .preinit_array runs: this file is linked into
// the programs themselves (ReleaseHangup, which main calls, keeps it from being dropped out of
// the static library).
__attribute__((section(".preinit_array"), used)) void (*block_hangup_first)(int, char**,
                                                                            char**) = &BlockHangup;

}  // namespace

void ReleaseHangup() {
  sigset_t hangup;
  sigemptyset(&hangup);
  sigaddset(&hangup, SIGHUP);
  pthread_sigmask(SIG_UNBLOCK, &hangup, nullptr);
}

}  // namespace verdict::cli
