// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	commoncfg "github.com/prometheus/common/config"
)

// The keep-alive race: a server closes an idle kept-alive connection just
// as the client writes the next request on it (uvicorn, hence vLLM, and
// llama.cpp close idle connections after 5 s), or closes a reused
// connection when the next request arrives. The server never answered
// that request; the client retries it once on a new connection, counted,
// and never once a byte of the response arrived.

// keepAliveServer is a minimal HTTP/1.1 keep-alive server on a raw TCP
// listener: it answers chat and Messages streams and closes a connection
// that stayed idle for idle (0: never), or, with closeOnNext, reads the
// second request of a connection and closes it without answering.
type keepAliveServer struct {
	addr     string
	served   atomic.Int64 // requests answered
	dropped  atomic.Int64 // requests read and not answered
	idleShut atomic.Int64 // connections closed for being idle
}

func newKeepAliveServer(t testing.TB, idle time.Duration, closeOnNext bool) *keepAliveServer {
	t.Helper()
	s := &keepAliveServer{}
	chat := sseBody(chatContent("a"), chatDelta("content", "b", "stop", ""), usageChunk(5, 2, -1), "[DONE]")
	messages := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"m\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"b\"}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	answer := func(body string) []byte {
		return []byte("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	}
	chatAnswer, messagesAnswer := answer(chat), answer(messages)

	s.addr = serveConns(t, func(conn net.Conn) {
		br := bufio.NewReader(conn)
		for n := 0; ; n++ {
			// The idle timer runs from the end of an answer, as in
			// uvicorn; a new connection gets its first request.
			switch {
			case idle > 0 && n > 0:
				conn.SetReadDeadline(time.Now().Add(idle))
			default:
				conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			}
			req, err := http.ReadRequest(br)
			if err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					s.idleShut.Add(1)
				}
				return
			}
			if _, err := io.Copy(io.Discard, req.Body); err != nil {
				return
			}
			if closeOnNext && n > 0 {
				s.dropped.Add(1)
				return
			}
			a := chatAnswer
			if req.URL.Path == "/v1/messages" {
				a = messagesAnswer
			}
			s.served.Add(1) // before the write: the client may be done before it returns
			if _, err := conn.Write(a); err != nil {
				return
			}
		}
	})
	return s
}

// keepAliveRun is what a paced run against a keepAliveServer saw.
type keepAliveRun struct {
	requests, failed, retries, retried int
	outcomes                           map[string]int // of the failures, by outcome/error type
	sample                             string         // the first failure's message
}

func (r keepAliveRun) String() string {
	s := fmt.Sprintf("%d requests, %d false errors, %d retries (%d requests retried)", r.requests, r.failed, r.retries, r.retried)
	if r.failed > 0 {
		s += fmt.Sprintf(" %v (first: %s)", r.outcomes, r.sample)
	}
	return s
}

// runKeepAlive sends n requests at a constant spacing (plus offset(i)),
// alternating chat and Messages, through a client whose idle connections
// close after clientIdle (the target's idle_conn_timeout). It may run on
// a goroutine of its own.
func runKeepAlive(t testing.TB, srv *keepAliveServer, n int, spacing time.Duration, offset func(int) time.Duration, clientIdle time.Duration) keepAliveRun {
	t.Helper()
	run := keepAliveRun{outcomes: map[string]int{}}
	httpClient, err := NewHTTPClient(commoncfg.DefaultHTTPClientConfig, "keepalive", clientIdle)
	if err != nil {
		t.Error(err) // not Fatal: this runs on a goroutine of its own
		return run
	}
	defer httpClient.CloseIdleConnections()
	c, err := NewClient(ClientConfig{BaseURL: srv.addr + "/v1", HTTPClient: httpClient, Timeout: 10 * time.Second})
	if err != nil {
		t.Error(err)
		return run
	}
	next := time.Now()
	var res Result
	for i := range n {
		next = next.Add(spacing + offset(i))
		time.Sleep(time.Until(next))
		req := hostileRequest("hi", 8)
		if i%2 == 1 {
			req = messagesRequest()
		}
		res = Result{}
		c.Do(context.Background(), req, &res)
		run.requests++
		run.retries += res.Retries
		if res.Retries > 0 {
			run.retried++
		}
		if res.Outcome != OutcomeSuccess {
			if run.failed == 0 {
				run.sample = res.Error
			}
			run.failed++
			run.outcomes[string(res.Outcome)+"/"+res.ErrorType]++
		}
	}
	return run
}

// jitter spreads requests over ±1 ms around the spacing, so that some
// land just before the server's idle close and some just after.
func jitter(i int) time.Duration { return time.Duration(i%9-4) * 250 * time.Microsecond }

