// Package ingest hands battle results to a running verdict-node through its ingest listener
// (verdict-node run --ingest-listen), over the node's Unix socket or over TCP with its ingest
// token. It uses the standard library only, so a battle host can copy this file as it is.
//
// A result the node answers 2xx is fsync-durable in the node's outbox: from then on the node
// delivers it to the lobby, exactly once as far as the lobby's settlements go. Until then the
// client retries: on transport errors and on 503 UNAVAILABLE (honouring Retry-After), never on
// any other answer. A retry of the identical result is always safe. What the client does about
// the node's ways:
//
//   - 200 and 201 are the same success. The node answers 200 (duplicate) only while its outbox
//     still holds the first copy; once that copy is delivered, the same post is stored again
//     (201), and the lobby answers the redelivery as the duplicate it is.
//   - A restarting node removes its Unix socket: connecting then fails with "no such file or
//     directory" (ENOENT), not only "connection refused". Both are retried, as is every failure
//     to connect: nothing was sent.
//   - The node closes a connection idle for 10 s. Pooled connections are dropped after 5 s idle,
//     and a request on a connection the node closed meanwhile is a transport error: retried on a
//     new connection.
//   - A batch's items are retried by their own "retryable" member: only those items are posted
//     again, alone of the others, after 1 s, doubling up to 30 s (an item carries no
//     Retry-After); the rest are final.
//
// A result is checked before anything is posted (BattleResult.Check): a SETTLED result that
// names neither a winner nor placements, or both, and a string that is not UTF-8 are refused
// here, never sent to be read as a draw or with U+FFFD in place of what the string held.
package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"mime"
	"net"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"
)

// PlayerResult is one player's line in a finished battle (verdict.v1.PlayerResult). A player id
// is a string: the lobby takes any id of 1 to 64 bytes of UTF-8 (an integer id is its decimal
// string).
type PlayerResult struct {
	PlayerID     string `json:"player_id"`
	Team         uint32 `json:"team"` // teams are numbered from 1
	Kills        uint32 `json:"kills"`
	Deaths       uint32 `json:"deaths"`
	Assists      uint32 `json:"assists"`
	Score        int64  `json:"score,string"`
	Disconnected bool   `json:"disconnected"`
	// Share is the part of the battle the player played, 0 to 1 (one who left halfway: 0.5); nil
	// is the whole battle. A pointer, as 0 is a share too. OpenSkill modes move a player by it.
	Share *float64 `json:"share,omitempty"`
}

// TeamPlacement is where one team of a room placed (verdict.v1.TeamPlacement): rank 1 is best,
// equal ranks tie.
type TeamPlacement struct {
	Team uint32 `json:"team"`
	Rank uint32 `json:"rank"`
}

// BattleResult is what a battle reports when its room finishes (verdict.v1.BattleResult), in
// protobuf's JSON mapping: 64-bit integers are JSON strings, the outcome is "SETTLED" or
// "ABORTED". NodeID may be left empty: the node fills in its own.
//
// A SETTLED result says where its teams placed by exactly one of two members: Placements, one
// rank per team with at least one team at rank 1, for a room of any number of teams; or
// WinnerTeam, for two teams (Winner(1), Winner(2), or Winner(0) for a draw: a draw is said,
// never implied). WinnerTeam is a pointer because an absent winner_team is not a 0. The node
// refuses with 400 a SETTLED result that gives neither, one that gives both (a winner_team of 0
// beside placements too), and placements that rank no team 1; Check refuses the first two before
// anything is posted.
type BattleResult struct {
	RoomID      uint64          `json:"room_id,string"`
	Outcome     string          `json:"outcome"`
	WinnerTeam  *uint32         `json:"winner_team,omitempty"`
	Placements  []TeamPlacement `json:"placements,omitempty"`
	Suspect     bool            `json:"suspect,omitempty"`
	EndedAtMs   int64           `json:"ended_at_ms,string"`
	NodeID      string          `json:"node_id,omitempty"`
	ReplayPath  string          `json:"replay_path,omitempty"`
	Players     []PlayerResult  `json:"players"`
	AbortReason string          `json:"abort_reason,omitempty"`
}

