// SIGHUP held from before anything of a verdict program runs. SIGHUP reloads a serving program's
// tokens; one that came before the program waits for it would kill it (the default action), and
// systemd counts death by SIGHUP as a clean exit, so Restart=on-failure would leave it down.
// hangup_guard.cc blocks SIGHUP from the executable's .preinit_array: the first code of the
// program that runs, once the dynamic loader has mapped and relocated it, before any shared
// library's initialiser and any static initialiser (blocking in main came after those). A SIGHUP
// sent from then on stays pending, across the threads started later (they inherit the mask) and
// across exec, until the serving loop takes it with sigwait. Before that point (the kernel's exec
// and the loader's relocation) no in-process means can hold it: docs/operating.md says what covers
// it. Called from main only.
#pragma once

namespace verdict::cli {

// For the commands that do not serve: a hang-up ends them, as it ends any command. A SIGHUP that
// came while it was held ends the command now.
void ReleaseHangup();

}  // namespace verdict::cli
