// VerdictIngestTest.cs: unit tests of examples/csharp against a stand-in node on 127.0.0.1 that
// records what it is sent: a result with placements and shares is read and posted as the file
// says; a member the schema does not have (a placement's "rnk" included), a SETTLED result without
// one winner, a lone surrogate and bytes that are not UTF-8 refuse the file; the command's
// --placements makes a placement result, and the command needs a winner and an end time; and a
// batch's retryable items are resent by the documented schedule. Built with the client and its
// command:
//
//   mcs -warnaserror -main:VerdictIngestTest -out:verdict-ingest-test.exe \
//       examples/csharp/VerdictIngest.cs examples/csharp/VerdictIngestCommand.cs \
//       tests/examples/VerdictIngestTest.cs && mono verdict-ingest-test.exe
using System;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using System.Net;
using System.Net.Sockets;
using System.Text;
using System.Threading;
using Verdict.Ingest;

static class VerdictIngestTest
{
    // A free-for-all of three teams, 1 and 3 tied second, with a player who played half the battle,
    // one who played none of it (a share of 0, not to be dropped as a default) and one who played
    // all of it (no share). It has no winner_team, and every member the client writes anyway
    // (kills, score, ...), so what the client posts is exactly this.
    const string Placed =
        "{\"room_id\":\"43\",\"outcome\":\"SETTLED\"," +
        "\"placements\":[{\"team\":1,\"rank\":2},{\"team\":2,\"rank\":1},{\"team\":3,\"rank\":2}]," +
        "\"ended_at_ms\":\"1700000000000\",\"players\":[" +
        "{\"player_id\":\"steam:76561197960287930\",\"team\":1,\"kills\":4,\"deaths\":1,\"assists\":0," +
        "\"score\":\"120\",\"disconnected\":true,\"share\":0.5}," +
        "{\"player_id\":\"b\",\"team\":2,\"kills\":0,\"deaths\":0,\"assists\":2,\"score\":\"-5\",\"share\":0}," +
        "{\"player_id\":\"c\",\"team\":3,\"kills\":1,\"deaths\":2,\"assists\":3,\"score\":\"0\"}]}";

    static int Main()
    {
        var tests = new List<KeyValuePair<string, Action>>
        {
            Test("AFileWithPlacementsAndSharesIsReadAsItSays", AFileWithPlacementsAndSharesIsReadAsItSays),
            Test("AResultWithPlacementsAndSharesIsPostedAsTheFileSays", AResultWithPlacementsAndSharesIsPostedAsTheFileSays),
            Test("ABatchWithPlacementsAndSharesIsPostedAsTheFileSays", ABatchWithPlacementsAndSharesIsPostedAsTheFileSays),
            Test("AMisspeltMemberOfAPlacementRefusesTheFile", AMisspeltMemberOfAPlacementRefusesTheFile),
            Test("TheCommandPlacesEveryTeamOrNamesAWinner", TheCommandPlacesEveryTeamOrNamesAWinner),
            Test("TheCommandNeedsAWinnerAndAnEndTime", TheCommandNeedsAWinnerAndAnEndTime),
            Test("AResultWithoutOneWinnerIsRefusedBeforeAnythingIsPosted",
                 AResultWithoutOneWinnerIsRefusedBeforeAnythingIsPosted),
            Test("ALoneSurrogateIsRefusedBeforeAnythingIsPosted", ALoneSurrogateIsRefusedBeforeAnythingIsPosted),
            Test("RetryableItemsAreResentAfter1sDoublingTo30s", RetryableItemsAreResentAfter1sDoublingTo30s),
        };
        int failed = 0;
        foreach (KeyValuePair<string, Action> test in tests)
        {
            try
            {
                test.Value();
                Console.WriteLine("ok   " + test.Key);
            }
            catch (Exception e)
            {
                failed++;
                Console.WriteLine("FAIL " + test.Key + ": " + e.Message);
            }
        }
        Console.WriteLine(failed == 0 ? "all " + tests.Count + " passed" : failed + " of " + tests.Count + " failed");
        return failed == 0 ? 0 : 1;
    }

