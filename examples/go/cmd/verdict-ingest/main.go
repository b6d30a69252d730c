// Command verdict-ingest posts a battle result to a running verdict-node and prints where it
// was stored (a StoredResult, as JSON). The result comes from flags or from a JSON file:
//
//	verdict-ingest -socket node.sock -room 42 -winner 1 -players 1:1,2:2
//	verdict-ingest -socket node.sock -room 43 -placements 1:2,2:1,3:3 -players a:1,b:2,c:3
//	verdict-ingest -url http://127.0.0.1:9465 -token-file ingest.token -file result.json
//	verdict-ingest -socket node.sock -file - < batch.json    # {"results": [...]}: a batch
//
// -placements ranks every team of a room of any number of teams (TEAM:RANK, 1 best, equal ranks
// tie), in place of -winner, which is for two teams and defaults to 0, a draw.
//
// The file holds one BattleResult in protobuf's JSON mapping (room_id, ended_at_ms, player_id
// and score as strings) or a batch {"results": [...]}, and is posted as it says: a member it
// leaves out (winner_team, a player's share) is left out. A member the schema does not have (a
// misspelt "winer_team", a placement's "rnk") refuses the whole file before anything is posted.
// Each retry is said on standard error. Exit status: 0 stored (or already stored), 1 refused or
// not stored in time, 2 usage.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"verdict.example/ingest"
)

func main() {
	socket := flag.String("socket", "", "the node's Unix socket (its --ingest-listen unix:PATH)")
	url := flag.String("url", "", "or a TCP ingest listener, http://HOST:PORT")
	token := flag.String("token", os.Getenv("VERDICT_INGEST_TOKEN"),
		"ingest token for -url (default $VERDICT_INGEST_TOKEN)")
	tokenFile := flag.String("token-file", "", "read the ingest token from FILE")
	file := flag.String("file", "", "JSON BattleResult or {\"results\": [...]} to post; - for stdin")
	room := flag.Uint64("room", 0, "room_id (without -file)")
	outcome := flag.String("outcome", "SETTLED", "SETTLED or ABORTED")
	winner := flag.Uint("winner", 0, "winner_team of two teams: 1, 2, or 0 for a draw")
	placements := flag.String("placements", "",
		"TEAM:RANK,... one rank per team, 1 best, equal ranks tie (any number of teams; instead of -winner)")
	endedAt := flag.Int64("ended-at-ms", 0, "ended_at_ms (default: now); the same value makes a retry a duplicate")
	players := flag.String("players", "", "PLAYER_ID:TEAM[:KILLS:DEATHS:ASSISTS],... (ids are strings)")
	timeout := flag.Duration("timeout", time.Minute, "give up retrying after this long")
	flag.Parse()
	var winnerTeam *uint32 // nil unless -winner was given
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "winner" {
			winnerTeam = ingest.Winner(uint32(*winner))
		}
	})

	client, err := newClient(*socket, *url, *token, *tokenFile)
	if err != nil {
		usage(err)
	}
	client.OnRetry = func(err error, wait time.Duration) {
		fmt.Fprintf(os.Stderr, "verdict-ingest: retrying in %v: %v\n", wait.Round(time.Millisecond), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	var reply any
	if *file != "" {
		reply, err = postFile(ctx, client, *file)
	} else {
		var result *ingest.BattleResult
		if result, err = resultFromFlags(*room, *outcome, winnerTeam, *placements, *endedAt,
			*players); err != nil {
			usage(err)
		}
		reply, err = client.PostResult(ctx, result)
	}
	// A batch's items are printed even when some were refused: the others are stored.
	if batch, ok := reply.(batchReply); err == nil || (ok && len(batch.Items) > 0) {
		out, _ := json.Marshal(reply)
		fmt.Println(string(out))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "verdict-ingest:", err)
		os.Exit(1)
	}
}

// batchReply is what a batch file's post prints: {"items": [...]}.
type batchReply struct {
	Items []ingest.StoredItem `json:"items"`
}

func usage(err error) {
	fmt.Fprintln(os.Stderr, "verdict-ingest:", err)
	flag.Usage()
	os.Exit(2)
}

