package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// testClient is a client whose waits between attempts end at once.
func testClient(url string) *Client {
	c := NewTCPClient(url, "secret")
	c.sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	return c
}

func result(room uint64) *BattleResult {
	return &BattleResult{RoomID: room, Outcome: "SETTLED", WinnerTeam: Winner(1), EndedAtMs: 1700000000000,
		Players: []PlayerResult{{PlayerID: "1", Team: 1}, {PlayerID: "2", Team: 2}}}
}

func problem(w http.ResponseWriter, status int, code string, retryable bool) {
	w.Header().Set("Content-Type", "application/problem+json")
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "0")
	}
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"status": status, "code": code,
		"retryable": retryable, "detail": "test"})
}

func TestPostResultRetriesUnavailableThenSucceeds(t *testing.T) {
	var calls int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer secret" || r.URL.Path != "/v1/results" {
			t.Errorf("unexpected request %s %s", r.URL.Path, r.Header.Get("Authorization"))
		}
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), `"room_id":"42"`) {
			t.Errorf("room_id is not a JSON string: %s", body)
		}
		if atomic.AddInt32(&calls, 1) < 3 {
			problem(w, http.StatusServiceUnavailable, "UNAVAILABLE", true)
			return
		}
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, `{"room_id":"42","shard":3,"sequence":"17","duplicate":true}`)
	}))
	defer server.Close()
	stored, err := testClient(server.URL).PostResult(context.Background(), result(42))
	if err != nil || !stored.Duplicate || stored.Shard != 3 || stored.Sequence != 17 || calls != 3 {
		t.Fatalf("got %+v, %v after %d calls", stored, err, calls)
	}
}

func TestPostResultStopsOnRefusal(t *testing.T) {
	var calls int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		atomic.AddInt32(&calls, 1)
		problem(w, http.StatusUnprocessableEntity, "IDEMPOTENCY_MISMATCH", false)
	}))
	defer server.Close()
	_, err := testClient(server.URL).PostResult(context.Background(), result(42))
	var p *Problem
	if !errors.As(err, &p) || p.Code != "IDEMPOTENCY_MISMATCH" || p.Status != 422 || calls != 1 {
		t.Fatalf("got %v after %d calls", err, calls)
	}
}

// The context ends during the retry of an answer (not after a fixed time, which a loaded machine
// can spend before the first answer): the error is the context's, with the node's last answer.
func TestPostResultGivesUpWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if atomic.AddInt32(&calls, 1) > 1 {
			cancel()
		}
		problem(w, http.StatusServiceUnavailable, "UNAVAILABLE", true)
	}))
	defer server.Close()
	_, err := testClient(server.URL).PostResult(ctx, result(42))
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "UNAVAILABLE") {
		t.Fatalf("got %v", err)
	}
}

func TestPostBatchRetriesOnlyRetryableItems(t *testing.T) {
	var bodies []string
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(body))
		if len(bodies) == 1 {
			io.WriteString(w, `{"items":[{"stored":{"room_id":"1","shard":0,"sequence":"5","duplicate":false}},`+
				`{"problem":{"code":"UNAVAILABLE","status":503,"retryable":true,"detail":"x"}},`+
				`{"problem":{"code":"INVALID_ARGUMENT","status":400,"retryable":false,"detail":"y"}}]}`)
			return
		}
		io.WriteString(w, `{"items":[{"stored":{"room_id":"2","shard":1,"sequence":"6","duplicate":false}}]}`)
	}))
	defer server.Close()
	items, err := testClient(server.URL).PostBatch(context.Background(),
		[]BattleResult{*result(1), *result(2), *result(3)})
	if err != nil || len(bodies) != 2 || strings.Count(bodies[1], "room_id") != 1 ||
		!strings.Contains(bodies[1], `"room_id":"2"`) {
		t.Fatalf("got %v, requests %q", err, bodies)
	}
	if items[0].Stored == nil || items[1].Stored == nil || items[1].Stored.RoomID != 2 ||
		items[2].Problem == nil || items[2].Problem.Code != "INVALID_ARGUMENT" {
		t.Fatalf("got items %+v", items)
	}
}

