// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"crypto/tls"
	"net"
	"net/http/httptrace"
	"sync"
	"time"

	"github.com/llmprobe/llmprobe/internal/httpclient"
)

// connTrace records the httptrace hooks of one request. Dial hooks run on
// the transport's dial goroutines, possibly for a dial that loses to an idle
// connection and finishes after the request, hence the mutex.
type connTrace struct {
	mu           sync.Mutex
	gotConn      bool
	conn         net.Conn  // the last connection handed over
	conns        int       // GotConn calls: more than one when the transport retried
	auth         [2]string // the Authorization and Proxy-Authorization values written
	reused       bool
	firstByte    bool // a byte of the response arrived (GotFirstResponseByte)
	gotConnAt    time.Time
	dnsStart     time.Time
	connectStart time.Time
	tlsStart     time.Time
	dns          time.Duration
	connect      time.Duration
	tls          time.Duration
	tlsFailed    bool
	hooks        httptrace.ClientTrace
}

func newConnTrace() *connTrace {
	t := &connTrace{}
	t.hooks = httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			now := time.Now()
			t.mu.Lock()
			t.gotConn, t.reused, t.gotConnAt, t.conn = true, info.Reused, now, info.Conn
			t.conns++
			t.mu.Unlock()
		},
		GotFirstResponseByte: func() {
			t.mu.Lock()
			t.firstByte = true
			t.mu.Unlock()
		},
		WroteHeaderField: func(key string, values []string) {
			if i := authHeader(key); i >= 0 && len(values) > 0 {
				t.mu.Lock()
				t.auth[i] = values[0]
				t.mu.Unlock()
			}
		},
		DNSStart: func(httptrace.DNSStartInfo) {
			now := time.Now()
			t.mu.Lock()
			t.dnsStart = now
			t.mu.Unlock()
		},
		DNSDone: func(httptrace.DNSDoneInfo) {
			now := time.Now()
			t.mu.Lock()
			if !t.dnsStart.IsZero() {
				t.dns = now.Sub(t.dnsStart)
			}
			t.mu.Unlock()
		},
		ConnectStart: func(string, string) {
			now := time.Now()
			t.mu.Lock()
			if t.connectStart.IsZero() {
				t.connectStart = now
			}
			t.mu.Unlock()
		},
		ConnectDone: func(_, _ string, err error) {
			now := time.Now()
			t.mu.Lock()
			if err == nil && !t.connectStart.IsZero() {
				t.connect = now.Sub(t.connectStart)
			}
			t.mu.Unlock()
		},
		TLSHandshakeStart: func() {
			now := time.Now()
			t.mu.Lock()
			t.tlsStart = now
			t.mu.Unlock()
		},
		TLSHandshakeDone: func(_ tls.ConnectionState, err error) {
			now := time.Now()
			t.mu.Lock()
			if err != nil {
				t.tlsFailed = true
			} else if !t.tlsStart.IsZero() {
				t.tls = now.Sub(t.tlsStart)
			}
			t.mu.Unlock()
		},
	}
	return t
}

// apply copies the connection figures into res: Start is the last GotConn.
func (t *connTrace) apply(res *Result) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.gotConn {
		return
	}
	res.Start = t.gotConnAt
	res.ClientWait = t.gotConnAt.Sub(res.Dispatched)
	res.ConnReused = t.reused
	if !t.reused {
		res.DNS, res.Connect, res.TLS = t.dns, t.connect, t.tls
	}
}

// sentAuth returns the Authorization and Proxy-Authorization values the
// request carried (an OAuth2 token is known only then).
func (t *connTrace) sentAuth() [2]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.auth
}

// transportRetries is how many times the transport itself sent the
// request again (on another connection): with no GetBody (noRewind) only
// one it had not begun to send, as for an HTTP/2 connection that turned
// out unusable when the request came to it.
func (t *connTrace) transportRetries() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return max(t.conns-1, 0)
}

// serverSpoke is httpclient.SpokeFirst of the connection handed over.
func (t *connTrace) serverSpoke() (known, http1 bool) {
	t.mu.Lock()
	conn := t.conn
	t.mu.Unlock()
	if conn == nil {
		return false, false
	}
	return httpclient.SpokeFirst(conn)
}

func (t *connTrace) reusedConn() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reused
}

func (t *connTrace) gotResponseByte() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.firstByte
}

func (t *connTrace) state() (gotConn, tlsFailed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.gotConn, t.tlsFailed
}
