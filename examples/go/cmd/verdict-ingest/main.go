// Command verdict-ingest posts a battle result to a running verdict-node and prints where it
// was stored (a StoredResult, as JSON). The result comes from flags or from a JSON file:
//
//	verdict-ingest -socket node.sock -room 42 -winner 1 -ended-at-ms 1700000000000 -players 1:1,2:2
//	verdict-ingest -socket node.sock -room 43 -placements 1:2,2:1,3:3 -ended-at-ms 1700000000000 \
//	    -players a:1,b:2,c:3
//	verdict-ingest -url http://127.0.0.1:9465 -token-file ingest.token -file result.json
//	verdict-ingest -socket node.sock -file - < batch.json    # {"results": [...]}: a batch
//
// A SETTLED result from flags needs -winner, for two teams (1, 2, or 0 for a draw: a draw is
// said, never implied), or -placements, which ranks every team of a room of any number of teams
// (TEAM:RANK, 1 best, equal ranks tie). Every result from flags needs -ended-at-ms, the battle's
// end: with the room it names the result, so running the command again posts the same result
// (a duplicate), never a second one for the same battle.
//
// The file holds one BattleResult in protobuf's JSON mapping (room_id, ended_at_ms, player_id
// and score as strings) or a batch {"results": [...]}, and is posted as it says: a member it
// leaves out (winner_team, a player's share) is left out. The whole file is refused before
// anything is posted if it has a member the schema does not have (a misspelt "winer_team", a
// placement's "rnk"), a SETTLED result with neither winner_team nor placements or with both, or
// a string that is not UTF-8 or holds half of a UTF-16 surrogate pair ("\ud800" alone), which
// encoding/json would read as U+FFFD and post as a player id the file never had.
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
	"unicode/utf8"

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
	winner := flag.Uint("winner", 0,
		"winner_team of two teams: 1, 2, or 0 for a draw (a SETTLED result needs it or -placements)")
	placements := flag.String("placements", "",
		"TEAM:RANK,... one rank per team, 1 best, equal ranks tie (any number of teams; instead of -winner)")
	endedAt := flag.Int64("ended-at-ms", 0,
		"ended_at_ms, the battle's end (required without -file); the same value makes a re-run a duplicate")
	players := flag.String("players", "", "PLAYER_ID:TEAM[:KILLS:DEATHS:ASSISTS],... (ids are strings)")
	timeout := flag.Duration("timeout", time.Minute, "give up retrying after this long")
	flag.Parse()
	var winnerTeam *uint32 // nil unless -winner was given
	var endedAtMs *int64   // nil unless -ended-at-ms was given
	flag.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "winner":
			winnerTeam = ingest.Winner(uint32(*winner))
		case "ended-at-ms":
			endedAtMs = endedAt
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
		if result, err = resultFromFlags(*room, *outcome, winnerTeam, *placements, endedAtMs,
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
// It refuses text that encoding/json would change as it reads it (checkText), and a result that
// fails BattleResult.Check.
func readResults(data []byte) (results []ingest.BattleResult, batch bool, err error) {
	if err := checkText(data); err != nil {
		return nil, false, err
	}
	results, batch, err = decodeResults(data)
	if err != nil {
		return nil, batch, err
	}
	for i := range results {
		if err := results[i].Check(); err != nil {
			if batch {
				err = fmt.Errorf("result %d: %w", i, err)
			}
			return nil, batch, err
		}
	}
	return results, batch, nil
}

// checkText refuses JSON text that is not UTF-8, or that escapes half of a UTF-16 surrogate
// pair ("\ud800" not followed by a low surrogate's escape, or a low one alone): encoding/json
// reads either as U+FFFD, so the string posted would not be the one the file holds. The node
// refuses both.
func checkText(data []byte) error {
	if !utf8.Valid(data) {
		return errors.New("the file is not UTF-8")
	}
	inString := false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\' && i+1 < len(data) && data[i+1] == 'u':
			unit, ok := escapedUnit(data, i)
			switch {
			case !ok: // not four hex digits: the decoder says so
				i++
			case unit >= 0xdc00 && unit <= 0xdfff:
				return fmt.Errorf("%s at byte %d is the low half of a UTF-16 surrogate pair "+
					"without its high half: it names no character", data[i:i+6], i)
			case unit >= 0xd800 && unit <= 0xdbff:
				low, ok := escapedUnit(data, i+6)
				if !ok || low < 0xdc00 || low > 0xdfff {
					return fmt.Errorf("%s at byte %d is the high half of a UTF-16 surrogate pair "+
						"without its low half: it names no character", data[i:i+6], i)
				}
				i += 11 // both escapes
			default:
				i += 5
			}
		case c == '\\':
			i++ // the escaped character, a quote perhaps
		}
	}
	return nil
}

// escapedUnit reads the UTF-16 code unit of a \uXXXX escape at data[i:]; ok is false if there is
// none.
func escapedUnit(data []byte, i int) (unit uint16, ok bool) {
	if i+6 > len(data) || data[i] != '\\' || data[i+1] != 'u' {
		return 0, false
	}
	v, err := strconv.ParseUint(string(data[i+2:i+6]), 16, 16)
	return uint16(v), err == nil
}

// decodeResults decodes readResults' JSON, refusing unknown members.
func decodeResults(data []byte) (results []ingest.BattleResult, batch bool, err error) {
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

// resultFromFlags is the result the flags describe. winner and endedAt are nil when -winner and
// -ended-at-ms were not given: a SETTLED result then needs -placements, and every result needs
// an end time, as one made up now would make a second result of a battle at each run.
func resultFromFlags(room uint64, outcome string, winner *uint32, placements string,
	endedAt *int64, players string) (*ingest.BattleResult, error) {
	if room == 0 || players == "" {
		return nil, errors.New("give -room and -players, or -file")
	}
	if endedAt == nil {
		return nil, errors.New("give -ended-at-ms, the battle's end in ms since the epoch: " +
			"with the room it names the result, so that running this again posts the same one")
	}
	if outcome == "SETTLED" && winner == nil && placements == "" {
		return nil, errors.New("a SETTLED result needs -winner (1 or 2, or 0 for a draw) or " +
			"-placements: a draw is said, never implied")
	}
	result := &ingest.BattleResult{RoomID: room, Outcome: outcome, EndedAtMs: *endedAt}
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