    static void AFileWithPlacementsAndSharesIsReadAsItSays()
    {
        bool batch;
        BattleResult r = BattleResult.ListFromJson(Placed, out batch)[0];
        Check(!batch && r.RoomId == 43 && !r.WinnerTeam.HasValue, "room 43 without a winner_team");
        Check(r.Placements.Count == 3 && r.Placements[0].Team == 1 && r.Placements[0].Rank == 2 &&
              r.Placements[1].Team == 2 && r.Placements[1].Rank == 1 &&
              r.Placements[2].Team == 3 && r.Placements[2].Rank == 2, "placements (1, 2), (2, 1), (3, 2)");
        Check(r.Players[0].Share == 0.5 && r.Players[1].Share == 0 && !r.Players[2].Share.HasValue,
              "shares 0.5, 0 and none");
    }

    static void AResultWithPlacementsAndSharesIsPostedAsTheFileSays()
    {
        using (var node = new StandInNode())
        using (IngestClient client = IngestClient.ForTcp(node.Url, "t"))
        {
            StoredResult stored = client.PostResult(BattleResult.FromJson(Placed), TimeSpan.FromSeconds(10));
            Check(stored.RoomId == 43, "stored room 43");
            CheckSame(node.Bodies(), new List<string> { Placed });
        }
    }

    static void ABatchWithPlacementsAndSharesIsPostedAsTheFileSays()
    {
        string file = "{\"results\":[" + Placed + "]}";
        using (var node = new StandInNode())
        using (IngestClient client = IngestClient.ForTcp(node.Url, "t"))
        {
            bool batch;
            List<StoredItem> items = client.PostBatch(BattleResult.ListFromJson(file, out batch), TimeSpan.FromSeconds(10));
            Check(batch && items.Count == 1 && items[0].Stored != null && items[0].Stored.RoomId == 43,
                  "one item, room 43 stored");
            CheckSame(node.Bodies(), new List<string> { file });
        }
    }

    static void AMisspeltMemberOfAPlacementRefusesTheFile()
    {
        string misspelt = Placed.Replace("\"rank\":1", "\"rnk\":1");
        foreach (string file in new[] { misspelt, "{\"results\":[" + Placed + "," + misspelt + "]}" })
        {
            try
            {
                bool batch;
                BattleResult.ListFromJson(file, out batch);
            }
            catch (FormatException e)
            {
                Check(e.Message.Contains("unknown field 'rnk' in a placement"), "refused for rnk, not: " + e.Message);
                continue;
            }
            throw new Exception("a placement's \"rnk\" was read: " + file);
        }
    }

    static void TheCommandPlacesEveryTeamOrNamesAWinner()
    {
        BattleResult r;
        string usage = FromFlags(out r, "placements", "1:2,2:1,3:2", "players", "a:1,b:2,c:3");
        Check(usage == null, "--placements refused: " + usage);
        Check(!r.WinnerTeam.HasValue && r.Placements.Count == 3 && r.Placements[2].Team == 3 &&
              r.Placements[2].Rank == 2 && r.Players.Count == 3, "three teams placed, no winner");
        string json = r.ToJson();
        Check(!json.Contains("winner_team") &&
              json.Contains("\"placements\":[{\"team\":1,\"rank\":2},{\"team\":2,\"rank\":1},{\"team\":3,\"rank\":2}]"),
              "written as placements alone: " + json);

        Check(FromFlags(out r, "winner", "2", "players", "1:1,2:2") == null && r.WinnerTeam == 2 &&
              r.Placements.Count == 0, "--winner 2");
        Check(FromFlags(out r, "winner", "0", "players", "1:1,2:2") == null && r.WinnerTeam == 0 &&
              r.ToJson().Contains("\"winner_team\":0"), "--winner 0: a draw");
        foreach (string bad in new[] { "1:2,2", "1:first,2:1", "1:-1,2:1", "1:2:3" })
        {
            Check(FromFlags(out r, "placements", bad, "players", "a:1,b:2") != null, "--placements " + bad + " taken");
        }
        Check(FromFlags(out r, "winner", "1", "placements", "1:1,2:2", "players", "a:1,b:2") != null,
              "--winner and --placements both taken");
    }