func newClient(socket, url, token, tokenFile string) (*ingest.Client, error) {
	if (socket == "") == (url == "") {
		return nil, errors.New("give exactly one of -socket and -url")
	}
	if socket != "" {
		return ingest.NewUnixClient(socket), nil
	}
	if tokenFile != "" {
		data, err := os.ReadFile(tokenFile)
		if err != nil {
			return nil, err
		}
		token = strings.TrimSpace(string(data))
	}
	if token == "" {
		return nil, errors.New("-url needs the ingest token (-token, -token-file or $VERDICT_INGEST_TOKEN)")
	}
	return ingest.NewTCPClient(url, token), nil
}

// postFile posts the result or batch in path ("-": standard input). A batch's reply is
// returned as a batchReply; it fails if any item was refused.
func postFile(ctx context.Context, client *ingest.Client, path string) (any, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	results, batch, err := readResults(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (nothing was posted)", path, err)
	}
	if !batch {
		return client.PostResult(ctx, &results[0])
	}
	items, err := client.PostBatch(ctx, results)
	if err == nil {
		for i, item := range items {
			if item.Problem != nil {
				err = fmt.Errorf("result %d (room %d): %w", i, results[i].RoomID, item.Problem)
				break
			}
		}
	}
	return batchReply{items}, err
}

// readResults reads a file's JSON: one BattleResult, or a batch {"results": [...]} (batch is
// then true). It refuses a member the schema does not have, anywhere in it (a result, a player,
// a placement), as the node does: a misspelt "winer_team" dropped would post a win as a draw.
func readResults(data []byte) (results []ingest.BattleResult, batch bool, err error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil {
		return nil, false, fmt.Errorf("not a JSON object: %w", err)
	}
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.DisallowUnknownFields()
	if _, batch = members["results"]; batch {
		var file struct {
			Results []ingest.BattleResult `json:"results"`
		}
		if err := decoder.Decode(&file); err != nil {
			return nil, true, fmt.Errorf("not a batch of BattleResults: %w", err)
		}
		if len(file.Results) == 0 {
			return nil, true, errors.New("the batch holds no results")
		}
		return file.Results, true, nil
	}
	var result ingest.BattleResult
	if err := decoder.Decode(&result); err != nil {
		return nil, false, fmt.Errorf("not a BattleResult: %w", err)
	}
	return []ingest.BattleResult{result}, false, nil
}

// resultFromFlags is the result the flags describe. winner is nil when -winner was not given:
// without -placements the result is then a draw.
func resultFromFlags(room uint64, outcome string, winner *uint32, placements string,
	endedAt int64, players string) (*ingest.BattleResult, error) {
	if room == 0 || players == "" {
		return nil, errors.New("give -room and -players, or -file")
	}
	if endedAt == 0 {
		endedAt = time.Now().UnixMilli()
	}
	result := &ingest.BattleResult{RoomID: room, Outcome: outcome, EndedAtMs: endedAt}
	switch {
	case placements != "" && winner != nil:
		return nil, errors.New("give -winner (two teams) or -placements, not both")
	case placements != "":
		for _, spec := range strings.Split(placements, ",") {
			parts := strings.Split(spec, ":")
			if len(parts) != 2 {
				return nil, fmt.Errorf("-placements: %q is not TEAM:RANK", spec)
			}
			team, err := strconv.ParseUint(parts[0], 10, 32)
			if err != nil {
				return nil, fmt.Errorf("-placements: %q: %w", spec, err)
			}
			rank, err := strconv.ParseUint(parts[1], 10, 32)
			if err != nil {
				return nil, fmt.Errorf("-placements: %q: %w", spec, err)
			}
			result.Placements = append(result.Placements,
				ingest.TeamPlacement{Team: uint32(team), Rank: uint32(rank)})
		}
	case winner != nil:
		result.WinnerTeam = winner
	default:
		result.WinnerTeam = ingest.Winner(0)
	}
	for _, spec := range strings.Split(players, ",") {
		var fields [5]uint64 // fields[0], the player id, is a string: parts[0]
		parts := strings.Split(spec, ":")
		if (len(parts) != 2 && len(parts) != 5) || parts[0] == "" {
			return nil, fmt.Errorf("-players: %q is not PLAYER_ID:TEAM[:KILLS:DEATHS:ASSISTS]", spec)
		}
		for i, part := range parts[1:] {
			v, err := strconv.ParseUint(part, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("-players: %q: %w", spec, err)
			}
			fields[i+1] = v
		}
		result.Players = append(result.Players, ingest.PlayerResult{
			PlayerID: parts[0], Team: uint32(fields[1]), Kills: uint32(fields[2]),
			Deaths: uint32(fields[3]), Assists: uint32(fields[4]),
		})
	}
	return result, nil
}