// Winner is a BattleResult's WinnerTeam: the winning team of two, or 0 for a draw.
func Winner(team uint32) *uint32 { return &team }

// Check refuses a result that would be posted as something else than it says: a SETTLED result
// without a WinnerTeam or Placements (the node would settle it as a draw, or refuse it), or with
// both, and a string member that is not UTF-8, which encoding/json would send with U+FFFD in
// place of the bytes it does not read. The node checks everything else.
func (r *BattleResult) Check() error {
	if r.Outcome == "SETTLED" {
		switch {
		case r.WinnerTeam == nil && len(r.Placements) == 0:
			return fmt.Errorf("room %d: a SETTLED result names its winner_team (1 or 2, 0 for "+
				"a draw) or its placements; it has neither", r.RoomID)
		case r.WinnerTeam != nil && len(r.Placements) > 0:
			return fmt.Errorf("room %d: give winner_team or placements, not both (a "+
				"winner_team of 0, a draw, included)", r.RoomID)
		}
	}
	for _, member := range []struct{ name, value string }{{"outcome", r.Outcome},
		{"node_id", r.NodeID}, {"replay_path", r.ReplayPath}, {"abort_reason", r.AbortReason}} {
		if !utf8.ValidString(member.value) {
			return fmt.Errorf("room %d: %s %q is not UTF-8", r.RoomID, member.name, member.value)
		}
	}
	for _, p := range r.Players {
		if !utf8.ValidString(p.PlayerID) {
			return fmt.Errorf("room %d: player_id %q is not UTF-8", r.RoomID, p.PlayerID)
		}
	}
	return nil
}

// Share is a PlayerResult's Share: the part of the battle played, 0 to 1.
func Share(part float64) *float64 { return &part }

// StoredResult is the node's answer for a stored result (verdict.v1.StoredResult): where it
// waits in the outbox for delivery. Duplicate is set when an identical result was stored
// before and nothing was written.
type StoredResult struct {
	RoomID    uint64 `json:"room_id,string"`
	Shard     uint32 `json:"shard"`
	Sequence  uint64 `json:"sequence,string"`
	Duplicate bool   `json:"duplicate"`
}

// Problem is an error the node answered: the members of its application/problem+json body
// (verdict.v1.ProblemDetails) that a client acts on, or a batch item's problem.
type Problem struct {
	Status    int    `json:"status"`
	Code      string `json:"code"` // e.g. "INVALID_ARGUMENT", "IDEMPOTENCY_MISMATCH"
	Retryable bool   `json:"retryable"`
	Detail    string `json:"detail"`
}

func (p *Problem) Error() string {
	return fmt.Sprintf("verdict-node answered %d %s: %s", p.Status, p.Code, p.Detail)
}

// StoredItem is the answer for one result of a batch: Stored, or Problem.
type StoredItem struct {
	Stored  *StoredResult `json:"stored,omitempty"`
	Problem *Problem      `json:"problem,omitempty"`
}

// MaxBatch is the most results one batch request may hold (and 4 MiB).
const MaxBatch = 256

// Client posts results to one verdict-node. Its fields may be changed before first use; a
// Client is then safe for concurrent use.
type Client struct {
	// BaseURL is the node's listener, e.g. "http://127.0.0.1:9465"; for a Unix socket the
	// host is ignored ("http://verdict-node").
	BaseURL string
	// Token is the node's ingest token, sent as a bearer token; a Unix socket needs none.
	Token string
	// HTTP sends the requests. Its Timeout bounds one attempt.
	HTTP *http.Client
	// FirstBackoff and MaxBackoff bound the wait between attempts of a request when the node
	// gave no Retry-After: it doubles from FirstBackoff up to MaxBackoff, with jitter. (A
	// batch's retryable items wait by the documented rule instead: itemBackoff.)
	FirstBackoff, MaxBackoff time.Duration
	// OnRetry, if set, is told of each failed attempt before the wait that follows it (to log
	// it, say). It is called from the goroutine that posts.
	OnRetry func(err error, wait time.Duration)

	// sleep waits d or until ctx is done (then returns ctx.Err()); nil is a real timer. Tests
	// replace it to see the waits without spending them.
	sleep func(ctx context.Context, d time.Duration) error
}