    // A draw is said, never implied, and the end time is given, never made up: a command run twice
    // must post the same result twice, not a second result for the battle.
    static void TheCommandNeedsAWinnerAndAnEndTime()
    {
        BattleResult r;
        string usage = FromFlags(out r, "players", "1:1,2:2");
        Check(usage != null && usage.Contains("--winner"), "neither --winner nor --placements: " + usage);
        usage = FromFlags(out r, "winner", "1", "ended-at-ms", null, "players", "1:1,2:2");
        Check(usage != null && usage.Contains("--ended-at-ms"), "no --ended-at-ms: " + usage);
        usage = FromFlags(out r, "outcome", "ABORTED", "ended-at-ms", null, "players", "1:1,2:2");
        Check(usage != null && usage.Contains("--ended-at-ms"), "ABORTED without --ended-at-ms: " + usage);
        usage = FromFlags(out r, "outcome", "ABORTED", "players", "1:1,2:2");
        Check(usage == null && !r.WinnerTeam.HasValue && !r.ToJson().Contains("winner_team") &&
              r.EndedAtMs == 1700000000000, "ABORTED needs no winner: " + usage);
    }

    // A SETTLED result naming neither winner_team nor placements would be settled as a draw; one
    // naming both (a winner_team of 0 too) contradicts itself. Neither is posted.
    static void AResultWithoutOneWinnerIsRefusedBeforeAnythingIsPosted()
    {
        string neither = Placed.Replace("\"placements\":[{\"team\":1,\"rank\":2},{\"team\":2,\"rank\":1},{\"team\":3,\"rank\":2}],", "");
        Check(neither != Placed, "the placements are taken out");
        foreach (string file in new[] {
                     neither, neither.Replace("\"outcome\":\"SETTLED\",", "\"outcome\":\"SETTLED\",\"placements\":[],"),
                     neither.Replace("\"outcome\":\"SETTLED\",", "\"outcome\":\"SETTLED\",\"winner_team\":null,"),
                     Placed.Replace("\"outcome\":\"SETTLED\",", "\"outcome\":\"SETTLED\",\"winner_team\":0,"),
                     "{\"results\":[" + Placed + "," + neither + "]}" })
        {
            try
            {
                bool batch;
                BattleResult.ListFromJson(file, out batch);
            }
            catch (FormatException e)
            {
                Check(e.Message.Contains("winner_team"), "refused, but not for its winner: " + e.Message);
                continue;
            }
            throw new Exception("read: " + file);
        }
        var noWinner = new BattleResult { RoomId = 42, EndedAtMs = 1700000000000 };
        noWinner.Players.Add(new PlayerResult { PlayerId = "1", Team = 1 });
        noWinner.Players.Add(new PlayerResult { PlayerId = "2", Team = 2 });
        var both = new BattleResult { RoomId = 42, EndedAtMs = 1700000000000, WinnerTeam = 0 };
        both.Placements.Add(new TeamPlacement { Team = 1, Rank = 1 });
        both.Placements.Add(new TeamPlacement { Team = 2, Rank = 2 });
        CheckNothingPosted(noWinner, "winner_team");
        CheckNothingPosted(both, "not both");
    }

    // A player id holding half of a UTF-16 surrogate pair has no UTF-8 form: Encoding.UTF8 would
    // post U+FFFD in its place, a player id the file never had.
    static void ALoneSurrogateIsRefusedBeforeAnythingIsPosted()
    {
        foreach (string id in new[] { "\\ud800x", "x\\uD800", "\\ud800\\u0041", "\\ud800\\ud800", "\\udc00x",
                                      "\\ud83d\\ude00\\ude00" })
        {
            try
            {
                BattleResult.FromJson(Placed.Replace("\"player_id\":\"b\"", "\"player_id\":\"" + id + "\""));
            }
            catch (FormatException e)
            {
                Check(e.Message.Contains("surrogate"), id + ": refused, but not for a surrogate: " + e.Message);
                continue;
            }
            throw new Exception("a player id " + id + " was read");
        }
        BattleResult pair = BattleResult.FromJson(Placed.Replace("\"player_id\":\"b\"", "\"player_id\":\"\\ud83d\\ude00\""));
        Check(pair.Players[1].PlayerId == "\U0001F600", "a surrogate pair is its character");
        var lone = BattleResult.FromJson(Placed);
        lone.Players[1].PlayerId = "\ud800x";
        CheckNothingPosted(lone, "surrogate");

        string path = Path.GetTempFileName();
        try
        {
            File.WriteAllBytes(path, Concat(Encoding.ASCII.GetBytes(Placed.Substring(0, Placed.IndexOf("\"b\"") + 1)),
                                            new byte[] { 0xed, 0xa0, 0x80 },
                                            Encoding.ASCII.GetBytes(Placed.Substring(Placed.IndexOf("\"b\"") + 2))));
            VerdictIngestCommand.ReadText(path);
            throw new Exception("a file that is not UTF-8 was read");
        }
        catch (FormatException e)
        {
            Check(e.Message.Contains("not UTF-8"), "refused, but not for its bytes: " + e.Message);
        }
        finally
        {
            File.Delete(path);
        }
    }

