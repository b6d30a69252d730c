package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"verdict.example/ingest"
)

const good = `{"room_id":"42","outcome":"SETTLED","winner_team":2,"ended_at_ms":"1700000000000",` +
	`"players":[{"player_id":"1","team":1,"kills":3},{"player_id":"2","team":2}]}`

// placed is a free-for-all of three teams, 1 and 3 tied second, with a player who played half the
// battle, one who played none of it (a share of 0, which must not be dropped as a default) and one
// who played all of it (no share). It has no winner_team, and every member the client writes
// anyway (kills, score, disconnected, ...), so what the client posts is exactly this.
const placed = `{"room_id":"43","outcome":"SETTLED",` +
	`"placements":[{"team":1,"rank":2},{"team":2,"rank":1},{"team":3,"rank":2}],` +
	`"ended_at_ms":"1700000000000","players":[` +
	`{"player_id":"steam:76561197960287930","team":1,"kills":4,"deaths":1,"assists":0,"score":"120","disconnected":true,"share":0.5},` +
	`{"player_id":"b","team":2,"kills":0,"deaths":0,"assists":2,"score":"-5","disconnected":false,"share":0},` +
	`{"player_id":"c","team":3,"kills":1,"deaths":2,"assists":3,"score":"0","disconnected":false}]}`

func TestReadResultsTakesAResultOrABatch(t *testing.T) {
	results, batch, err := readResults([]byte(good))
	if err != nil || batch || len(results) != 1 || results[0].WinnerTeam == nil ||
		*results[0].WinnerTeam != 2 || results[0].Players[0].PlayerID != "1" ||
		results[0].Players[0].Kills != 3 {
		t.Fatalf("got %+v, %v, %v", results, batch, err)
	}
	results, batch, err = readResults([]byte(`{"results":[` + good + `,` + good + `]}`))
	if err != nil || !batch || len(results) != 2 {
		t.Fatalf("got %+v, %v, %v", results, batch, err)
	}
}

func TestReadResultsTakesPlacementsAndShares(t *testing.T) {
	results, _, err := readResults([]byte(placed))
	if err != nil {
		t.Fatal(err)
	}
	r := results[0]
	want := []ingest.TeamPlacement{{Team: 1, Rank: 2}, {Team: 2, Rank: 1}, {Team: 3, Rank: 2}}
	if r.WinnerTeam != nil || !reflect.DeepEqual(r.Placements, want) {
		t.Fatalf("winner_team %v, placements %+v", r.WinnerTeam, r.Placements)
	}
	p := r.Players
	if p[0].Share == nil || *p[0].Share != 0.5 || p[1].Share == nil || *p[1].Share != 0 ||
		p[2].Share != nil {
		t.Fatalf("shares %v, %v, %v: not 0.5, 0 and absent", p[0].Share, p[1].Share, p[2].Share)
	}
}