// The wait before a batch's retryable items are posted again, by docs/sidecar.md's retry rule
// for batch items: 1 s, doubling up to 30 s.
const (
	firstItemBackoff = time.Second
	maxItemBackoff   = 30 * time.Second
)

// itemBackoff is the wait before the given resend of a batch's retryable items (1 for the
// first): firstItemBackoff doubling up to maxItemBackoff.
func itemBackoff(resend int) time.Duration {
	d := firstItemBackoff
	for i := 1; i < resend && d < maxItemBackoff; i++ {
		d *= 2
	}
	if d > maxItemBackoff {
		d = maxItemBackoff
	}
	return d
}

// NewUnixClient returns a Client for the node's Unix socket at path (its --ingest-listen
// unix:PATH), which takes no token.
func NewUnixClient(path string) *Client {
	transport := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		MaxIdleConns:    4,
		IdleConnTimeout: idleTimeout,
	}
	return newClient("http://verdict-node", "", transport)
}

// NewTCPClient returns a Client for a TCP ingest listener at baseURL ("http://HOST:PORT"),
// which requires the node's ingest token.
func NewTCPClient(baseURL, token string) *Client {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.IdleConnTimeout = idleTimeout
	return newClient(baseURL, token, transport)
}

// idleTimeout drops a pooled connection well before the node closes it (10 s idle), so that a
// request seldom meets a connection closed under it; one that does is retried.
const idleTimeout = 5 * time.Second

func newClient(baseURL, token string, transport http.RoundTripper) *Client {
	return &Client{
		BaseURL:      baseURL,
		Token:        token,
		HTTP:         &http.Client{Transport: transport, Timeout: 30 * time.Second},
		FirstBackoff: 100 * time.Millisecond,
		MaxBackoff:   5 * time.Second,
	}
}

// PostResult stores one result (POST /v1/results) and returns where it is stored; Duplicate
// is set when the node still held it (200), and unset when it stored it now (201), which is
// also what a result already delivered gets. It retries until the node answers, the answer is not
// retryable, or ctx is done: give ctx a deadline. A refusal is a *Problem (400
// INVALID_ARGUMENT, 422 IDEMPOTENCY_MISMATCH, ...); retrying it would not help. A result that
// fails Check is refused with its error, and nothing is posted.
func (c *Client) PostResult(ctx context.Context, result *BattleResult) (StoredResult, error) {
	if err := result.Check(); err != nil {
		return StoredResult{}, err
	}
	body, err := json.Marshal(result)
	if err != nil {
		return StoredResult{}, err
	}
	var stored StoredResult
	if err := c.post(ctx, "/v1/results", body, &stored); err != nil {
		return StoredResult{}, err
	}
	if stored.RoomID != result.RoomID {
		return StoredResult{}, fmt.Errorf("verdict-node answered for room %d, not %d",
			stored.RoomID, result.RoomID)
	}
	return stored, nil
}

// PostBatch stores up to MaxBatch results with one fsync (POST /v1/results:batch) and
// returns one item per result, in order. Results whose items are retryable problems are
// posted again, alone of the others, after 1 s, doubling up to 30 s, until they are stored or
// ctx is done; the items then hold what the node last answered. The error is for the request
// as a whole (a *Problem, a transport error when ctx ended, or a reply that does not match the
// request), or the first result that fails Check, and then nothing is posted.
func (c *Client) PostBatch(ctx context.Context, results []BattleResult) ([]StoredItem, error) {
	if len(results) > MaxBatch {
		return nil, fmt.Errorf("a batch holds at most %d results, not %d", MaxBatch, len(results))
	}
	for i := range results {
		if err := results[i].Check(); err != nil {
			return nil, fmt.Errorf("result %d: %w", i, err)
		}
	}
	items := make([]StoredItem, len(results))
	pending := make([]int, len(results)) // indexes into results still to store
	for i := range pending {
		pending[i] = i
	}
	for attempt := 0; len(pending) > 0; attempt++ {
		if attempt > 0 {
			wait := itemBackoff(attempt)
			if c.OnRetry != nil {
				c.OnRetry(fmt.Errorf("%d item(s) answered retryable, first: %w", len(pending),
					items[pending[0]].Problem), wait)
			}
			if err := c.wait(ctx, wait); err != nil {
				return items, err
			}
		}
		batch := struct {
			Results []BattleResult `json:"results"`
		}{}
		for _, i := range pending {
			batch.Results = append(batch.Results, results[i])
		}
		body, err := json.Marshal(batch)
		if err != nil {
			return nil, err
		}
		var reply struct {
			Items []StoredItem `json:"items"`
		}
		if err := c.post(ctx, "/v1/results:batch", body, &reply); err != nil {
			return items, err
		}
		if len(reply.Items) != len(pending) {
			return items, fmt.Errorf("verdict-node answered %d items for %d results",
				len(reply.Items), len(pending))
		}
		var again []int
		for k, i := range pending {
			items[i] = reply.Items[k]
			if p := items[i].Problem; p != nil && p.Retryable {
				again = append(again, i)
			}
		}
		pending = again
	}
	return items, nil
}

