// verdict-ingest.exe: posts a battle result to a running verdict-node with VerdictIngest.cs and
// prints where it was stored (a StoredResult, as JSON), as the Go and Python examples do.
//
//   mcs -out:verdict-ingest.exe VerdictIngest.cs VerdictIngestCommand.cs
//   mono verdict-ingest.exe --socket node.sock --room 42 --winner 1 --ended-at-ms 1700000000000 \
//       --players 1:1,2:2
//   mono verdict-ingest.exe --socket node.sock --room 43 --placements 1:2,2:1,3:3 \
//       --ended-at-ms 1700000000000 --players a:1,b:2,c:3
//   mono verdict-ingest.exe --url http://127.0.0.1:9465 --token-file ingest.token --file result.json
//   mono verdict-ingest.exe --socket node.sock --file - < batch.json    # {"results": [...]}
//
// A SETTLED result from flags needs --winner, for two teams (1, 2, or 0 for a draw: a draw is
// said, never implied), or --placements, which ranks every team of a room of any number of teams
// (TEAM:RANK, 1 best, equal ranks tie). Every result from flags needs --ended-at-ms, the battle's
// end: with the room it names the result, so running the command again posts the same result (a
// duplicate), never a second one for the same battle.
//
// A file holds one BattleResult in protobuf's JSON mapping or a batch {"results": [...]}, and is
// posted as it says. The whole file is refused before anything is posted if it has a member the
// schema does not have (a misspelt "winer_team", a placement's "rnk"), a SETTLED result with
// neither winner_team nor placements or with both, bytes that are not UTF-8, or half of a UTF-16
// surrogate pair ("\ud800" alone), which would be posted as U+FFFD. Each retry is said on
// standard error.
// Exit status: 0 stored (or already stored), 1 refused or not stored in time, 2 usage.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using System.Text;
using Verdict.Ingest;

static class VerdictIngestCommand
{
    const string Usage =
        "usage: verdict-ingest.exe (--socket PATH | --url http://HOST:PORT [--token T | --token-file F])\n" +
        "                          (--file FILE|- | --room ID --players ID:TEAM[:K:D:A],...\n" +
        "                           --ended-at-ms MS [--outcome SETTLED|ABORTED]\n" +
        "                           [--winner N | --placements TEAM:RANK,...]) [--timeout SECONDS]\n" +
        "(a SETTLED result takes --winner, 1, 2 or 0 for a draw, or --placements)";

    static int Main(string[] args)
    {
        var flags = new Dictionary<string, string>();
        for (int i = 0; i < args.Length; i++)
        {
            if (!args[i].StartsWith("--") || i + 1 >= args.Length) return Fail(2, "bad argument " + args[i]);
            flags[args[i].Substring(2)] = args[++i];
        }
        string socket = Get(flags, "socket"), url = Get(flags, "url");
        if ((socket == null) == (url == null)) return Fail(2, "give exactly one of --socket and --url");
        string token = Get(flags, "token") ?? Environment.GetEnvironmentVariable("VERDICT_INGEST_TOKEN");
        if (Get(flags, "token-file") != null) token = File.ReadAllText(Get(flags, "token-file")).Trim();
        double timeoutS = 60;
        if (Get(flags, "timeout") != null &&
            !double.TryParse(Get(flags, "timeout"), NumberStyles.Float, CultureInfo.InvariantCulture, out timeoutS))
        {
            return Fail(2, "--timeout takes seconds");
        }
        TimeSpan deadline = TimeSpan.FromSeconds(timeoutS);

        IngestClient client;
        try
        {
            client = socket != null ? IngestClient.ForUnixSocket(socket) : IngestClient.ForTcp(url, token);
        }
        catch (ArgumentException e)
        {
            return Fail(2, e.Message);
        }
        client.OnRetry = (error, wait) => Console.Error.WriteLine(
            "verdict-ingest: retrying in " + wait.TotalSeconds.ToString("0.000", CultureInfo.InvariantCulture) +
            " s: " + error.Message);
        using (client)
        {
            try
            {
                if (Get(flags, "file") != null) return PostFile(client, Get(flags, "file"), deadline);
                BattleResult result;
                string usage = ResultFromFlags(flags, out result);
                if (usage != null) return Fail(2, usage);
                Console.WriteLine(client.PostResult(result, deadline).ToJson());
                return 0;
            }
            catch (ProblemException problem)
            {
                return Fail(1, problem.Message);
            }
            catch (ArgumentException refused)  // BattleResult.Check: nothing was posted
            {
                return Fail(1, refused.Message);
            }
        }
    }

