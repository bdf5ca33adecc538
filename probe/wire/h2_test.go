// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	commoncfg "github.com/prometheus/common/config"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/llmprobe/llmprobe/internal/h2test"
	"github.com/llmprobe/llmprobe/internal/httpclient"
	"github.com/llmprobe/llmprobe/internal/simtest"
	"github.com/llmprobe/llmprobe/sim"
)

// HTTP/2 and h2c: the client over a real HTTP/2 connection, against
// servers that refuse h2c, reset a stream, send GOAWAY mid-stream or
// limit the streams of a connection. Each ends in a classified outcome,
// never a false success.

// h2cClient is a wire client that speaks h2c to base, as a target with
// http_version "2" and an http:// URL does.
func h2cClient(t *testing.T, base string, conns *httpclient.Conns) *Client {
	t.Helper()
	hc, err := NewTargetHTTPClient(commoncfg.DefaultHTTPClientConfig, "h2c", HTTPOptions{IdleTimeout: time.Minute, H2C: true, Conns: conns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.CloseIdleConnections)
	c, err := NewClient(ClientConfig{BaseURL: base + "/v1", HTTPClient: hc, H2C: true, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// h2cServer serves h on loopback over HTTP/1.1 and h2c, with conf as
// its HTTP/2 settings (nil: Go's), and counts its open connections.
func h2cServer(t *testing.T, h http.Handler, conf *http.HTTP2Config) (string, *http.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := &http.Server{Handler: h, HTTP2: conf, ErrorLog: quietLog(), Protocols: new(http.Protocols), ConnState: func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			conns.Add(1)
		case http.StateClosed, http.StateHijacked:
			conns.Add(-1)
		}
	}}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String(), srv, &conns
}

// streamThen writes n content events, flushing each, then calls end.
func streamThen(n int, end func(w http.ResponseWriter)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i < n; i++ {
			_, _ = io.WriteString(w, sseBody(chatContent("tok ")))
			w.(http.Flusher).Flush()
		}
		end(w)
	})
}

func TestH2CStreamsAndSaysSo(t *testing.T) {
	base, _, _ := h2cServer(t, streamThen(3, func(w http.ResponseWriter) {
		_, _ = io.WriteString(w, sseBody(chatDelta("content", "!", "stop", ""), "[DONE]"))
	}), nil)
	res := do(t, h2cClient(t, base, nil), hostileRequest("hi", 8))
	expectOutcome(t, res, OutcomeSuccess, "")
	checkTimingInvariants(t, res)
	if res.Chunks != 4 || res.Proto != "HTTP/2.0" {
		t.Errorf("%d chunks over %q, want 4 over HTTP/2.0", res.Chunks, res.Proto)
	}
	// The same server over HTTP/1.1 says HTTP/1.1.
	res = do(t, newTestClient(t, base+"/v1", nil), hostileRequest("hi", 8))
	expectOutcome(t, res, OutcomeSuccess, "")
	if res.Proto != "HTTP/1.1" {
		t.Errorf("proto %q over HTTP/1.1", res.Proto)
	}
}

// TestH2CRefusedByHTTP1Server: a server that speaks only HTTP/1.1 (Go's
// default server closes on the h2c preface; others answer it with an
// HTTP/1.1 400, or close without a word) is h2c_refused, with a message
// that says what to set, not a reset or a dial error.
func TestH2CRefusedByHTTP1Server(t *testing.T) {
	goDefault := httptest.NewServer(streamThen(1, func(http.ResponseWriter) {}))
	defer goDefault.Close()
	answer400 := h2RawServer(t, func(c net.Conn) {
		_, _ = bufio.NewReader(c).ReadString('\n')
		_, _ = io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 11\r\nConnection: close\r\n\r\nBad Request")
	})
	closeAtOnce := h2RawServer(t, func(c net.Conn) {
		_, _ = bufio.NewReader(c).ReadString('\n')
	})
	for name, base := range map[string]string{"go default": goDefault.URL, "400": answer400, "close": closeAtOnce} {
		t.Run(name, func(t *testing.T) {
			res := do(t, h2cClient(t, base, nil), hostileRequest("hi", 8))
			expectOutcome(t, res, OutcomeConnectError, ErrorTypeH2CRefused)
			if !strings.Contains(res.Error, "does not speak h2c") || !strings.Contains(res.Error, `http_version: "1.1"`) {
				t.Errorf("message %q does not say what to do", res.Error)
			}
		})
	}
	// An HTTP/2 server (its SETTINGS came) that closes before answering
	// speaks h2c: the connection ended before the response, no_response.
	h2Closes := h2RawServer(t, func(c net.Conn) {
		fr := h2Handshake(c)
		if fr == nil {
			return
		}
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if f.Header().Flags.Has(http2.FlagDataEndStream) && f.Header().Type != http2.FrameSettings {
				closeAfter(c)
				return
			}
		}
	})
	res := do(t, h2cClient(t, h2Closes, nil), hostileRequest("hi", 8))
	expectOutcome(t, res, OutcomeStreamError, "no_response")

	// A server that is not there is still connection_refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	res = do(t, h2cClient(t, "http://"+addr, nil), hostileRequest("hi", 8))
	expectOutcome(t, res, OutcomeConnectError, "connection_refused")
}

