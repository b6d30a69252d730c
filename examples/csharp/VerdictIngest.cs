// VerdictIngest.cs: hands battle results to a running verdict-node through its ingest listener
// (verdict-node run --ingest-listen), over the node's Unix socket or over TCP with its ingest
// token. One file for a Unity or .NET game server to drop in: it uses System.Net.Sockets and
// nothing else beyond the base library (Unity 2021.2 or later, whose .NET Standard 2.1 profile has
// UnixDomainSocketEndPoint; Mono; .NET Framework 4.7.1 or later for TCP only, which has none;
// .NET Core 2.1 or later). It speaks HTTP/1.1 itself, so the Unix socket and TCP take one path,
// and writes and reads the JSON it needs itself.
//
//   var node = IngestClient.ForUnixSocket("/run/verdict/node.sock");
//   var node = IngestClient.ForTcp("http://127.0.0.1:9465", ingestToken);
//   var result = new BattleResult { RoomId = 42, WinnerTeam = 1, EndedAtMs = endedAtMs };
//   result.Players.Add(new PlayerResult { PlayerId = "1", Team = 1, Kills = 3 });
//   result.Players.Add(new PlayerResult { PlayerId = "2", Team = 2, Deaths = 3 });
//   StoredResult stored = node.PostResult(result, TimeSpan.FromMinutes(1));
//   // from Unity's main thread: await node.PostResultAsync(result, TimeSpan.FromMinutes(1));
//
//   // A free-for-all, or any room of more than two teams, is placed team by team (1 best, equal
//   // ranks tie) instead of by WinnerTeam; a player who left halfway played a Share of 0.5.
//   var ffa = new BattleResult { RoomId = 43, EndedAtMs = endedAtMs };
//   ffa.Placements.Add(new TeamPlacement { Team = 1, Rank = 2 });
//   ffa.Placements.Add(new TeamPlacement { Team = 2, Rank = 1 });
//   ffa.Placements.Add(new TeamPlacement { Team = 3, Rank = 3 });
//   ffa.Players.Add(new PlayerResult { PlayerId = "a", Team = 1, Share = 0.5 });  // and b, c
//
// A result the node answers 2xx is fsync-durable in the node's outbox, and the node delivers it
// to the lobby from then on. Until then the client retries, on transport errors and on 503
// UNAVAILABLE (honouring Retry-After), never on any other answer: those throw ProblemException.
// A retry of the identical result is always safe (keep its EndedAtMs: it is part of the result).
// What the client does about the node's ways:
//
// - 200 and 201 are the same success. The node answers 200 (Duplicate) only while its outbox
//   still holds the first copy; once delivered, the same post is stored again (201) and the lobby
//   answers that redelivery as the duplicate it is.
// - A restarting node removes its Unix socket: connecting fails with "no such file or directory"
//   (.NET: SocketError.AddressNotAvailable; Mono reports ConnectionRefused) as well as "connection
//   refused". Every failure to connect is retried: nothing was sent.
// - The node closes a connection idle for 10 s. The client keeps one connection and drops it
//   after 5 s idle; a request on a connection the node closed meanwhile is retried on a new one.
// - A batch's items are retried by their own "retryable" member, alone of the others, after 1 s,
//   doubling up to 30 s (an item carries no Retry-After).
//
// Player ids are strings (any 1 to 64 bytes of UTF-8; an integer id is its decimal string).
// BattleResult.FromJson refuses a member the schema does not have (a misspelt "winer_team", a
// placement's "rnk"), as the node does, and ToJson writes what was read: a member the file left
// out (winner_team, a share) stays out. BattleResult.Check, which FromJson, PostResult and
// PostBatch call, refuses a SETTLED result without one winner and a string holding half of a
// UTF-16 surrogate pair ("\ud800" alone), which UTF-8 cannot carry: nothing is posted as a draw
// it did not say, or with U+FFFD in place of what a player id held. An IngestClient may be shared by threads: their requests
// take turns on its one connection, and their waits between attempts do not hold it.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using System.Net;
using System.Net.Sockets;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace Verdict.Ingest
{
    public enum Outcome { Settled, Aborted }

    // One player's line in a finished battle (verdict.v1.PlayerResult).
    public sealed class PlayerResult
    {
        public string PlayerId = "";
        public uint Team;  // teams are numbered from 1
        public uint Kills, Deaths, Assists;
        public long Score;
        public bool Disconnected;
        // The part of the battle the player played, 0 to 1 (one who left halfway: 0.5); null, the
        // whole battle. OpenSkill modes move a player by it.
        public double? Share;
    }

    // Where one team of a room placed (verdict.v1.TeamPlacement): rank 1 is best, equal ranks tie.
    public sealed class TeamPlacement
    {
        public uint Team;
        public uint Rank;
    }

    // What a battle reports when its room finishes (verdict.v1.BattleResult). NodeId may be left
    // empty: the node fills in its own.
    //
    // A SETTLED result says where its teams placed by exactly one of two members: Placements, one
    // rank per team with at least one team at rank 1, for a room of any number of teams; or
    // WinnerTeam, for two teams (1 or 2, or 0 for a draw: a draw is said, never implied).
    // WinnerTeam is nullable because an absent winner_team is not a 0. The node refuses with 400 a
    // SETTLED result that gives neither, one that gives both (a WinnerTeam of 0 beside Placements
    // too), and placements that rank no team 1; Check refuses the first two before anything is
    // posted.
    public sealed class BattleResult
    {
        public ulong RoomId;
        public Outcome Outcome = Outcome.Settled;
        public uint? WinnerTeam;
        public List<TeamPlacement> Placements = new List<TeamPlacement>();
        public bool Suspect;
        public long EndedAtMs;
        public string NodeId = "";
        public string ReplayPath = "";
        public List<PlayerResult> Players = new List<PlayerResult>();
        public string AbortReason = "";

        // Throws ArgumentException for a result that would be posted as something else than it
        // says: a SETTLED result without a WinnerTeam or Placements (the node would settle it as
        // a draw, or refuse it), or with both; or a string member holding half of a UTF-16
        // surrogate pair, which has no UTF-8 form. The node checks everything else.
        public void Check()
        {
            if (Outcome == Outcome.Settled && !WinnerTeam.HasValue && Placements.Count == 0)
            {
                throw new ArgumentException("room " + RoomId + ": a SETTLED result names its winner_team " +
                                            "(1 or 2, 0 for a draw) or its placements; it has neither");
            }
            if (Outcome == Outcome.Settled && WinnerTeam.HasValue && Placements.Count > 0)
            {
                throw new ArgumentException("room " + RoomId + ": give winner_team or placements, not both " +
                                            "(a winner_team of 0, a draw, included)");
            }
            CheckText(NodeId, "node_id");
            CheckText(ReplayPath, "replay_path");
            CheckText(AbortReason, "abort_reason");
            foreach (PlayerResult p in Players) CheckText(p.PlayerId, "player_id");
        }

        void CheckText(string value, string name)
        {
            if (value != null && !Json.IsWellFormed(value))
            {
                throw new ArgumentException("room " + RoomId + ": " + name + " holds half of a UTF-16 " +
                                            "surrogate pair, which is no character: it is not UTF-8");
            }
        }

        // The result in protobuf's JSON mapping, as the node reads it (64-bit integers as strings).
        public string ToJson()
        {
            var w = new StringBuilder();
            WriteJson(w);
            return w.ToString();
        }

        internal void WriteJson(StringBuilder w)
        {
            w.Append("{\"room_id\":");
            Json.WriteString(w, RoomId.ToString(CultureInfo.InvariantCulture));
            w.Append(",\"outcome\":").Append(Outcome == Outcome.Aborted ? "\"ABORTED\"" : "\"SETTLED\"");
            if (WinnerTeam.HasValue)
            {
                w.Append(",\"winner_team\":").Append(WinnerTeam.Value.ToString(CultureInfo.InvariantCulture));
            }
            if (Placements.Count > 0)
            {
                w.Append(",\"placements\":[");
                for (int i = 0; i < Placements.Count; i++)
                {
                    if (i > 0) w.Append(',');
                    w.Append("{\"team\":").Append(Placements[i].Team.ToString(CultureInfo.InvariantCulture));
                    w.Append(",\"rank\":").Append(Placements[i].Rank.ToString(CultureInfo.InvariantCulture));
                    w.Append('}');
                }
                w.Append(']');
            }
            if (Suspect) w.Append(",\"suspect\":true");
            w.Append(",\"ended_at_ms\":");
            Json.WriteString(w, EndedAtMs.ToString(CultureInfo.InvariantCulture));
            if (NodeId.Length > 0) { w.Append(",\"node_id\":"); Json.WriteString(w, NodeId); }
            if (ReplayPath.Length > 0) { w.Append(",\"replay_path\":"); Json.WriteString(w, ReplayPath); }
            if (AbortReason.Length > 0) { w.Append(",\"abort_reason\":"); Json.WriteString(w, AbortReason); }
            w.Append(",\"players\":[");
            for (int i = 0; i < Players.Count; i++)
            {
                PlayerResult p = Players[i];
                if (i > 0) w.Append(',');
                w.Append("{\"player_id\":");
                Json.WriteString(w, p.PlayerId);
                w.Append(",\"team\":").Append(p.Team.ToString(CultureInfo.InvariantCulture));
                w.Append(",\"kills\":").Append(p.Kills.ToString(CultureInfo.InvariantCulture));
                w.Append(",\"deaths\":").Append(p.Deaths.ToString(CultureInfo.InvariantCulture));
                w.Append(",\"assists\":").Append(p.Assists.ToString(CultureInfo.InvariantCulture));
                w.Append(",\"score\":");
                Json.WriteString(w, p.Score.ToString(CultureInfo.InvariantCulture));
                if (p.Disconnected) w.Append(",\"disconnected\":true");
                if (p.Share.HasValue)
                {
                    w.Append(",\"share\":");
                    Json.WriteDouble(w, p.Share.Value);
                }
                w.Append('}');
            }
            w.Append("]}");
        }

        // Reads one BattleResult in protobuf's JSON mapping. Throws FormatException for anything
        // else, a member the schema does not have included: dropping it would change the result;
        // and for a result that Check refuses.
        public static BattleResult FromJson(string json)
        {
            return FromValue(Json.Parse(json), "the result");
        }

        // Reads a file's JSON: one BattleResult, or a batch {"results": [...]} (isBatch is then
        // true), refusing unknown members as FromJson does.
        public static List<BattleResult> ListFromJson(string json, out bool isBatch)
        {
            var document = Json.Parse(json) as Dictionary<string, object>;
            if (document == null) throw new FormatException("not a JSON object");
            var results = new List<BattleResult>();
            isBatch = document.ContainsKey("results");
            if (!isBatch)
            {
                results.Add(FromValue(document, "the result"));
                return results;
            }
            foreach (string key in document.Keys)
            {
                if (key != "results") throw new FormatException("unknown field '" + key + "' in the batch");
            }
            var items = document["results"] as List<object>;
            if (items == null || items.Count == 0) throw new FormatException("the batch holds no results");
            for (int i = 0; i < items.Count; i++) results.Add(FromValue(items[i], "result " + i));
            return results;
        }

        static BattleResult FromValue(object value, string what)
        {
            var o = value as Dictionary<string, object>;
            if (o == null) throw new FormatException(what + " is not a JSON object");
            var r = new BattleResult();
            foreach (KeyValuePair<string, object> m in o)
            {
                switch (m.Key)
                {
                    case "room_id": r.RoomId = Json.ToUInt64(m.Value, m.Key); break;
                    case "outcome":
                        string outcome = m.Value as string;
                        if (outcome == "SETTLED") r.Outcome = Outcome.Settled;
                        else if (outcome == "ABORTED") r.Outcome = Outcome.Aborted;
                        else throw new FormatException("outcome must be \"SETTLED\" or \"ABORTED\"");
                        break;
                    case "winner_team": r.WinnerTeam = Json.ToUInt32(m.Value, m.Key); break;
                    case "suspect": r.Suspect = Json.ToBool(m.Value, m.Key); break;
                    case "ended_at_ms": r.EndedAtMs = Json.ToInt64(m.Value, m.Key); break;
                    case "node_id": r.NodeId = Json.ToStr(m.Value, m.Key); break;
                    case "replay_path": r.ReplayPath = Json.ToStr(m.Value, m.Key); break;
                    case "abort_reason": r.AbortReason = Json.ToStr(m.Value, m.Key); break;
                    case "placements":
                        var placements = m.Value as List<object>;
                        if (placements == null) throw new FormatException("placements must be an array");
                        foreach (object p in placements) r.Placements.Add(PlacementFromValue(p, what));
                        break;
                    case "players":
                        var players = m.Value as List<object>;
                        if (players == null) throw new FormatException("players must be an array");
                        foreach (object p in players) r.Players.Add(PlayerFromValue(p, what));
                        break;
                    default:
                        throw new FormatException("unknown field '" + m.Key + "' in " + what);
                }
            }
            try
            {
                r.Check();
            }
            catch (ArgumentException e)
            {
                throw new FormatException(what + ": " + e.Message);
            }
            return r;
        }

        static PlayerResult PlayerFromValue(object value, string what)
        {
            var o = value as Dictionary<string, object>;
            if (o == null) throw new FormatException("a player of " + what + " is not a JSON object");
            var p = new PlayerResult();
            foreach (KeyValuePair<string, object> m in o)
            {
                switch (m.Key)
                {
                    case "player_id": p.PlayerId = Json.ToIdString(m.Value, m.Key); break;
                    case "team": p.Team = Json.ToUInt32(m.Value, m.Key); break;
                    case "kills": p.Kills = Json.ToUInt32(m.Value, m.Key); break;
                    case "deaths": p.Deaths = Json.ToUInt32(m.Value, m.Key); break;
                    case "assists": p.Assists = Json.ToUInt32(m.Value, m.Key); break;
                    case "score": p.Score = Json.ToInt64(m.Value, m.Key); break;
                    case "disconnected": p.Disconnected = Json.ToBool(m.Value, m.Key); break;
                    case "share": p.Share = Json.ToDouble(m.Value, m.Key); break;
                    default:
                        throw new FormatException("unknown field '" + m.Key + "' in a player of " + what);
                }
            }
            return p;
        }

        static TeamPlacement PlacementFromValue(object value, string what)
        {
            var o = value as Dictionary<string, object>;
            if (o == null) throw new FormatException("a placement of " + what + " is not a JSON object");
            var p = new TeamPlacement();
            foreach (KeyValuePair<string, object> m in o)
            {
                switch (m.Key)
                {
                    case "team": p.Team = Json.ToUInt32(m.Value, m.Key); break;
                    case "rank": p.Rank = Json.ToUInt32(m.Value, m.Key); break;
                    default:
                        throw new FormatException("unknown field '" + m.Key + "' in a placement of " + what);
                }
            }
            return p;
        }
    }

    // The node's answer for a stored result (verdict.v1.StoredResult): where it waits in the
    // outbox for delivery. Duplicate: the node still held an identical result and wrote nothing.
    public sealed class StoredResult
    {
        public ulong RoomId;
        public uint Shard;
        public ulong Sequence;
        public bool Duplicate;

        public string ToJson()
        {
            return "{\"room_id\":\"" + RoomId.ToString(CultureInfo.InvariantCulture) + "\",\"shard\":" +
                   Shard.ToString(CultureInfo.InvariantCulture) + ",\"sequence\":\"" +
                   Sequence.ToString(CultureInfo.InvariantCulture) + "\",\"duplicate\":" +
                   (Duplicate ? "true" : "false") + "}";
        }

        // Read leniently: a newer node may add members to its answers.
        internal static StoredResult FromValue(object value)
        {
            var o = value as Dictionary<string, object>;
            if (o == null) throw new FormatException("a stored result is not a JSON object");
            var s = new StoredResult();
            object v;
            if (o.TryGetValue("room_id", out v)) s.RoomId = Json.ToUInt64(v, "room_id");
            if (o.TryGetValue("shard", out v)) s.Shard = Json.ToUInt32(v, "shard");
            if (o.TryGetValue("sequence", out v)) s.Sequence = Json.ToUInt64(v, "sequence");
            if (o.TryGetValue("duplicate", out v)) s.Duplicate = Json.ToBool(v, "duplicate");
            return s;
        }
    }

    // An answer of the node that is not a success (its application/problem+json members), or a
    // batch item's problem. Retryable problems are retried by the client until its deadline; the
    // one thrown then is the last answer.
    public sealed class ProblemException : Exception
    {
        public readonly int Status;        // HTTP status; 0 when there was no answer
        public readonly string Code;       // e.g. "INVALID_ARGUMENT", "IDEMPOTENCY_MISMATCH"
        public readonly bool Retryable;
        public readonly string Detail;
        internal TimeSpan? RetryAfter;

        public ProblemException(int status, string code, string detail, bool retryable)
            : base("verdict-node answered " + status + " " + code + ": " + detail)
        {
            Status = status;
            Code = code;
            Detail = detail;
            Retryable = retryable;
        }

        public string ToJson()
        {
            var w = new StringBuilder("{\"code\":");
            Json.WriteString(w, Code);
            w.Append(",\"status\":").Append(Status.ToString(CultureInfo.InvariantCulture));
            w.Append(",\"retryable\":").Append(Retryable ? "true" : "false").Append(",\"detail\":");
            Json.WriteString(w, Detail);
            return w.Append('}').ToString();
        }

        internal static ProblemException FromValue(object value, int fallbackStatus)
        {
            var o = value as Dictionary<string, object> ?? new Dictionary<string, object>();
            object v;
            int status = o.TryGetValue("status", out v) && v is JsonNumber
                             ? (int)Json.ToUInt32(v, "status") : fallbackStatus;
            string code = o.TryGetValue("code", out v) && v is string ? (string)v : "HTTP_" + status;
            string detail = o.TryGetValue("detail", out v) && v is string ? (string)v : "";
            bool retryable = o.TryGetValue("retryable", out v) && v is bool && (bool)v;
            return new ProblemException(status, code, detail, retryable);
        }
    }

    // The answer for one result of a batch: Stored, or Problem.
    public sealed class StoredItem
    {
        public StoredResult Stored;
        public ProblemException Problem;

        public string ToJson()
        {
            return Stored != null ? "{\"stored\":" + Stored.ToJson() + "}"
                                  : "{\"problem\":" + Problem.ToJson() + "}";
        }
    }

    // Posts results to one verdict-node. Set its fields before first use.
    public sealed class IngestClient : IDisposable
    {
        public const int MaxBatch = 256;  // results per batch request (and 4 MiB)

        // Bounds one attempt: connecting, sending, and reading the answer.
        public TimeSpan AttemptTimeout = TimeSpan.FromSeconds(30);
        // Bound the wait between attempts of a request when the node gave no Retry-After: it
        // doubles from FirstBackoff up to MaxBackoff, with jitter. (A batch's retryable items wait
        // by the documented rule instead: ItemBackoff.)
        public TimeSpan FirstBackoff = TimeSpan.FromMilliseconds(100);
        public TimeSpan MaxBackoff = TimeSpan.FromSeconds(5);
        // The wait before a batch's retryable items are posted again, by docs/sidecar.md's retry
        // rule for batch items: 1 s, doubling up to 30 s.
        static readonly TimeSpan FirstItemBackoff = TimeSpan.FromSeconds(1);
        static readonly TimeSpan MaxItemBackoff = TimeSpan.FromSeconds(30);
        // Told of each failed attempt before the wait that follows it (to log it, say); called on
        // the posting thread.
        public Action<Exception, TimeSpan> OnRetry;

        // A kept connection idle longer is dropped: the node closes it at 10 s.
        static readonly TimeSpan IdleLimit = TimeSpan.FromSeconds(5);

        readonly string unixPath;  // or null for TCP
        readonly string host;      // to look up: no brackets around an IPv6 address
        readonly string authority; // for the Host header: HOST:PORT
        readonly int port;
        readonly string token;
        readonly object connectionLock = new object();
        Connection connection;  // guarded by connectionLock
        readonly Random jitter = new Random();
        // Waits between attempts, or throws OperationCanceledException; tests replace it to see
        // the waits without spending them.
        internal Action<TimeSpan, CancellationToken> SleepFor = Sleep;

        IngestClient(string unixPath, string host, string authority, int port, string token)
        {
            this.unixPath = unixPath;
            this.host = host;
            this.authority = authority;
            this.port = port;
            this.token = token;
        }

        // The node's Unix socket (its --ingest-listen unix:PATH), which takes no token.
        public static IngestClient ForUnixSocket(string path)
        {
            if (string.IsNullOrEmpty(path)) throw new ArgumentException("the socket's path is empty");
            return new IngestClient(path, null, "verdict-node", 0, null);
        }

        // A TCP ingest listener, "http://HOST:PORT", and the node's ingest token it requires.
        public static IngestClient ForTcp(string baseUrl, string ingestToken)
        {
            Uri uri;
            if (!Uri.TryCreate(baseUrl, UriKind.Absolute, out uri) || uri.Scheme != "http" ||
                (uri.AbsolutePath != "/" && uri.AbsolutePath != ""))
            {
                throw new ArgumentException("the URL must be http://HOST:PORT, not " + baseUrl);
            }
            if (string.IsNullOrEmpty(ingestToken))
            {
                throw new ArgumentException("a TCP listener needs the node's ingest token");
            }
            return new IngestClient(null, uri.DnsSafeHost, uri.Authority, uri.Port, ingestToken);
        }

        // Stores one result (POST /v1/results) and returns where it is stored; Duplicate is set
        // when the node still held it (200), unset when it stored it now (201). Retries until the
        // node answers, the answer is final, `deadline` has passed or `cancel` is cancelled
        // (OperationCanceledException). A refusal (400, 401, 413, 415, 422) or the last answer at
        // the deadline is a ProblemException; a result that BattleResult.Check refuses throws its
        // ArgumentException, and nothing is posted.
        public StoredResult PostResult(BattleResult result, TimeSpan deadline,
                                       CancellationToken cancel = default(CancellationToken))
        {
            result.Check();
            var body = result.ToJson();
            object reply = Post("/v1/results", body, deadline, cancel);
            StoredResult stored = StoredResult.FromValue(reply);
            if (stored.RoomId != result.RoomId)
            {
                throw new ProblemException(0, "BAD_REPLY", "an answer for room " + stored.RoomId +
                                           ", not " + result.RoomId, false);
            }
            return stored;
        }

        // Stores up to MaxBatch results with one fsync (POST /v1/results:batch) and returns one
        // item per result, in order. Items that are retryable problems are posted again, alone
        // of the others, after 1 s doubling up to 30 s, until stored or until `deadline`; they then
        // hold what the node last answered. A ProblemException is about the request as a whole; a
        // result that BattleResult.Check refuses throws its ArgumentException, and nothing is
        // posted.
        public List<StoredItem> PostBatch(IList<BattleResult> results, TimeSpan deadline,
                                          CancellationToken cancel = default(CancellationToken))
        {
            if (results.Count > MaxBatch)
            {
                throw new ArgumentException("a batch holds at most " + MaxBatch + " results, not " + results.Count);
            }
            for (int i = 0; i < results.Count; i++)
            {
                try
                {
                    results[i].Check();
                }
                catch (ArgumentException e)
                {
                    throw new ArgumentException("result " + i + ": " + e.Message);
                }
            }
            DateTime end = DateTime.UtcNow + deadline;
            var items = new StoredItem[results.Count];
            var pending = new List<int>();
            for (int i = 0; i < results.Count; i++) pending.Add(i);
            for (int attempt = 0; pending.Count > 0; attempt++)
            {
                if (attempt > 0)
                {
                    TimeSpan wait = ItemBackoff(attempt);
                    if (DateTime.UtcNow + wait >= end) break;
                    ProblemException first = items[pending[0]].Problem;
                    if (OnRetry != null)
                    {
                        OnRetry(new ProblemException(first.Status, first.Code, pending.Count +
                                " item(s) retryable, first: " + first.Detail, true), wait);
                    }
                    SleepFor(wait, cancel);
                }
                var body = new StringBuilder("{\"results\":[");
                for (int k = 0; k < pending.Count; k++)
                {
                    if (k > 0) body.Append(',');
                    results[pending[k]].WriteJson(body);
                }
                body.Append("]}");
                var reply = Post("/v1/results:batch", body.ToString(), end - DateTime.UtcNow, cancel)
                    as Dictionary<string, object>;
                object value;
                var answered = reply != null && reply.TryGetValue("items", out value) ? value as List<object> : null;
                if (answered == null || answered.Count != pending.Count)
                {
                    throw new ProblemException(0, "BAD_REPLY", (answered == null ? 0 : answered.Count) +
                                               " items for " + pending.Count + " results", false);
                }
                var again = new List<int>();
                for (int k = 0; k < pending.Count; k++)
                {
                    var item = answered[k] as Dictionary<string, object> ?? new Dictionary<string, object>();
                    var stored = new StoredItem();
                    if (item.TryGetValue("stored", out value)) stored.Stored = StoredResult.FromValue(value);
                    else stored.Problem = ProblemException.FromValue(item.TryGetValue("problem", out value) ? value : null, 0);
                    items[pending[k]] = stored;
                    if (stored.Problem != null && stored.Problem.Retryable) again.Add(pending[k]);
                }
                pending = again;
            }
            return new List<StoredItem>(items);
        }

        // PostResult and PostBatch off the calling thread (Unity's main thread must not block).
        public Task<StoredResult> PostResultAsync(BattleResult result, TimeSpan deadline,
                                                  CancellationToken cancel = default(CancellationToken))
        {
            return Task.Run(() => PostResult(result, deadline, cancel), cancel);
        }

        public Task<List<StoredItem>> PostBatchAsync(IList<BattleResult> results, TimeSpan deadline,
                                                     CancellationToken cancel = default(CancellationToken))
        {
            return Task.Run(() => PostBatch(results, deadline, cancel), cancel);
        }

        public void Dispose()
        {
            lock (connectionLock)
            {
                if (connection != null) connection.Close();
                connection = null;
            }
        }

        // Posts `body` to `path` until a final answer, and returns a 2xx answer's JSON.
        object Post(string path, string body, TimeSpan deadline, CancellationToken cancel)
        {
            DateTime end = DateTime.UtcNow + deadline;
            byte[] bytes = Json.Utf8.GetBytes(body);  // Check made sure it has a UTF-8 form
            for (int retry = 1; ; retry++)
            {
                cancel.ThrowIfCancellationRequested();
                ProblemException last;
                TimeSpan? wait;
                try
                {
                    return Attempt(path, bytes);
                }
                catch (ProblemException problem)
                {
                    if (!problem.Retryable) throw;
                    last = problem;
                    wait = problem.RetryAfter;
                }
                catch (Exception e) when (e is IOException || e is SocketException ||
                                          e is ObjectDisposedException)
                {
                    // No socket (a restarting node), refused, reset, timed out, or a kept
                    // connection the node closed: retried on a new connection.
                    last = new ProblemException(0, "TRANSPORT", e.Message, true);
                    wait = null;
                }
                TimeSpan pause = wait ?? Backoff(retry);
                if (DateTime.UtcNow + pause >= end)
                {
                    throw new ProblemException(last.Status, last.Code, "not stored within " +
                                               deadline.TotalSeconds.ToString("0", CultureInfo.InvariantCulture) +
                                               " s; last answer: " + last.Detail, true);
                }
                if (OnRetry != null) OnRetry(last, pause);
                SleepFor(pause, cancel);
            }
        }

        // One request on the kept connection (a new one if there is none, or it idled past
        // IdleLimit). A transport failure closes the connection and throws IOException or
        // SocketException; a non-2xx answer throws ProblemException, retryable only for 503.
        object Attempt(string path, byte[] body)
        {
            Response response;
            lock (connectionLock)
            {
                if (connection != null && DateTime.UtcNow - connection.LastUsed > IdleLimit)
                {
                    connection.Close();
                    connection = null;
                }
                try
                {
                    if (connection == null) connection = Connect();
                    response = connection.Exchange(BuildRequest(path, body.Length), body);
                }
                catch
                {
                    if (connection != null) connection.Close();
                    connection = null;
                    throw;
                }
                if (response.Close)
                {
                    connection.Close();
                    connection = null;
                }
            }
            string text = Encoding.UTF8.GetString(response.Body);
            // 200 (the node still held it) and 201 (stored now) are the same success.
            if (response.Status == 200 || response.Status == 201)
            {
                try
                {
                    return Json.Parse(text);
                }
                catch (FormatException e)
                {
                    throw new ProblemException(response.Status, "BAD_REPLY", "undecodable reply: " + e.Message, false);
                }
            }
            ProblemException problem = null;
            if (response.ContentType.StartsWith("application/problem+json", StringComparison.OrdinalIgnoreCase))
            {
                try
                {
                    problem = ProblemException.FromValue(Json.Parse(text), response.Status);
                }
                catch (FormatException)
                {
                    // keeps the raw text below
                }
            }
            if (problem == null) problem = new ProblemException(response.Status, "HTTP_" + response.Status, text, false);
            // Only 503 is retried, whatever a body says: any other status is final.
            problem = new ProblemException(response.Status, problem.Code, problem.Detail, response.Status == 503);
            int seconds;
            if (response.RetryAfter != null &&
                int.TryParse(response.RetryAfter, NumberStyles.None, CultureInfo.InvariantCulture, out seconds))
            {
                problem.RetryAfter = TimeSpan.FromSeconds(seconds);
            }
            throw problem;
        }

        string BuildRequest(string path, int length)
        {
            var head = new StringBuilder();
            head.Append("POST ").Append(path).Append(" HTTP/1.1\r\n");
            head.Append("Host: ").Append(authority).Append("\r\n");
            head.Append("Content-Type: application/json\r\nAccept: application/json\r\n");
            head.Append("Content-Length: ").Append(length.ToString(CultureInfo.InvariantCulture)).Append("\r\n");
            if (token != null) head.Append("Authorization: Bearer ").Append(token).Append("\r\n");
            return head.Append("\r\n").ToString();
        }

        Connection Connect()
        {
            int timeoutMs = (int)AttemptTimeout.TotalMilliseconds;
            if (unixPath != null)
            {
                var socket = new Socket(AddressFamily.Unix, SocketType.Stream, ProtocolType.Unspecified);
                try
                {
                    socket.Connect(new UnixDomainSocketEndPoint(unixPath));
                }
                catch
                {
                    socket.Close();
                    throw;
                }
                return new Connection(socket, timeoutMs);
            }
            SocketException failed = null;
            foreach (IPAddress address in Dns.GetHostAddresses(host))
            {
                var socket = new Socket(address.AddressFamily, SocketType.Stream, ProtocolType.Tcp);
                try
                {
                    IAsyncResult connecting = socket.BeginConnect(address, port, null, null);
                    if (!connecting.AsyncWaitHandle.WaitOne(timeoutMs))
                    {
                        throw new SocketException((int)SocketError.TimedOut);
                    }
                    socket.EndConnect(connecting);
                    socket.NoDelay = true;
                    return new Connection(socket, timeoutMs);
                }
                catch (SocketException e)
                {
                    socket.Close();
                    failed = e;
                }
            }
            throw failed ?? new SocketException((int)SocketError.HostNotFound);
        }

        TimeSpan Backoff(int retry)
        {
            double d = FirstBackoff.TotalMilliseconds;
            for (int i = 1; i < retry && d < MaxBackoff.TotalMilliseconds; i++) d *= 2;
            d = Math.Min(d, MaxBackoff.TotalMilliseconds);
            lock (jitter) return TimeSpan.FromMilliseconds(d / 2 + jitter.NextDouble() * d / 2);
        }

        // The wait before the given resend (1 for the first) of a batch's retryable items:
        // FirstItemBackoff doubling up to MaxItemBackoff, no jitter.
        internal static TimeSpan ItemBackoff(int resend)
        {
            TimeSpan d = FirstItemBackoff;
            for (int i = 1; i < resend && d < MaxItemBackoff; i++) d = d + d;
            return d < MaxItemBackoff ? d : MaxItemBackoff;
        }

        static void Sleep(TimeSpan wait, CancellationToken cancel)
        {
            if (wait <= TimeSpan.Zero) return;
            if (cancel.WaitHandle.WaitOne(wait)) cancel.ThrowIfCancellationRequested();
        }
    }

    // An HTTP/1.1 answer: what the client reads of it.
    sealed class Response
    {
        public int Status;
        public string ContentType = "";
        public string RetryAfter;
        public bool Close;  // the server closes the connection after it
        public byte[] Body;
    }

    // One HTTP/1.1 connection: a request written, its answer read (Content-Length, chunked, or
    // up to the server's close), bounded in size. Not thread-safe: IngestClient locks around it.
    sealed class Connection
    {
        const int MaxHeaderBytes = 64 * 1024;
        const int MaxBodyBytes = 8 * 1024 * 1024;

        readonly NetworkStream stream;  // owns the socket
        readonly byte[] buffer = new byte[16 * 1024];
        int start, end;  // unread bytes of buffer
        public DateTime LastUsed = DateTime.UtcNow;

        public Connection(Socket socket, int timeoutMs)
        {
            socket.SendTimeout = timeoutMs;
            socket.ReceiveTimeout = timeoutMs;
            stream = new NetworkStream(socket, true);
        }

        public void Close()
        {
            stream.Close();
        }

        public Response Exchange(string head, byte[] body)
        {
            byte[] headBytes = Encoding.ASCII.GetBytes(head);
            stream.Write(headBytes, 0, headBytes.Length);
            stream.Write(body, 0, body.Length);
            stream.Flush();
            var response = new Response();
            string statusLine = ReadLine();
            string[] status = statusLine.Split(' ');
            if (status.Length < 2 || !status[0].StartsWith("HTTP/1.") ||
                !int.TryParse(status[1], NumberStyles.None, CultureInfo.InvariantCulture, out response.Status))
            {
                throw new IOException("not an HTTP answer: " + statusLine);
            }
            long length = -1;
            bool chunked = false;
            response.Close = status[0] == "HTTP/1.0";
            int headerBytes = statusLine.Length;
            for (string line = ReadLine(); line.Length > 0; line = ReadLine())
            {
                headerBytes += line.Length;
                if (headerBytes > MaxHeaderBytes) throw new IOException("the answer's header is too large");
                int colon = line.IndexOf(':');
                if (colon <= 0) throw new IOException("a malformed header line: " + line);
                string name = line.Substring(0, colon).Trim().ToLowerInvariant();
                string value = line.Substring(colon + 1).Trim();
                if (name == "content-length") length = long.Parse(value, NumberStyles.None, CultureInfo.InvariantCulture);
                else if (name == "transfer-encoding") chunked = value.ToLowerInvariant().Contains("chunked");
                else if (name == "content-type") response.ContentType = value;
                else if (name == "retry-after") response.RetryAfter = value;
                else if (name == "connection") response.Close = value.ToLowerInvariant().Contains("close");
            }
            var bodyOut = new MemoryStream();
            if (chunked)
            {
                for (;;)
                {
                    string size = ReadLine();
                    int semicolon = size.IndexOf(';');
                    long n = long.Parse(semicolon < 0 ? size : size.Substring(0, semicolon),
                                        NumberStyles.HexNumber, CultureInfo.InvariantCulture);
                    if (n == 0)
                    {
                        while (ReadLine().Length > 0) { }  // trailers
                        break;
                    }
                    ReadExactly(bodyOut, n);
                    ReadLine();
                }
            }
            else if (length >= 0)
            {
                ReadExactly(bodyOut, length);
            }
            else
            {
                while (Fill()) Take(bodyOut, end - start);  // to the server's close
                response.Close = true;
            }
            response.Body = bodyOut.ToArray();
            LastUsed = DateTime.UtcNow;
            return response;
        }

        // Reads more into buffer; false at the server's close.
        bool Fill()
        {
            if (start == end) start = end = 0;
            if (end == buffer.Length)
            {
                Buffer.BlockCopy(buffer, start, buffer, 0, end - start);
                end -= start;
                start = 0;
            }
            int n = stream.Read(buffer, end, buffer.Length - end);
            end += n;
            return n > 0;
        }

        string ReadLine()
        {
            var line = new StringBuilder();
            for (;;)
            {
                while (start < end)
                {
                    char c = (char)buffer[start++];
                    if (c == '\n')
                    {
                        if (line.Length > 0 && line[line.Length - 1] == '\r') line.Length--;
                        return line.ToString();
                    }
                    line.Append(c);
                    if (line.Length > MaxHeaderBytes) throw new IOException("a header line is too long");
                }
                if (!Fill()) throw new IOException("the connection closed before an answer");
            }
        }

        void ReadExactly(MemoryStream into, long n)
        {
            if (into.Length + n > MaxBodyBytes) throw new IOException("the answer's body is too large");
            while (n > 0)
            {
                if (start == end && !Fill()) throw new IOException("the connection closed inside an answer");
                int take = (int)Math.Min(n, end - start);
                Take(into, take);
                n -= take;
            }
        }

        void Take(MemoryStream into, int n)
        {
            if (into.Length + n > MaxBodyBytes) throw new IOException("the answer's body is too large");
            into.Write(buffer, start, n);
            start += n;
        }
    }

    // A JSON number as written, so 64-bit integers keep every digit.
    sealed class JsonNumber
    {
        public readonly string Text;
        public JsonNumber(string text) { Text = text; }
    }

    // The JSON the client needs: parsed into Dictionary<string, object>, List<object>, string,
    // JsonNumber, bool and null; strings written with the escapes JSON requires.
    static class Json
    {
        // UTF-8 that throws where Encoding.UTF8 would put U+FFFD: for bytes that are not UTF-8,
        // and for a string holding half of a surrogate pair.
        public static readonly UTF8Encoding Utf8 = new UTF8Encoding(false, true);

        // Whether every surrogate in value is half of a pair, in order: a string UTF-8 can carry.
        public static bool IsWellFormed(string value)
        {
            for (int i = 0; i < value.Length; i++)
            {
                if (char.IsHighSurrogate(value[i]) && i + 1 < value.Length && char.IsLowSurrogate(value[i + 1])) i++;
                else if (char.IsSurrogate(value[i])) return false;
            }
            return true;
        }

        public static object Parse(string text)
        {
            int i = 0;
            object value = ParseValue(text, ref i, 0);
            SkipSpace(text, ref i);
            if (i != text.Length) throw new FormatException("data after the JSON value at " + i);
            return value;
        }

        static object ParseValue(string s, ref int i, int depth)
        {
            if (depth > 64) throw new FormatException("JSON nested too deep");
            SkipSpace(s, ref i);
            if (i >= s.Length) throw new FormatException("the JSON ends early");
            char c = s[i];
            if (c == '{')
            {
                var o = new Dictionary<string, object>();
                i++;
                SkipSpace(s, ref i);
                if (i < s.Length && s[i] == '}') { i++; return o; }
                for (;;)
                {
                    SkipSpace(s, ref i);
                    if (i >= s.Length || s[i] != '"') throw new FormatException("a member name expected at " + i);
                    string key = ParseString(s, ref i);
                    SkipSpace(s, ref i);
                    Expect(s, ref i, ':');
                    if (o.ContainsKey(key)) throw new FormatException("member '" + key + "' given twice");
                    o[key] = ParseValue(s, ref i, depth + 1);
                    SkipSpace(s, ref i);
                    if (i < s.Length && s[i] == ',') { i++; continue; }
                    Expect(s, ref i, '}');
                    return o;
                }
            }
            if (c == '[')
            {
                var a = new List<object>();
                i++;
                SkipSpace(s, ref i);
                if (i < s.Length && s[i] == ']') { i++; return a; }
                for (;;)
                {
                    a.Add(ParseValue(s, ref i, depth + 1));
                    SkipSpace(s, ref i);
                    if (i < s.Length && s[i] == ',') { i++; continue; }
                    Expect(s, ref i, ']');
                    return a;
                }
            }
            if (c == '"') return ParseString(s, ref i);
            if (Word(s, ref i, "true")) return true;
            if (Word(s, ref i, "false")) return false;
            if (Word(s, ref i, "null")) return null;
            int begin = i;
            if (i < s.Length && s[i] == '-') i++;
            while (i < s.Length && (char.IsDigit(s[i]) || s[i] == '.' || s[i] == 'e' || s[i] == 'E' ||
                                    s[i] == '+' || s[i] == '-'))
            {
                i++;
            }
            if (i == begin) throw new FormatException("unexpected '" + c + "' at " + i);
            double ignored;
            string number = s.Substring(begin, i - begin);
            if (!double.TryParse(number, NumberStyles.Float, CultureInfo.InvariantCulture, out ignored))
            {
                throw new FormatException("not a number: " + number);
            }
            return new JsonNumber(number);
        }

        static string ParseString(string s, ref int i)
        {
            var b = new StringBuilder();
            i++;  // the opening quote
            while (i < s.Length)
            {
                char c = s[i++];
                if (c == '"') return b.ToString();
                if (c < 0x20) throw new FormatException("a control character inside a string");
                if (c != '\\') { b.Append(c); continue; }
                if (i >= s.Length) break;
                char e = s[i++];
                switch (e)
                {
                    case '"': b.Append('"'); break;
                    case '\\': b.Append('\\'); break;
                    case '/': b.Append('/'); break;
                    case 'b': b.Append('\b'); break;
                    case 'f': b.Append('\f'); break;
                    case 'n': b.Append('\n'); break;
                    case 'r': b.Append('\r'); break;
                    case 't': b.Append('\t'); break;
                    case 'u':
                        char unit = EscapedUnit(s, ref i);
                        if (char.IsLowSurrogate(unit))
                        {
                            throw new FormatException("\\u" + ((int)unit).ToString("x4", CultureInfo.InvariantCulture) +
                                                      " is the low half of a UTF-16 surrogate pair without its " +
                                                      "high half: it names no character");
                        }
                        b.Append(unit);
                        if (!char.IsHighSurrogate(unit)) break;
                        if (i + 1 < s.Length && s[i] == '\\' && s[i + 1] == 'u')
                        {
                            i += 2;
                            char low = EscapedUnit(s, ref i);
                            if (char.IsLowSurrogate(low))
                            {
                                b.Append(low);
                                break;
                            }
                        }
                        throw new FormatException("\\u" + ((int)unit).ToString("x4", CultureInfo.InvariantCulture) +
                                                  " is the high half of a UTF-16 surrogate pair without its " +
                                                  "low half: it names no character");
                    default: throw new FormatException("an unknown escape \\" + e);
                }
            }
            throw new FormatException("a string without its closing quote");
        }

        // The UTF-16 code unit of the four hex digits at s[i], which it passes.
        static char EscapedUnit(string s, ref int i)
        {
            int unit;
            if (i + 4 > s.Length ||
                !int.TryParse(s.Substring(i, 4), NumberStyles.AllowHexSpecifier, CultureInfo.InvariantCulture, out unit))
            {
                throw new FormatException("a \\u escape without four hex digits");
            }
            i += 4;
            return (char)unit;
        }

        static bool Word(string s, ref int i, string word)
        {
            if (string.CompareOrdinal(s, i, word, 0, word.Length) != 0) return false;
            i += word.Length;
            return true;
        }

        static void Expect(string s, ref int i, char c)
        {
            if (i >= s.Length || s[i] != c) throw new FormatException("'" + c + "' expected at " + i);
            i++;
        }

        static void SkipSpace(string s, ref int i)
        {
            while (i < s.Length && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
        }

        public static void WriteString(StringBuilder w, string value)
        {
            w.Append('"');
            foreach (char c in value)
            {
                if (c == '"') w.Append("\\\"");
                else if (c == '\\') w.Append("\\\\");
                else if (c < 0x20) w.Append("\\u").Append(((int)c).ToString("x4", CultureInfo.InvariantCulture));
                else w.Append(c);
            }
            w.Append('"');
        }

        // The shortest text that reads back as the same double: "R", unless the runtime's "R" does
        // not round-trip (the .NET Framework's may not), then all 17 digits.
        public static void WriteDouble(StringBuilder w, double value)
        {
            string text = value.ToString("R", CultureInfo.InvariantCulture);
            if (double.Parse(text, NumberStyles.Float, CultureInfo.InvariantCulture) != value)
            {
                text = value.ToString("G17", CultureInfo.InvariantCulture);
            }
            w.Append(text);
        }

        // A 64-bit integer is a JSON number or a decimal string (protobuf's JSON mapping).
        static string IntegerText(object v, string name)
        {
            var number = v as JsonNumber;
            string text = number != null ? number.Text : v as string;
            if (text == null) throw new FormatException(name + " must be a number");
            return text;
        }

        public static ulong ToUInt64(object v, string name)
        {
            ulong n;
            if (!ulong.TryParse(IntegerText(v, name), NumberStyles.None, CultureInfo.InvariantCulture, out n))
            {
                throw new FormatException(name + " must be a non-negative integer");
            }
            return n;
        }

        public static long ToInt64(object v, string name)
        {
            long n;
            if (!long.TryParse(IntegerText(v, name), NumberStyles.AllowLeadingSign, CultureInfo.InvariantCulture, out n))
            {
                throw new FormatException(name + " must be an integer");
            }
            return n;
        }

        public static uint ToUInt32(object v, string name)
        {
            var number = v as JsonNumber;
            uint n;
            if (number == null || !uint.TryParse(number.Text, NumberStyles.None, CultureInfo.InvariantCulture, out n))
            {
                throw new FormatException(name + " must be a non-negative 32-bit integer");
            }
            return n;
        }

        public static double ToDouble(object v, string name)
        {
            var number = v as JsonNumber;
            if (number == null) throw new FormatException(name + " must be a number");
            return double.Parse(number.Text, NumberStyles.Float, CultureInfo.InvariantCulture);
        }

        public static bool ToBool(object v, string name)
        {
            if (!(v is bool)) throw new FormatException(name + " must be true or false");
            return (bool)v;
        }

        public static string ToStr(object v, string name)
        {
            var s = v as string;
            if (s == null) throw new FormatException(name + " must be a string");
            return s;
        }

        // A player id: a string, or an integer written as a number (its decimal string).
        public static string ToIdString(object v, string name)
        {
            var number = v as JsonNumber;
            if (number != null) return ToUInt64(v, name).ToString(CultureInfo.InvariantCulture);
            return ToStr(v, name);
        }
    }
}
