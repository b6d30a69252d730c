// The fault suite's invariant checker: after the faults stop and the node has drained, it
// holds the database, the node's outbox listing and the node's log of results it reported
// stored to verdict's promises (docs/design.md §1):
//   P1  every result the node reported stored has exactly one receipt (or, past retention, the
//       compact record of one), or is in the outbox's quarantine or dead letter with a reason;
//       nothing is left pending;
//   P2  every player's games, wins, losses, draws and Elo equal the sum over their settled
//       matches (a voided match's counts taken off, its compensation added), each player's
//       chain of ratings is continuous (RatingChainViolations), every match's Elo changes sum to
//       zero and so do all ratings together, every
//       settled room has exactly one match and every match a settled room, and no settled room's
//       result was dead-lettered (a redelivery is a duplicate, or ORIGINAL_EXPIRED);
//   P5  no player is held by two rooms, no active room has let its players go (the suite
//       releases none), and no settled room is still active;
//   P4  every record set aside names its reason; the undecodable ones are exactly those the
//       suite wrote.
// Rooms allocated whose result was never reported stored (the node was killed mid-battle, the
// honest limit of docs/design.md §1) are counted, not violations.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <pqxx/transaction_base>

#include "verdict/v1/verdict.pb.h"

namespace verdict::testing {

struct InvariantReport {
  std::vector<std::string> violations;
  uint64_t allocated = 0;      // rooms ever allocated (active ones plus receipts)
  uint64_t settled = 0;        // receipts and compact records
  uint64_t stored = 0;         // rooms the node reported stored
  uint64_t quarantined = 0;    // outbox quarantine records
  uint64_t dead_lettered = 0;  // outbox dead-letter records
  uint64_t undecodable = 0;    // quarantined as undecodable
  uint64_t unfinished = 0;     // allocated, never reported stored, not settled

  // True if some violation is of `promise` ("P1", "P2", …).
  bool Violates(const std::string& promise) const {
    for (const auto& v : violations) {
      if (v.rfind(promise + ":", 0) == 0) return true;
    }
    return false;
  }
  std::string Summary() const;
};

// Parses `verdict-node outbox ls --json`; false if it is not that.
bool ParseListing(const std::string& json, v1::OutboxListing* listing);

// Reads the node's --stored-log (one room id per line).
std::set<uint64_t> ReadStoredLog(const std::string& path);

// The chain of each player's ratings in each mode (docs/design.md §5, "Voiding a match"), one
// violation per break: its links are the player's matches in match order, but those voided by
// replay, and after each compensating void, right after the player's newest match when it was
// voided, a link from the rating it had to the one the void left. Each link starts at the
// rating, deviation and volatility the one before it ended at (in the "default" mode, the first
// at 1500), and the last ends at the player's rating. A broken chain is a match counted from the
// wrong rating, or a rating moved outside its history.
std::vector<std::string> RatingChainViolations(pqxx::transaction_base& tx);

InvariantReport CheckInvariants(const std::string& conninfo, const v1::OutboxListing& listing,
                                const std::set<uint64_t>& stored_rooms,
                                uint64_t injected_undecodable);

}  // namespace verdict::testing