// h2RawServer serves each connection with serve, for at most 30s.
func h2RawServer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	return serveConns(t, func(c net.Conn) {
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		serve(c)
	})
}

// TestH2StreamResetMidStream: a handler that aborts after three tokens
// makes net/http's server reset the stream (RST_STREAM); the client
// keeps the tokens it got and reports stream_reset, over h2c and over
// HTTP/2 by ALPN (TLS).
func TestH2StreamResetMidStream(t *testing.T) {
	h := streamThen(3, func(http.ResponseWriter) { panic(http.ErrAbortHandler) })
	base, _, _ := h2cServer(t, h, nil)
	tlsSrv := httptest.NewUnstartedServer(h)
	tlsSrv.EnableHTTP2 = true
	tlsSrv.Config.ErrorLog = quietLog()
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	clients := map[string]*Client{
		"h2c": h2cClient(t, base, nil),
		"tls": newTestClient(t, tlsSrv.URL+"/v1", func(c *ClientConfig) { c.HTTPClient = tlsHTTPClient(t) }),
	}
	for name, c := range clients {
		t.Run(name, func(t *testing.T) {
			res := do(t, c, hostileRequest("hi", 8))
			expectOutcome(t, res, OutcomeStreamError, ErrorTypeStreamReset)
			checkTimingInvariants(t, res)
			if res.Chunks != 3 || !res.FirstToken || res.Proto != "HTTP/2.0" {
				t.Errorf("%d chunks, first token %v, proto %q", res.Chunks, res.FirstToken, res.Proto)
			}
			if !strings.Contains(res.Error, "reset the stream") {
				t.Errorf("message %q", res.Error)
			}
		})
	}
}

// tlsHTTPClient is a target's HTTP client over TLS that trusts any
// certificate (httptest's): HTTP/2 by ALPN when the server offers it,
// prometheus/common's default.
func tlsHTTPClient(t *testing.T) *http.Client {
	t.Helper()
	cfg := commoncfg.DefaultHTTPClientConfig
	cfg.TLSConfig.InsecureSkipVerify = true
	hc, err := NewTargetHTTPClient(cfg, "h2", HTTPOptions{IdleTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.CloseIdleConnections)
	return hc
}

// TestH2RefusedStreamEndsAtOnce: a server that refuses every stream
// (RST_STREAM REFUSED_STREAM: it processed nothing) gets each request
// twice, the second time at once and counted as a retry, and the
// request ends as stream_error refused_stream in a moment, not as a
// timeout after net/http's hidden re-sends with back-off (1 s, 2 s, 4 s
// ...) have held it for the whole request timeout. So does a server that
// resets every stream with PROTOCOL_ERROR before answering (net/http
// re-sends that too), as stream_reset. Over h2c and over TLS (HTTP/2 by
// ALPN), through the targets' prometheus/common clients.
func TestH2RefusedStreamEndsAtOnce(t *testing.T) {
	const timeout = 60 * time.Second
	for _, tc := range []struct {
		code    http2.ErrCode
		errType string
	}{
		{http2.ErrCodeRefusedStream, ErrorTypeRefusedStream},
		{http2.ErrCodeProtocol, ErrorTypeStreamReset},
	} {
		for _, overTLS := range []bool{false, true} {
			name := tc.code.String() + map[bool]string{false: " h2c", true: " tls"}[overTLS]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				srv := h2test.ResetEveryStream(t, tc.code, overTLS)
				var hc *http.Client
				if overTLS {
					hc = tlsHTTPClient(t)
				} else {
					var err error
					if hc, err = NewTargetHTTPClient(commoncfg.DefaultHTTPClientConfig, "h2c", HTTPOptions{IdleTimeout: time.Minute, H2C: true}); err != nil {
						t.Fatal(err)
					}
					t.Cleanup(hc.CloseIdleConnections)
				}
				c := newTestClient(t, srv.URL+"/v1", func(c *ClientConfig) { c.HTTPClient, c.H2C, c.Timeout = hc, !overTLS, timeout })
				// The test's own bound, far above what the request needs
				// and far below its timeout.
				ctx, cancel := context.WithTimeout(context.Background(), timeout/4)
				defer cancel()
				for i := range 3 {
					res := &Result{}
					began := time.Now()
					c.Do(ctx, hostileRequest("hi", 8), res)
					took := time.Since(began)
					if res.Outcome != OutcomeStreamError || res.ErrorType != tc.errType {
						t.Fatalf("request %d: %s/%s %q after %v and %d retries, want stream_error/%s", i, res.Outcome, res.ErrorType, res.Error, took.Round(time.Millisecond), res.Retries, tc.errType)
					}
					if res.Retries != 1 || srv.Streams() != int64(2*(i+1)) {
						t.Errorf("request %d: %d retries, %d streams reset in all; want 1 retry, %d streams", i, res.Retries, srv.Streams(), 2*(i+1))
					}
					if !strings.Contains(res.Error, tc.code.String()) {
						t.Errorf("message %q does not name the code", res.Error)
					}
					if res.FirstToken || res.Chunks != 0 {
						t.Errorf("a token from a reset stream")
					}
					if took > timeout/6 {
						t.Errorf("request %d took %v of its %v timeout", i, took, timeout)
					}
					t.Logf("request %d: %v, %d connections (%s)", i, took.Round(time.Microsecond), srv.Conns(), res.Error)
				}
			})
		}
	}
}