// The file goes to the node as it says: its placements and shares, a share of 0, no share where
// it has none, and no winner_team, which would make another result at the node (it compares the
// stored copy byte for byte).
func TestPostFileSendsPlacementsAndSharesAsTheFileSays(t *testing.T) {
	var body []byte
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"room_id":"43","shard":1,"sequence":"9","duplicate":false}`)
	}))
	defer server.Close()
	path := filepath.Join(t.TempDir(), "result.json")
	if err := os.WriteFile(path, []byte(placed), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := postFile(context.Background(), ingest.NewTCPClient(server.URL, "t"), path); err != nil {
		t.Fatal(err)
	}
	var sent, file any
	if err := json.Unmarshal(body, &sent); err != nil {
		t.Fatalf("posted %q: %v", body, err)
	}
	json.Unmarshal([]byte(placed), &file)
	if !reflect.DeepEqual(sent, file) {
		t.Fatalf("posted\n  %s\nnot the file\n  %s", body, placed)
	}
}

// A misspelt member must not be dropped: "winer_team" would post a win as a draw, and a
// placement without its "rank" is no placement.
func TestReadResultsRefusesAMemberTheSchemaDoesNotHave(t *testing.T) {
	misspeltRank := strings.Replace(placed, `"rank":1`, `"rnk":1`, 1)
	for name, file := range map[string]string{
		"result":          strings.Replace(good, `"winner_team"`, `"winer_team"`, 1),
		"batch item":      `{"results":[` + good + `,` + strings.Replace(good, `"winner_team"`, `"winer_team"`, 1) + `]}`,
		"player":          strings.Replace(good, `"kills"`, `"kils"`, 1),
		"player share":    strings.Replace(placed, `"share":0.5`, `"shar":0.5`, 1),
		"placement":       misspeltRank,
		"batch placement": `{"results":[` + good + `,` + misspeltRank + `]}`,
		"batch":           `{"results":[` + good + `],"sent_at":"now"}`,
		"batch misspelt":  `{"result":[` + good + `]}`,
	} {
		_, _, err := readResults([]byte(file))
		if err == nil || !strings.Contains(err.Error(), "unknown field") {
			t.Errorf("%s: got %v, not an unknown field", name, err)
		}
	}
	if _, _, err := readResults([]byte(misspeltRank)); err == nil || !strings.Contains(err.Error(), `"rnk"`) {
		t.Errorf("a placement's rnk: got %v, not naming rnk", err)
	}
	for name, file := range map[string]string{
		"empty batch": `{"results":[]}`,
		"two objects": good + good,
		"not json":    `room 42 won`,
	} {
		if _, _, err := readResults([]byte(file)); err == nil {
			t.Errorf("%s: read without an error", name)
		}
	}
}

// ended is an -ended-at-ms given.
var ended = func() *int64 { v := int64(1700000000000); return &v }()

func TestResultFromFlagsPlacesEveryTeamOrNamesAWinner(t *testing.T) {
	r, err := resultFromFlags(43, "SETTLED", nil, "1:2,2:1,3:2", ended, "a:1,b:2,c:3")
	want := []ingest.TeamPlacement{{Team: 1, Rank: 2}, {Team: 2, Rank: 1}, {Team: 3, Rank: 2}}
	if err != nil || r.WinnerTeam != nil || !reflect.DeepEqual(r.Placements, want) || len(r.Players) != 3 {
		t.Fatalf("got %+v, %v", r, err)
	}
	r, err = resultFromFlags(42, "SETTLED", ingest.Winner(2), "", ended, "1:1,2:2")
	if err != nil || r.WinnerTeam == nil || *r.WinnerTeam != 2 || r.Placements != nil {
		t.Fatalf("-winner 2: got %+v, %v", r, err)
	}
	r, err = resultFromFlags(42, "SETTLED", ingest.Winner(0), "", ended, "1:1,2:2")
	if err != nil || r.WinnerTeam == nil || *r.WinnerTeam != 0 || r.EndedAtMs != *ended {
		t.Fatalf("-winner 0: got %+v, %v, not a draw", r, err)
	}
	for name, placements := range map[string]string{
		"no rank":      "1:2,2",
		"not a number": "1:first,2:2",
		"negative":     "1:-1,2:1",
	} {
		if _, err := resultFromFlags(43, "SETTLED", nil, placements, ended, "a:1,b:2"); err == nil {
			t.Errorf("%s: -placements %s taken", name, placements)
		}
	}
	if _, err := resultFromFlags(43, "SETTLED", ingest.Winner(1), "1:1,2:2", ended, "a:1,b:2"); err == nil {
		t.Error("-winner and -placements both taken")
	}
}

// A draw is said, never implied, and the end time is given, never made up: a command run twice
// must post the same result twice, not a second result for the battle.
func TestResultFromFlagsNeedsAWinnerAndAnEndTime(t *testing.T) {
	if r, err := resultFromFlags(42, "SETTLED", nil, "", ended, "1:1,2:2"); err == nil ||
		!strings.Contains(err.Error(), "-winner") {
		t.Errorf("neither -winner nor -placements: got %+v, %v", r, err)
	}
	if r, err := resultFromFlags(42, "SETTLED", ingest.Winner(1), "", nil, "1:1,2:2"); err == nil ||
		!strings.Contains(err.Error(), "-ended-at-ms") {
		t.Errorf("no -ended-at-ms: got %+v, %v", r, err)
	}
	if r, err := resultFromFlags(42, "ABORTED", nil, "", nil, "1:1,2:2"); err == nil {
		t.Errorf("ABORTED without -ended-at-ms: got %+v", r)
	}
	r, err := resultFromFlags(42, "ABORTED", nil, "", ended, "1:1,2:2")
	if err != nil || r.WinnerTeam != nil || r.Placements != nil {
		t.Errorf("ABORTED needs no winner: got %+v, %v", r, err)
	}
}

// postFileTo posts file through postFile to a stand-in node and returns the bodies the node was
// sent and the error.
func postFileTo(t *testing.T, file string) ([]string, error) {
	var bodies []string
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(body))
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"room_id":"42","shard":1,"sequence":"9","duplicate":false}`)
	}))
	defer server.Close()
	path := filepath.Join(t.TempDir(), "result.json")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := postFile(context.Background(), ingest.NewTCPClient(server.URL, "t"), path)
	return bodies, err
}

