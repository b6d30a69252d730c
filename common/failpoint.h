// Failpoints: named places in node and lobby where tests inject faults. Compiled into every
// build but inert unless armed through the environment before the process starts:
//   VERDICT_FAILPOINTS="settle.before_commit=error*1,writer.after_sync=crash"
// Each entry is NAME=ACTION with an optional *COUNT (how many hits fire; default: all).
// Actions: `error` (the call site fails the way that place fails in production), `crash` (the
// process SIGKILLs itself on the spot), `delay` (the caller waits 300 ms, then goes on as if
// unarmed: a slow disk, say) and `hang` (the caller never returns: a thread stuck in a loop, say).
// Thread-safe.
#pragma once

#include <string_view>

namespace verdict {

enum class FailAction { kNone, kError };

// Returns kError if `name` is armed with `error` (and has hits left); kills the process if it
// is armed with `crash`; waits, then returns kNone, if it is armed with `delay`; never returns if
// it is armed with `hang`; kNone otherwise, which is the fast path of every unarmed build.
FailAction CheckFailpoint(std::string_view name);

}  // namespace verdict