// TestH2GoAwayBeforeTheStreamResent: a server that sends GOAWAY before
// it began the request's stream (a graceful shutdown: last stream 0)
// did not process it; the client re-sends it at once on a new
// connection, counted, and it succeeds there.
func TestH2GoAwayBeforeTheStreamResent(t *testing.T) {
	var conns atomic.Int64
	base := h2RawServer(t, func(c net.Conn) {
		if conns.Add(1) > 1 {
			h2Answer(c, 0, func(c net.Conn, fr *http2.Framer, stream uint32) {
				_ = fr.WriteData(stream, true, []byte(sseBody(chatDelta("content", "hi", "stop", ""), "[DONE]")))
				keepOpen(c)
			})
			return
		}
		fr := h2Handshake(c)
		if fr == nil {
			return
		}
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if _, ok := f.(*http2.HeadersFrame); ok {
				_ = fr.WriteGoAway(0, http2.ErrCodeNo, nil)
				closeAfter(c)
				return
			}
		}
	})
	res := do(t, h2cClient(t, base, nil), hostileRequest("hi", 8))
	expectOutcome(t, res, OutcomeSuccess, "")
	if res.Retries != 1 || conns.Load() != 2 {
		t.Errorf("%d retries over %d connections, want 1 over 2", res.Retries, conns.Load())
	}
}

// TestH2CSimulatorResetFault: the simulator's reset fault cannot cut a
// TCP connection that HTTP/2 shares, so it resets the stream; the client
// says so.
func TestH2CSimulatorResetFault(t *testing.T) {
	base := startSim(t, nil)
	c := h2cClient(t, strings.TrimSuffix(base, "/v1"), nil)
	res := &Result{PlannedPromptTokens: 42}
	c.http.Transport = faultTransport{rt: c.http.Transport, fault: "reset:3"}
	c.Do(context.Background(), simRequest(APIChat, 8), res)
	expectOutcome(t, res, OutcomeStreamError, ErrorTypeStreamReset)
	if res.Chunks != 3 {
		t.Errorf("%d chunks before the reset, want 3", res.Chunks)
	}
}

// h2Handshake is a raw h2c server's side of the connection preface: it
// reads the client's preface and sends its SETTINGS; nil when either
// failed.
func h2Handshake(c net.Conn) *http2.Framer {
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil || string(preface) != http2.ClientPreface {
		return nil
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		return nil
	}
	return fr
}

// h2Frames is an h2c server written with x/net's Framer over a raw TCP
// listener: it reads the client's preface and first request, answers
// headers and the given events, then runs end.
func h2Frames(t *testing.T, events int, end func(c net.Conn, fr *http2.Framer, stream uint32)) string {
	t.Helper()
	return h2RawServer(t, func(c net.Conn) { h2Answer(c, events, end) })
}

