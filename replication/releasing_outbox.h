// ReleasingOutbox: an Outbox that forwards every call to the one it wraps and, after each Ack
// that succeeded, tells its owner which record left for good (the lobby's receipt came), so the
// record's etcd copy can be deleted with it. The replicated tier puts it between a node's
// outbox and the node's writer and deliverers; a rescue puts it around the outbox it drains.
// Dead-lettered records are not released: their copy stays until they are redriven and acked.
// Thread-safety: that of the wrapped outbox; `on_ack` is called on the acking thread and must be
// thread-safe and short.
#pragma once

#include <functional>
#include <memory>

#include "storage/outbox.h"

namespace verdict::replication {

using AckObserver = std::function<void(const storage::OutboxRecord&)>;

std::unique_ptr<storage::Outbox> ReleaseOnAck(std::unique_ptr<storage::Outbox> outbox,
                                              AckObserver on_ack);

}  // namespace verdict::replication