    // docs/sidecar.md's rule for a batch's retryable items: resent after 1 s, doubling up to 30 s
    // (an item carries no Retry-After). The waits are seen, not spent.
    static void RetryableItemsAreResentAfter1sDoublingTo30s()
    {
        using (var node = new StandInNode { RetryableBatches = 8 })
        using (IngestClient client = IngestClient.ForTcp(node.Url, "t"))
        {
            var waits = new List<double>();
            client.SleepFor = (wait, cancel) => waits.Add(wait.TotalSeconds);
            List<StoredItem> items = client.PostBatch(new List<BattleResult> { BattleResult.FromJson(Placed) },
                                                      TimeSpan.FromMinutes(10));
            Check(items.Count == 1 && items[0].Stored != null && node.Bodies().Count == 9,
                  "stored after 9 requests, not " + node.Bodies().Count);
            Check(string.Join(",", waits) == "1,2,4,8,16,30,30,30", "waited " + string.Join(",", waits) + " s");
        }
    }

    // PostResult and PostBatch refuse `result` with an ArgumentException naming `why`, and post
    // nothing.
    static void CheckNothingPosted(BattleResult result, string why)
    {
        using (var node = new StandInNode())
        using (IngestClient client = IngestClient.ForTcp(node.Url, "t"))
        {
            foreach (Action post in new Action[] {
                         () => client.PostResult(result, TimeSpan.FromSeconds(10)),
                         () => client.PostBatch(new List<BattleResult> { BattleResult.FromJson(Placed), result },
                                                TimeSpan.FromSeconds(10)) })
            {
                try
                {
                    post();
                }
                catch (ArgumentException e)
                {
                    Check(e.Message.Contains(why), "refused, but not for " + why + ": " + e.Message);
                    continue;
                }
                throw new Exception("posted without an error");
            }
            Check(node.Bodies().Count == 0, node.Bodies().Count + " bodies posted");
        }
    }

    static byte[] Concat(params byte[][] parts)
    {
        var all = new MemoryStream();
        foreach (byte[] part in parts) all.Write(part, 0, part.Length);
        return all.ToArray();
    }

    // VerdictIngestCommand.ResultFromFlags for room 43 and the given flag, value pairs (a null
    // value leaves the flag out).
    static string FromFlags(out BattleResult result, params string[] flags)
    {
        var map = new Dictionary<string, string> { { "room", "43" }, { "ended-at-ms", "1700000000000" } };
        for (int i = 0; i < flags.Length; i += 2)
        {
            if (flags[i + 1] == null) map.Remove(flags[i]);
            else map[flags[i]] = flags[i + 1];
        }
        return VerdictIngestCommand.ResultFromFlags(map, out result);
    }

    static KeyValuePair<string, Action> Test(string name, Action body)
    {
        return new KeyValuePair<string, Action>(name, body);
    }

    static void Check(bool ok, string what)
    {
        if (!ok) throw new Exception(what);
    }

    // The bodies posted are the files: the same JSON values, member for member.
    static void CheckSame(List<string> sent, List<string> files)
    {
        Check(sent.Count == files.Count, sent.Count + " bodies posted, not " + files.Count);
        for (int i = 0; i < sent.Count; i++)
        {
            Check(Same(Json.Parse(sent[i]), Json.Parse(files[i])), "posted\n  " + sent[i] + "\nnot the file\n  " + files[i]);
        }
    }

    static bool Same(object a, object b)
    {
        var objectA = a as Dictionary<string, object>;
        var objectB = b as Dictionary<string, object>;
        if (objectA != null || objectB != null)
        {
            if (objectA == null || objectB == null || objectA.Count != objectB.Count) return false;
            foreach (KeyValuePair<string, object> m in objectA)
            {
                object other;
                if (!objectB.TryGetValue(m.Key, out other) || !Same(m.Value, other)) return false;
            }
            return true;
        }
        var listA = a as List<object>;
        var listB = b as List<object>;
        if (listA != null || listB != null)
        {
            if (listA == null || listB == null || listA.Count != listB.Count) return false;
            for (int i = 0; i < listA.Count; i++)
            {
                if (!Same(listA[i], listB[i])) return false;
            }
            return true;
        }
        var numberA = a as JsonNumber;
        var numberB = b as JsonNumber;
        if (numberA != null || numberB != null)
        {
            return numberA != null && numberB != null &&
                   double.Parse(numberA.Text, NumberStyles.Float, CultureInfo.InvariantCulture) ==
                   double.Parse(numberB.Text, NumberStyles.Float, CultureInfo.InvariantCulture);
        }
        return Equals(a, b);
    }