// h2Answer is h2Frames' side of one connection.
func h2Answer(c net.Conn, events int, end func(c net.Conn, fr *http2.Framer, stream uint32)) {
	fr := h2Handshake(c)
	if fr == nil {
		return
	}
	// The whole request first (its END_STREAM): a server that ends
	// the connection while the client still writes makes net/http
	// report the write's failure, not the response.
	var stream uint32
	for ended := false; !ended; {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.HeadersFrame:
			stream, ended = f.StreamID, f.StreamEnded()
		case *http2.DataFrame:
			ended = f.StreamEnded()
		}
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	_ = enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
	_ = enc.WriteField(hpack.HeaderField{Name: "content-type", Value: "text/event-stream"})
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: hb.Bytes(), EndHeaders: true})
	for i := 0; i < events; i++ {
		_ = fr.WriteData(stream, false, []byte(sseBody(chatContent("tok "))))
	}
	end(c, fr, stream)
}

// closeAfter ends the connection as a server does after its last frame:
// half-closed (FIN, so no reset can overtake what was written), then
// read until the client closes it.
func closeAfter(c net.Conn) {
	_ = c.(*net.TCPConn).CloseWrite()
	_, _ = io.Copy(io.Discard, c)
}

// keepOpen reads until the client closes the connection: the stream,
// not the connection, ends.
func keepOpen(c net.Conn) { _, _ = io.Copy(io.Discard, c) }

// TestH2GoAwayAndResetFrames: a GOAWAY that closes the connection
// mid-stream, with or without an error code, is goaway; a RST_STREAM
// mid-stream (any code) is stream_reset, and one before the response is
// stream_reset too; the tokens read before count; none is a success.
func TestH2GoAwayAndResetFrames(t *testing.T) {
	cases := []struct {
		name    string
		events  int
		end     func(c net.Conn, fr *http2.Framer, stream uint32)
		errType string
		chunks  int
	}{
		{"goaway no_error mid-stream", 2, func(c net.Conn, fr *http2.Framer, stream uint32) {
			_ = fr.WriteGoAway(stream, http2.ErrCodeNo, nil)
			closeAfter(c)
		}, ErrorTypeGoAway, 2},
		{"goaway internal_error mid-stream", 2, func(c net.Conn, fr *http2.Framer, stream uint32) {
			_ = fr.WriteGoAway(stream, http2.ErrCodeInternal, []byte("draining"))
			closeAfter(c)
		}, ErrorTypeGoAway, 2},
		{"rst_stream cancel mid-stream", 2, func(c net.Conn, fr *http2.Framer, stream uint32) {
			_ = fr.WriteRSTStream(stream, http2.ErrCodeCancel)
			keepOpen(c)
		}, ErrorTypeStreamReset, 2},
		{"rst_stream internal_error mid-stream", 1, func(c net.Conn, fr *http2.Framer, stream uint32) {
			_ = fr.WriteRSTStream(stream, http2.ErrCodeInternal)
			keepOpen(c)
		}, ErrorTypeStreamReset, 1},
		// The connection ends under the stream without a GOAWAY: the
		// broken stream of HTTP/1.1.
		{"connection closed mid-stream", 2, func(c net.Conn, _ *http2.Framer, _ uint32) { closeAfter(c) }, "unexpected_eof|connection_reset", 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := h2Frames(t, tc.events, tc.end)
			res := do(t, h2cClient(t, base, nil), hostileRequest("hi", 8))
			if want := strings.Split(tc.errType, "|"); res.Outcome != OutcomeStreamError || !slices.Contains(want, res.ErrorType) {
				t.Fatalf("outcome %s/%s (%q), want stream_error/%s", res.Outcome, res.ErrorType, res.Error, tc.errType)
			}
			checkTimingInvariants(t, res)
			if res.Chunks != tc.chunks || !res.FirstToken {
				t.Errorf("%d chunks (first token %v), want %d", res.Chunks, res.FirstToken, tc.chunks)
			}
			t.Log(res.Error)
		})
	}
	t.Run("rst_stream before the response", func(t *testing.T) {
		srv := h2test.ResetEveryStream(t, http2.ErrCodeInternal, false)
		res := do(t, h2cClient(t, srv.URL, nil), hostileRequest("hi", 8))
		expectOutcome(t, res, OutcomeStreamError, ErrorTypeStreamReset)
		if res.FirstToken {
			t.Error("a token from a reset stream")
		}
	})
}

