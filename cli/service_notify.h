// Tells the service manager that a serving program is ready (sd_notify(3)'s READY=1, sent to the
// datagram socket named by $NOTIFY_SOCKET), for units of Type=notify: systemd runs no ExecReload
// (SIGHUP) before it, so a reload never reaches a program that cannot take it yet. Without
// $NOTIFY_SOCKET it does nothing. Called from main only.
#pragma once

#include "common/status.h"

namespace verdict::cli {

// Sends READY=1 (OK when there is no $NOTIFY_SOCKET). An error says why it could not be sent;
// systemd then stops the unit at TimeoutStartSec.
Status NotifyServiceReady();

}  // namespace verdict::cli