// post sends body as JSON to path until it gets a final answer, and decodes a 2xx into out.
func (c *Client) post(ctx context.Context, path string, body []byte, out any) error {
	var last error // the last failed attempt that was not cut short by ctx
	for retry := 1; ; retry++ {
		wait, err := c.attempt(ctx, path, body, out)
		if err == nil {
			return nil
		}
		var problem *Problem
		if errors.As(err, &problem) && !problem.Retryable {
			return err
		}
		if ctx.Err() == nil || last == nil {
			last = err
		}
		if wait == 0 {
			wait = c.backoff(retry)
		}
		if c.OnRetry != nil && ctx.Err() == nil {
			c.OnRetry(err, wait)
		}
		if done := c.wait(ctx, wait); done != nil {
			return fmt.Errorf("%w (last answer: %v)", done, last)
		}
	}
}

// attempt makes one request. It returns the answer's Retry-After for a retryable problem, and
// an error that is a non-retryable *Problem when the request must not be retried.
func (c *Client) attempt(ctx context.Context, path string, body []byte,
	out any) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+path,
		bytes.NewReader(body))
	if err != nil {
		return 0, &Problem{Code: "CLIENT", Detail: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		// Transport: no socket (ENOENT, a restarting node), refused, reset, or a connection the
		// node closed as it was reused. Retried.
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return 0, err
	}
	// 200 (the node still held it) and 201 (stored now) are the same success.
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusCreated {
		// Read leniently: a newer node may add members to its answers.
		if err := json.Unmarshal(data, out); err != nil {
			return 0, &Problem{Status: resp.StatusCode, Code: "BAD_REPLY",
				Detail: "undecodable reply: " + err.Error()}
		}
		return 0, nil
	}
	problem := &Problem{Status: resp.StatusCode, Code: "HTTP_" + strconv.Itoa(resp.StatusCode),
		Detail: string(data)}
	if media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); media ==
		"application/problem+json" {
		_ = json.Unmarshal(data, problem) // a body that does not parse keeps the raw text
	}
	// Only 503 is retried, whatever a body says: any other status is final.
	problem.Retryable = resp.StatusCode == http.StatusServiceUnavailable
	return retryAfter(resp.Header.Get("Retry-After")), problem
}

// backoff is the wait before the given retry (1 for the first): doubling from FirstBackoff up
// to MaxBackoff, then picked at random in its upper half so clients do not retry in step.
func (c *Client) backoff(retry int) time.Duration {
	d := c.FirstBackoff
	for i := 1; i < retry && d < c.MaxBackoff; i++ {
		d *= 2
	}
	if d > c.MaxBackoff {
		d = c.MaxBackoff
	}
	return d/2 + time.Duration(rand.Int63n(int64(d/2)+1))
}

// retryAfter reads a Retry-After header given in seconds; 0 when absent or unreadable.
func retryAfter(header string) time.Duration {
	s, err := strconv.Atoi(header)
	if err != nil || s < 0 {
		return 0
	}
	return time.Duration(s) * time.Second
}

// wait waits d, or until ctx is done (then returns ctx.Err()).
func (c *Client) wait(ctx context.Context, d time.Duration) error {
	if c.sleep != nil {
		return c.sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