// TestH2OpensConnectionsPastMaxConcurrentStreams: a server that allows
// 6 streams a connection (SETTINGS_MAX_CONCURRENT_STREAMS) gets 12
// concurrent streams over at least 2 connections, each stream whole;
// the pool's size is what the client counted. The 12 go out at once,
// before the server's SETTINGS reached the client (which assumes 100
// streams until then): the server refuses those past its 6
// (REFUSED_STREAM), and the client's one re-send of each goes on a new
// connection, whole, counted.
func TestH2OpensConnectionsPastMaxConcurrentStreams(t *testing.T) {
	const streams, perConn = 12, 6
	var arrived sync.WaitGroup
	arrived.Add(streams)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, sseBody(chatContent("first ")))
		w.(http.Flusher).Flush()
		arrived.Done()
		select { // every stream is open at once, or none ends well
		case <-all:
		case <-time.After(15 * time.Second):
			return
		}
		_, _ = io.WriteString(w, sseBody(chatDelta("content", "last", "stop", ""), "[DONE]"))
	})
	base, _, served := h2cServer(t, h, &http.HTTP2Config{MaxConcurrentStreams: perConn})
	conns := &httpclient.Conns{}
	c := h2cClient(t, base, conns)
	results := make([]*Result, streams)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = do(t, c, hostileRequest("hi", 8))
		}()
	}
	wg.Wait()
	retries := 0
	for i, res := range results {
		if res.Outcome != OutcomeSuccess || res.Chunks != 2 || res.Proto != "HTTP/2.0" || res.Retries > 1 {
			t.Errorf("stream %d: %s/%s %q, %d chunks over %s after %d retries", i, res.Outcome, res.ErrorType, res.Error, res.Chunks, res.Proto, res.Retries)
		}
		retries += res.Retries
	}
	if retries > streams-perConn {
		t.Errorf("%d re-sends, more than the %d streams past the first connection's", retries, streams-perConn)
	}
	open := conns.Open()
	if open < streams/perConn {
		t.Errorf("%d connections open, want at least %d", open, streams/perConn)
	}
	// Connections the transport dialed and did not need are closed; the
	// server sees the same pool once its side of the closes ran.
	deadline := time.Now().Add(10 * time.Second)
	for served.Load() != conns.Open() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if served.Load() != conns.Open() {
		t.Errorf("the client counts %d connections open, the server %d", conns.Open(), served.Load())
	}
	t.Logf("%d streams over %d connections, %d re-sent", streams, open, retries)
}

func quietLog() *log.Logger { return log.New(io.Discard, "", 0) }

// TestH2CClientMatchesSimulatorTiming is TestClientMatchesSimulatorTiming
// over h2c: the first token and the last are where the simulator's
// request log says it sent them, the median inter-token gap is its mean
// step, and the log says the request came over HTTP/2.
func TestH2CClientMatchesSimulatorTiming(t *testing.T) {
	const step = 30 * time.Millisecond
	def := sim.DefaultConfig()
	srv := startRecordedSim(t, func(cfg *sim.Config) {
		cfg.PrefillBase, cfg.PrefillPerToken = def.PrefillBase, def.PrefillPerToken
		cfg.DecodeBase, cfg.DecodePerSeq = step, 0
	})
	req := simRequest(APIChat, 12)
	req.ExtraBody = map[string]any{"stream_options": map[string]any{"include_usage": true, "continuous_usage_stats": true}}
	// As TestClientMatchesSimulatorTiming: a slack under four steps
	// still tells a token stamped at the wrong event.
	m := doTimed(t, simtest.WatchLateness(t), h2cClient(t, srv.Base, nil), req, 4*step)
	res := m.res
	expectOutcome(t, res, OutcomeSuccess, "")
	checkTimingInvariants(t, res)
	if len(res.ITLs) != 11 || res.Proto != "HTTP/2.0" {
		t.Fatalf("%d ITLs for 12 tokens over %q", len(res.ITLs), res.Proto)
	}
	e := srv.Entry(t, res.ResponseID)
	if e.Proto != "HTTP/2.0" {
		t.Errorf("the simulator logged the request over %q", e.Proto)
	}
	if err := simtest.Check(clientTiming(res), e, m.slack); err != nil {
		t.Error(err)
	}
	sorted := slices.Clone(res.ITLs)
	slices.Sort(sorted)
	med, tpot := sorted[len(sorted)/2], simtest.Seconds(*e.TPOTSeconds)
	if d := med - tpot; d < -(m.slack.Early+m.slack.Late) || d > m.slack.Early+m.slack.Late {
		t.Errorf("median ITL %v, the simulator's mean step %v (slack %v)", med, tpot, m.slack)
	}
	t.Logf("median ITL %v over h2c (server step %v), slack %v", med, tpot, m.slack)
}