func TestPostResultSendsPlayerIdsAsStrings(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), `"player_id":"1"`) {
			t.Errorf("player_id is not a JSON string: %s", body)
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"room_id":"42","shard":3,"sequence":"17","duplicate":false}`)
	}))
	defer server.Close()
	if _, err := testClient(server.URL).PostResult(context.Background(), result(42)); err != nil {
		t.Fatal(err)
	}
}

// 200 (the node still held the first copy) and 201 (stored now, which is also what a result
// the node already delivered gets) are the same success.
func TestPostResultTakes200And201Alike(t *testing.T) {
	for _, status := range []int{http.StatusOK, http.StatusCreated} {
		server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			io.WriteString(w, `{"room_id":"42","shard":3,"sequence":"17","duplicate":`+
				map[int]string{200: "true", 201: "false"}[status]+`}`)
		}))
		stored, err := testClient(server.URL).PostResult(context.Background(), result(42))
		server.Close()
		if err != nil || stored.Duplicate != (status == http.StatusOK) {
			t.Fatalf("%d: got %+v, %v", status, stored, err)
		}
	}
}

// A restarting node removes its socket: the client sees "connection refused" while the file is
// there but nobody answers, then "no such file or directory" once it is gone, and retries both
// until the node listens again.
func TestPostResultRetriesARefusedAndAMissingSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.sock")
	dead, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	dead.SetUnlinkOnClose(false)
	dead.Close() // the file stays, nobody listens: ECONNREFUSED
	client := NewUnixClient(path)
	client.FirstBackoff, client.MaxBackoff = time.Millisecond, 4*time.Millisecond
	var seen []error
	var server *http.Server
	client.OnRetry = func(err error, _ time.Duration) {
		seen = append(seen, err)
		switch len(seen) {
		case 1: // the node stops: its socket goes
			os.Remove(path)
		case 2: // the node is back
			listener, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			server = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusCreated)
				io.WriteString(w, `{"room_id":"42","shard":3,"sequence":"17","duplicate":false}`)
			})}
			go server.Serve(listener)
		}
	}
	stored, err := client.PostResult(context.Background(), result(42))
	if server != nil {
		defer server.Close()
	}
	if err != nil || stored.RoomID != 42 {
		t.Fatalf("got %+v, %v after %v", stored, err, seen)
	}
	if len(seen) != 2 || !errors.Is(seen[0], syscall.ECONNREFUSED) || !errors.Is(seen[1], syscall.ENOENT) {
		t.Fatalf("retried on %v, not on ECONNREFUSED then ENOENT", seen)
	}
}

// A request on a connection the node closes before answering (its idle close, as the request
// arrived) is retried on a new connection.
func TestPostResultRetriesOnAConnectionTheNodeClosed(t *testing.T) {
	var calls int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if atomic.AddInt32(&calls, 1) == 1 {
			io.ReadAll(r.Body)
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			conn.Close() // no answer
			return
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"room_id":"42","shard":3,"sequence":"17","duplicate":false}`)
	}))
	defer server.Close()
	stored, err := testClient(server.URL).PostResult(context.Background(), result(42))
	if err != nil || stored.RoomID != 42 || calls != 2 {
		t.Fatalf("got %+v, %v after %d calls", stored, err, calls)
	}
}

// docs/sidecar.md's rule for a batch's retryable items: resent after 1 s, doubling up to 30 s
// (an item carries no Retry-After).
func TestPostBatchResendsRetryableItemsAfter1sDoublingTo30s(t *testing.T) {
	var requests int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if atomic.AddInt32(&requests, 1) <= 8 {
			io.WriteString(w, `{"items":[{"problem":{"code":"UNAVAILABLE","status":503,"retryable":true,"detail":"x"}}]}`)
			return
		}
		io.WriteString(w, `{"items":[{"stored":{"room_id":"1","shard":0,"sequence":"5","duplicate":false}}]}`)
	}))
	defer server.Close()
	client := NewTCPClient(server.URL, "secret")
	var waits []time.Duration
	client.sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return ctx.Err()
	}
	items, err := client.PostBatch(context.Background(), []BattleResult{*result(1)})
	if err != nil || items[0].Stored == nil || requests != 9 {
		t.Fatalf("got %+v, %v after %d requests", items, err, requests)
	}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30, 30}
	for i := range want {
		want[i] *= time.Second
	}
	if !reflect.DeepEqual(waits, want) {
		t.Fatalf("waited %v, not %v", waits, want)
	}
}

// Nothing is posted of a result that would be taken for another: a SETTLED result without a
// winner (a draw, where the node reads protobuf), with both a winner and placements, or with a
// string that is not UTF-8 (encoding/json would post U+FFFD in its place).
func TestPostRefusesAResultThatCheckRefuses(t *testing.T) {
	var requests int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		atomic.AddInt32(&requests, 1)
		w.WriteHeader(http.StatusCreated)
	}))
	defer server.Close()
	client := testClient(server.URL)
	neither := result(42)
	neither.WinnerTeam = nil
	emptyPlacements := result(42)
	emptyPlacements.WinnerTeam, emptyPlacements.Placements = nil, []TeamPlacement{}
	both := result(42)
	both.WinnerTeam = Winner(0)
	both.Placements = []TeamPlacement{{Team: 1, Rank: 1}, {Team: 2, Rank: 2}}
	notUTF8 := result(42)
	notUTF8.Players[0].PlayerID = "\xed\xa0\x80x" // a surrogate in UTF-8's form: not UTF-8
	for name, r := range map[string]*BattleResult{"neither": neither,
		"empty placements": emptyPlacements, "both": both, "not UTF-8": notUTF8} {
		if _, err := client.PostResult(context.Background(), r); err == nil {
			t.Errorf("%s: posted", name)
		}
		if _, err := client.PostBatch(context.Background(), []BattleResult{*result(41), *r}); err == nil ||
			!strings.Contains(err.Error(), "result 1") {
			t.Errorf("%s in a batch: got %v", name, err)
		}
	}
	if requests != 0 {
		t.Fatalf("%d requests", requests)
	}
	aborted := &BattleResult{RoomID: 42, Outcome: "ABORTED", EndedAtMs: 1,
		Players: []PlayerResult{{PlayerID: "1", Team: 1}, {PlayerID: "2", Team: 2}}}
	if err := aborted.Check(); err != nil {
		t.Fatalf("an ABORTED result needs no winner: %v", err)
	}
}
