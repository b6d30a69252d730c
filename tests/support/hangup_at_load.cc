// A library for LD_PRELOAD that sends its own process SIGHUP from its initialiser: a hang-up that
// comes while the dynamic loader runs the shared libraries' initialisers, before the program's
// static initialisers and main, at the same point every run (a signal timed from outside lands
// anywhere). For the tests of cli/hangup_guard.h.
#include <signal.h>
#include <unistd.h>

namespace {

__attribute__((constructor)) void HangUpAtLoad() { ::kill(::getpid(), SIGHUP); }

}  // namespace
