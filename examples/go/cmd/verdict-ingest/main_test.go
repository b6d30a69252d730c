package main

import (
	"strings"
	"testing"
)

const good = `{"room_id":"42","outcome":"SETTLED","winner_team":2,"ended_at_ms":"1700000000000",` +
	`"players":[{"player_id":"1","team":1,"kills":3},{"player_id":"2","team":2}]}`

func TestReadResultsTakesAResultOrABatch(t *testing.T) {
	results, batch, err := readResults([]byte(good))
	if err != nil || batch || len(results) != 1 || results[0].WinnerTeam != 2 ||
		results[0].Players[0].PlayerID != "1" || results[0].Players[0].Kills != 3 {
		t.Fatalf("got %+v, %v, %v", results, batch, err)
	}
	results, batch, err = readResults([]byte(`{"results":[` + good + `,` + good + `]}`))
	if err != nil || !batch || len(results) != 2 {
		t.Fatalf("got %+v, %v, %v", results, batch, err)
	}
}

// A misspelt member must not be dropped: "winer_team" would post a win as a draw.
func TestReadResultsRefusesAMemberTheSchemaDoesNotHave(t *testing.T) {
	for name, file := range map[string]string{
		"result":         strings.Replace(good, `"winner_team"`, `"winer_team"`, 1),
		"batch item":     `{"results":[` + good + `,` + strings.Replace(good, `"winner_team"`, `"winer_team"`, 1) + `]}`,
		"player":         strings.Replace(good, `"kills"`, `"kils"`, 1),
		"batch":          `{"results":[` + good + `],"sent_at":"now"}`,
		"batch misspelt": `{"result":[` + good + `]}`,
	} {
		_, _, err := readResults([]byte(file))
		if err == nil || !strings.Contains(err.Error(), "unknown field") {
			t.Errorf("%s: got %v, not an unknown field", name, err)
		}
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
