// The HTTP ingest measured the way a battle host in another language meets it: a BattleNode
// serving POST /v1/results (and :batch) on a Unix socket, and client threads posting to it over
// keep-alive connections, each waiting for its answer (2xx only once durable). Part of
// `verdict-bench ingest`, which puts these rows beside the in-process path of the same run.
#pragma once

#include <cstddef>
#include <string>

#include "bench/ingest.h"

namespace verdict::bench {

struct HttpIngestRun {
  double per_s = 0;   // results answered 2xx per second
  double p50_ms = 0;  // per request: sent (or due, open loop) -> answered
  double p99_ms = 0;
  // CPU time per result answered: the node's (every thread but the client's) and the client's.
  // Unlike results/s, these hold on a busy host: they say what the path costs, not what it got.
  double node_cpu_us = 0;
  double client_cpu_us = 0;
};

// `clients` threads each post `batch` results per request (1: POST /v1/results, more: POST
// /v1/results:batch) for options.seconds, to a node whose outbox is in `dir`. Saturated when
// `rate` is 0; otherwise open loop at `rate` results/s in all, latency counted from each
// request's scheduled time. With `http_alone` the node answers as soon as it has queued the
// results, before they are durable (the node's test-only switch): the reference of what HTTP
// itself costs on this host, beside the real answers.
HttpIngestRun RunHttpIngest(const IngestOptions& options, const std::string& dir, int clients,
                            size_t batch, double rate, bool http_alone = false);

}  // namespace verdict::bench