    static int PostFile(IngestClient client, string path, TimeSpan deadline)
    {
        List<BattleResult> results;
        bool batch;
        try
        {
            results = BattleResult.ListFromJson(ReadText(path), out batch);
        }
        catch (FormatException e)
        {
            return Fail(1, path + ": " + e.Message + " (nothing was posted)");
        }
        if (!batch)
        {
            Console.WriteLine(client.PostResult(results[0], deadline).ToJson());
            return 0;
        }
        List<StoredItem> items = client.PostBatch(results, deadline);
        var output = new StringBuilder("{\"items\":[");
        ProblemException refused = null;
        int refusedIndex = 0;
        for (int i = 0; i < items.Count; i++)
        {
            if (i > 0) output.Append(',');
            output.Append(items[i].ToJson());
            if (items[i].Problem != null && refused == null)
            {
                refused = items[i].Problem;
                refusedIndex = i;
            }
        }
        Console.WriteLine(output.Append("]}").ToString());
        if (refused == null) return 0;
        return Fail(1, "result " + refusedIndex + " (room " + results[refusedIndex].RoomId + "): " + refused.Message);
    }

    // The text of the file at path ("-": standard input). Throws FormatException for bytes that are
    // not UTF-8, which File.ReadAllText would read as U+FFFD.
    internal static string ReadText(string path)
    {
        using (Stream input = path == "-" ? Console.OpenStandardInput() : File.OpenRead(path))
        using (var bytes = new MemoryStream())
        {
            input.CopyTo(bytes);
            try
            {
                return Json.Utf8.GetString(bytes.GetBuffer(), 0, (int)bytes.Length);
            }
            catch (DecoderFallbackException)
            {
                throw new FormatException("the file is not UTF-8");
            }
        }
    }

    // The result the flags describe; returns a usage error, or null.
    internal static string ResultFromFlags(Dictionary<string, string> flags, out BattleResult result)
    {
        result = new BattleResult();
        string room = Get(flags, "room"), players = Get(flags, "players");
        if (room == null || players == null) return "give --room and --players, or --file";
        if (!ulong.TryParse(room, NumberStyles.None, CultureInfo.InvariantCulture, out result.RoomId))
        {
            return "--room takes a room id";
        }
        string outcome = Get(flags, "outcome") ?? "SETTLED";
        if (outcome != "SETTLED" && outcome != "ABORTED") return "--outcome is SETTLED or ABORTED";
        result.Outcome = outcome == "ABORTED" ? Outcome.Aborted : Outcome.Settled;
        string winner = Get(flags, "winner"), placements = Get(flags, "placements");
        if (winner != null && placements != null) return "give --winner (two teams) or --placements, not both";
        if (Get(flags, "ended-at-ms") == null)
        {
            return "give --ended-at-ms, the battle's end in ms since the epoch: with the room it names the " +
                   "result, so that running this again posts the same one";
        }
        if (!long.TryParse(Get(flags, "ended-at-ms"), NumberStyles.None, CultureInfo.InvariantCulture, out result.EndedAtMs))
        {
            return "--ended-at-ms takes milliseconds since the epoch";
        }
        if (placements != null)
        {
            foreach (string spec in placements.Split(','))
            {
                string[] parts = spec.Split(':');
                var placement = new TeamPlacement();
                if (parts.Length != 2 ||
                    !uint.TryParse(parts[0], NumberStyles.None, CultureInfo.InvariantCulture, out placement.Team) ||
                    !uint.TryParse(parts[1], NumberStyles.None, CultureInfo.InvariantCulture, out placement.Rank))
                {
                    return "--placements: '" + spec + "' is not TEAM:RANK";
                }
                result.Placements.Add(placement);
            }
        }
        else if (winner != null)
        {
            uint team;
            if (!uint.TryParse(winner, NumberStyles.None, CultureInfo.InvariantCulture, out team))
            {
                return "--winner takes a team number, or 0 for a draw";
            }
            result.WinnerTeam = team;
        }
        else if (result.Outcome == Outcome.Settled)
        {
            return "a SETTLED result needs --winner (1 or 2, or 0 for a draw) or --placements: a draw is " +
                   "said, never implied";
        }
        foreach (string spec in players.Split(','))
        {
            string[] parts = spec.Split(':');
            var numbers = new uint[5];
            bool ok = (parts.Length == 2 || parts.Length == 5) && parts[0].Length > 0;
            for (int i = 1; ok && i < parts.Length; i++)
            {
                ok = uint.TryParse(parts[i], NumberStyles.None, CultureInfo.InvariantCulture, out numbers[i]);
            }
            if (!ok) return "--players: '" + spec + "' is not PLAYER_ID:TEAM[:KILLS:DEATHS:ASSISTS]";
            result.Players.Add(new PlayerResult {
                PlayerId = parts[0], Team = numbers[1], Kills = numbers[2], Deaths = numbers[3], Assists = numbers[4]
            });
        }
        return null;
    }

    static string Get(Dictionary<string, string> flags, string name)
    {
        string value;
        return flags.TryGetValue(name, out value) ? value : null;
    }

    static int Fail(int status, string message)
    {
        Console.Error.WriteLine("verdict-ingest: " + message);
        if (status == 2) Console.Error.WriteLine(Usage);
        return status;
    }
}