    // A node on 127.0.0.1 that stores whatever it is sent (201 for a result, an item each for a
    // batch's), one request per connection, and keeps every body. While RetryableBatches is above
    // 0, a batch is answered with a retryable problem for each item instead, and it goes down.
    sealed class StandInNode : IDisposable
    {
        readonly TcpListener listener = new TcpListener(IPAddress.Loopback, 0);
        readonly List<string> bodies = new List<string>();
        public int RetryableBatches;

        public StandInNode()
        {
            listener.Start();
            new Thread(Serve) { IsBackground = true }.Start();
        }

        public string Url
        {
            get { return "http://127.0.0.1:" + ((IPEndPoint)listener.LocalEndpoint).Port.ToString(CultureInfo.InvariantCulture); }
        }

        public List<string> Bodies()
        {
            lock (bodies) return new List<string>(bodies);
        }

        public void Dispose()
        {
            listener.Stop();
        }

        void Serve()
        {
            for (;;)
            {
                TcpClient connection;
                try
                {
                    connection = listener.AcceptTcpClient();
                }
                catch (Exception e) when (e is SocketException || e is ObjectDisposedException ||
                                          e is InvalidOperationException)
                {
                    return;  // stopped
                }
                using (connection)
                {
                    try
                    {
                        Answer(connection.GetStream());
                    }
                    catch (IOException)
                    {
                        // The client went away, or the test is over and the runtime is stopping
                        // this background thread mid-write: neither is the test's concern.
                    }
                }
            }
        }

        void Answer(NetworkStream stream)
        {
            string body = ReadBody(stream);
            lock (bodies) bodies.Add(body);
            byte[] reply = Encoding.UTF8.GetBytes(Reply(body, ref RetryableBatches));
            byte[] head = Encoding.ASCII.GetBytes(
                "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nConnection: close\r\n" +
                "Content-Length: " + reply.Length.ToString(CultureInfo.InvariantCulture) + "\r\n\r\n");
            stream.Write(head, 0, head.Length);
            stream.Write(reply, 0, reply.Length);
        }

        static string ReadBody(Stream stream)
        {
            var head = new StringBuilder();
            while (!head.ToString().EndsWith("\r\n\r\n"))
            {
                int b = stream.ReadByte();
                if (b < 0) throw new IOException("the request ended in its header");
                head.Append((char)b);
            }
            int length = 0;
            foreach (string line in head.ToString().Split('\n'))
            {
                if (line.StartsWith("Content-Length:", StringComparison.OrdinalIgnoreCase))
                {
                    length = int.Parse(line.Substring("Content-Length:".Length).Trim(), CultureInfo.InvariantCulture);
                }
            }
            var body = new byte[length];
            for (int read = 0; read < length;)
            {
                int n = stream.Read(body, read, length - read);
                if (n <= 0) throw new IOException("the request ended in its body");
                read += n;
            }
            return Encoding.UTF8.GetString(body);
        }

        static string Reply(string body, ref int retryableBatches)
        {
            var request = (Dictionary<string, object>)Json.Parse(body);
            object results;
            if (!request.TryGetValue("results", out results)) return Stored(request);
            bool retryable = retryableBatches > 0;
            if (retryable) retryableBatches--;
            var items = new List<string>();
            foreach (object result in (List<object>)results)
            {
                items.Add(retryable ? "{\"problem\":{\"code\":\"UNAVAILABLE\",\"status\":503,\"retryable\":true," +
                                          "\"detail\":\"stand-in\"}}"
                                    : "{\"stored\":" + Stored(result) + "}");
            }
            return "{\"items\":[" + string.Join(",", items.ToArray()) + "]}";
        }

        static string Stored(object result)
        {
            var stored = new StoredResult { RoomId = Json.ToUInt64(((Dictionary<string, object>)result)["room_id"], "room_id") };
            return stored.ToJson();
        }
    }
}
