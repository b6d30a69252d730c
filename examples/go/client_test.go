package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func testClient(url string) *Client {
	c := NewTCPClient(url, "secret")
	c.FirstBackoff, c.MaxBackoff = time.Millisecond, 4*time.Millisecond
	return c
}

func result(room uint64) *BattleResult {
	return &BattleResult{RoomID: room, Outcome: "SETTLED", WinnerTeam: 1, EndedAtMs: 1700000000000,
		Players: []PlayerResult{{PlayerID: 1, Team: 1}, {PlayerID: 2, Team: 2}}}
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

func TestPostResultGivesUpWhenContextEnds(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		problem(w, http.StatusServiceUnavailable, "UNAVAILABLE", true)
	}))
	defer server.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := testClient(server.URL).PostResult(ctx, result(42))
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "UNAVAILABLE") {
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