// TestKeepAliveRace: against servers that close idle connections right
// when the next request comes (time-compressed: idle closes of 20 to 100
// ms, requests spaced alike) and one that closes a reused connection when
// the next request arrives, no request fails, and every request the
// server dropped was retried and counted. The full measurement is
// TestKeepAliveRaceFull.
func TestKeepAliveRace(t *testing.T) {
	modes := []struct {
		name        string
		idle        time.Duration
		closeOnNext bool
		spacing     time.Duration
		n           int
	}{
		{"idle close 20ms", 20 * time.Millisecond, false, 20 * time.Millisecond, 300},
		{"idle close 50ms", 50 * time.Millisecond, false, 50 * time.Millisecond, 160},
		{"idle close 100ms", 100 * time.Millisecond, false, 100 * time.Millisecond, 80},
		{"close on the next request", 0, true, time.Millisecond, 300},
	}
	// All modes at once (t.Parallel would run only GOMAXPROCS of them):
	// about 8 s.
	servers := make([]*keepAliveServer, len(modes))
	runs := make([]keepAliveRun, len(modes))
	var wg sync.WaitGroup
	for i, tc := range modes {
		servers[i] = newKeepAliveServer(t, tc.idle, tc.closeOnNext)
		wg.Go(func() { runs[i] = runKeepAlive(t, servers[i], tc.n, tc.spacing, jitter, 4*time.Second) })
	}
	wg.Wait()
	for i, tc := range modes {
		srv, run := servers[i], runs[i]
		t.Run(tc.name, func(t *testing.T) {
			t.Logf("%v; server: %d served, %d dropped, %d idle closes", run, srv.served.Load(), srv.dropped.Load(), srv.idleShut.Load())
			if run.failed != 0 {
				t.Errorf("%d of %d requests failed: %v (first: %s)", run.failed, run.requests, run.outcomes, run.sample)
			}
			if got := srv.served.Load(); got != int64(tc.n) {
				t.Errorf("the server answered %d requests, want %d (one each)", got, tc.n)
			}
			if d := srv.dropped.Load(); int64(run.retries) < d {
				t.Errorf("the server dropped %d requests, the client counted %d retries", d, run.retries)
			}
			if tc.closeOnNext && (srv.dropped.Load() == 0 || run.retried < tc.n-1) {
				t.Errorf("%d requests retried, %d dropped: every request after the first lands on a reused connection the server closes", run.retried, srv.dropped.Load())
			}
		})
	}
}

// TestKeepAliveRaceFull is the full measurement: 1,000 requests at a
// constant 1 request/s (the default idle_conn_timeout, 4 s) against
// servers that close idle connections after 0.5, 1, 2 and 5 s and one
// that closes on the next request. It takes about 17 minutes (the modes
// run at once); LLMPROBE_KEEPALIVE_SCALE compresses time (0.1: idle
// closes of 50 ms to 500 ms at 10 requests/s), LLMPROBE_KEEPALIVE_N sets
// the count.
//
//	LLMPROBE_KEEPALIVE_RACE=1 go test ./probe -run TestKeepAliveRaceFull -v -timeout 30m
func TestKeepAliveRaceFull(t *testing.T) {
	if os.Getenv("LLMPROBE_KEEPALIVE_RACE") == "" {
		t.Skip("set LLMPROBE_KEEPALIVE_RACE=1 to run the full keep-alive measurement")
	}
	scale, n := 1.0, 1000
	if v := os.Getenv("LLMPROBE_KEEPALIVE_SCALE"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 || f > 1 {
			t.Fatalf("LLMPROBE_KEEPALIVE_SCALE=%q: want a number in (0, 1]", v)
		}
		scale = f
	}
	if v := os.Getenv("LLMPROBE_KEEPALIVE_N"); v != "" {
		m, err := strconv.Atoi(v)
		if err != nil || m <= 0 || m > 100_000 {
			t.Fatalf("LLMPROBE_KEEPALIVE_N=%q: want a count in [1, 100000]", v)
		}
		n = m
	}
	d := func(s float64) time.Duration { return time.Duration(s * scale * float64(time.Second)) }
	none := func(int) time.Duration { return 0 }
	modes := []struct {
		name        string
		idle        time.Duration
		closeOnNext bool
	}{
		{"idle close 0.5s", d(0.5), false},
		{"idle close 1s", d(1), false},
		{"idle close 2s", d(2), false},
		{"idle close 5s", d(5), false},
		{"close on the next request", 0, true},
	}
	servers := make([]*keepAliveServer, len(modes))
	runs := make([]keepAliveRun, len(modes))
	var wg sync.WaitGroup
	for i, tc := range modes {
		servers[i] = newKeepAliveServer(t, tc.idle, tc.closeOnNext)
		wg.Go(func() { runs[i] = runKeepAlive(t, servers[i], n, d(1), none, d(4)) })
	}
	wg.Wait()
	for i, tc := range modes {
		srv, run := servers[i], runs[i]
		t.Logf("%s: %v; server: %d served, %d dropped, %d idle closes", tc.name, run, srv.served.Load(), srv.dropped.Load(), srv.idleShut.Load())
		if run.failed != 0 {
			t.Errorf("%s: %d of %d requests failed: %v (first: %s)", tc.name, run.failed, run.requests, run.outcomes, run.sample)
		}
	}
}

// TestNoRetryAfterAResponseByte: once a byte of the response arrived the
// server has the request: a reused connection that breaks inside the
// status line is a failure, not a retry.
func TestNoRetryAfterAResponseByte(t *testing.T) {
	var seen atomic.Int64
	url := rawServer(t, func(c net.Conn, _ *http.Request) {
		if seen.Add(1) == 1 {
			body := sseBody(chatContent("a"), chatDelta("content", "b", "stop", ""), "[DONE]")
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			return
		}
		io.WriteString(c, "HTTP/1.1 20")
		c.Close()
	})
	c := newTestClient(t, url+"/v1", nil)
	if res := do(t, c, chatRequest()); res.Outcome != OutcomeSuccess {
		t.Fatalf("first request: %s/%s %s", res.Outcome, res.ErrorType, res.Error)
	}
	res := do(t, c, chatRequest())
	if res.Outcome == OutcomeSuccess || res.Retries != 0 || !res.ConnReused {
		t.Fatalf("second request: %s/%s %q, retries %d, reused %v; want a failure on the reused connection, no retry", res.Outcome, res.ErrorType, res.Error, res.Retries, res.ConnReused)
	}
	if n := seen.Load(); n != 2 {
		t.Fatalf("the server saw %d requests, want 2", n)
	}
}
