// Where the replicated tier keeps things in etcd, under the configured prefix P:
//   P results/NODE/ROOM/ENDED_AT   a stored result: its BattleResult, serialized
//   P nodes/NODE                   the node's liveness key, attached to its lease
// NODE is the node id with every byte outside [A-Za-z0-9._-] written as %XX, so no node id can
// reach into another's keys; ROOM is the room id in 20 decimal digits (keys of a node sort by
// room); ENDED_AT is ended_at_ms in decimal. (ROOM, ENDED_AT) is the outbox's idempotency key,
// so one key holds one result. Stateless.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace verdict::replication {

std::string ResultKey(const std::string& prefix, const std::string& node_id, uint64_t room_id,
                      int64_t ended_at_ms);
// The keys of one node's results all start with this.
std::string NodeResultsPrefix(const std::string& prefix, const std::string& node_id);
// The keys of every node's results all start with this.
std::string AllResultsPrefix(const std::string& prefix);
std::string NodeLivenessKey(const std::string& prefix, const std::string& node_id);
std::string NodesPrefix(const std::string& prefix);
// The node id a result key or a liveness key names (unescaped), or nullopt for another key.
std::optional<std::string> NodeOfResultKey(const std::string& prefix, const std::string& key);
std::optional<std::string> NodeOfLivenessKey(const std::string& prefix, const std::string& key);
// The range_end that makes an etcd range cover every key starting with `prefix`.
std::string PrefixEnd(const std::string& prefix);

}  // namespace verdict::replication