// A SETTLED result that names neither winner_team nor placements would be settled as a draw; one
// that names both (a winner_team of 0 too) is a contradiction. The file is refused before
// anything is posted.
func TestPostFileRefusesAResultWithoutOneWinner(t *testing.T) {
	neither := strings.Replace(good, `"winner_team":2,`, ``, 1)
	both := strings.Replace(placed, `"outcome":"SETTLED",`, `"outcome":"SETTLED","winner_team":0,`, 1)
	for name, file := range map[string]string{
		"neither":               neither,
		"a null winner":         strings.Replace(good, `"winner_team":2`, `"winner_team":null`, 1),
		"empty placements":      strings.Replace(good, `"winner_team":2`, `"placements":[]`, 1),
		"a draw and placements": both,
		"a batch item":          `{"results":[` + good + `,` + neither + `]}`,
	} {
		bodies, err := postFileTo(t, file)
		if err == nil || !strings.Contains(err.Error(), "winner_team") ||
			!strings.Contains(err.Error(), "nothing was posted") || len(bodies) != 0 {
			t.Errorf("%s: got %v, posted %q", name, err, bodies)
		}
	}
	draw := strings.Replace(good, `"winner_team":2`, `"winner_team":0`, 1)
	if bodies, err := postFileTo(t, draw); err != nil || len(bodies) != 1 ||
		!strings.Contains(bodies[0], `"winner_team":0`) {
		t.Errorf("a draw said: got %v, posted %q", err, bodies)
	}
}

// encoding/json reads half of a UTF-16 surrogate pair, and bytes that are not UTF-8, as U+FFFD:
// the node would store a player id the file never had. The file is refused instead.
func TestPostFileRefusesALoneSurrogateOrBytesNotUTF8(t *testing.T) {
	withID := func(id string) string {
		return strings.Replace(good, `"player_id":"1"`, `"player_id":"`+id+`"`, 1)
	}
	for name, id := range map[string]string{
		"a high half":              `\ud800x`,
		"a high half at the end":   `x\uD800`,
		"a high half, then a char": `\ud800\u0041`,
		"two high halves":          `\ud800\ud800`,
		"a low half":               `\udc00x`,
		"a low half after a pair":  `\ud83d\ude00\ude00`,
	} {
		bodies, err := postFileTo(t, withID(id))
		if err == nil || !strings.Contains(err.Error(), "surrogate") || len(bodies) != 0 {
			t.Errorf("%s (%s): got %v, posted %q", name, id, err, bodies)
		}
	}
	bodies, err := postFileTo(t, withID("\xed\xa0\x80x")) // a surrogate in UTF-8's form
	if err == nil || !strings.Contains(err.Error(), "not UTF-8") || len(bodies) != 0 {
		t.Errorf("bytes not UTF-8: got %v, posted %q", err, bodies)
	}
	// A pair, and a backslash escaped before "ud800", are what they say.
	for id, want := range map[string]string{`\ud83d\ude00`: "\U0001F600", `\\ud800`: `\ud800`} {
		bodies, err := postFileTo(t, withID(id))
		var sent ingest.BattleResult
		if err != nil || len(bodies) != 1 || json.Unmarshal([]byte(bodies[0]), &sent) != nil ||
			sent.Players[0].PlayerID != want {
			t.Errorf("%s: got %v, posted %q", id, err, bodies)
		}
	}
}
