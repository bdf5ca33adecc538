// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package discovery

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"golang.org/x/net/dns/dnsmessage"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/dnstest"
)

// updates runs d and returns its updates; the run ends with the test.
func updates(t *testing.T, d Discoverer) <-chan Update {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan Update)
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx, ch)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return ch
}

// next is the next update, failing the test after a generous bound (a
// hung discoverer, not a slow one).
func next(t *testing.T, ch <-chan Update) Update {
	t.Helper()
	select {
	case u := <-ch:
		return u
	case <-time.After(30 * time.Second):
		t.Fatal("no update within 30s")
		return Update{}
	}
}

func names(rs []Replica) string {
	var ns []string
	for _, r := range rs {
		ns = append(ns, r.Name)
	}
	return strings.Join(ns, ",")
}

func TestDNSA(t *testing.T) {
	s := dnstest.Start(t)
	s.SetA("pool.test.", "127.0.0.3", "127.0.0.1", "127.0.0.2")
	d, err := New(&config.Discovery{DNS: &config.DNSSD{
		Names: []string{"pool.test.", "absent.test."}, Type: "A", Port: 8000, // absent: NXDOMAIN, no replicas
		RefreshInterval: model.Duration(100 * time.Millisecond), Server: s.Addr,
	}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Mechanism() != "dns" {
		t.Errorf("mechanism %q", d.Mechanism())
	}
	ch := updates(t, d)
	u := next(t, ch)
	if u.Err != nil || names(u.Replicas) != "127.0.0.1:8000,127.0.0.2:8000,127.0.0.3:8000" {
		t.Fatalf("first update = %+v", u)
	}
	if r := u.Replicas[0]; r.Address != r.Name || r.Labels != nil {
		t.Errorf("replica = %+v, want address = name and no labels", r)
	}

	// A replica added and one removed: the next refresh that starts after
	// the change sees it (the one in flight may not).
	s.SetA("pool.test.", "127.0.0.1", "127.0.0.2", "127.0.0.4")
	seenWithin(t, ch, 2, "127.0.0.1:8000,127.0.0.2:8000,127.0.0.4:8000")

	// SERVFAIL: an error update, never an empty set; the set is back once
	// the server answers.
	s.SetServfail(true)
	for i := 0; ; i++ {
		u := next(t, ch)
		if u.Err != nil {
			if u.Replicas != nil {
				t.Errorf("failed refresh carries replicas %v", u.Replicas)
			}
			if !strings.Contains(u.Err.Error(), "pool.test") {
				t.Errorf("error %q does not name the name", u.Err)
			}
			var de *net.DNSError
			if !errors.As(u.Err, &de) {
				t.Errorf("error %v is no *net.DNSError", u.Err)
			}
			break
		}
		if i >= 1 {
			t.Fatalf("no error update after SERVFAIL: %+v", u)
		}
	}
	s.SetServfail(false)
	seenWithin(t, ch, 2, "127.0.0.1:8000,127.0.0.2:8000,127.0.0.4:8000")

	// An answer without records is an empty set (not an error).
	s.SetA("pool.test.")
	seenWithin(t, ch, 2, "")
}

// seenWithin receives at most n updates and fails unless one has the set
// want (and none of them is an error).
func seenWithin(t *testing.T, ch <-chan Update, n int, want string) {
	t.Helper()
	var got []string
	for range n {
		u := next(t, ch)
		if u.Err != nil {
			t.Fatalf("unexpected error update: %v", u.Err)
		}
		if u.Replicas == nil {
			t.Fatal("a successful update with a nil set")
		}
		if names(u.Replicas) == want {
			return
		}
		got = append(got, names(u.Replicas))
	}
	t.Fatalf("not seen within %d updates: %q; got %q", n, want, got)
}

func TestDNSAAAA(t *testing.T) {
	s := dnstest.Start(t)
	s.SetA("pool6.test.", "::1", "127.0.0.1")
	d, err := New(&config.Discovery{DNS: &config.DNSSD{
		Names: []string{"pool6.test."}, Type: "AAAA", Port: 8000,
		RefreshInterval: model.Duration(time.Hour), Server: s.Addr,
	}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	u := next(t, updates(t, d))
	if u.Err != nil || names(u.Replicas) != "[::1]:8000" || u.Replicas[0].Address != "[::1]:8000" {
		t.Fatalf("update = %+v, want only [::1]:8000 (AAAA records)", u)
	}
}

func TestDNSSRV(t *testing.T) {
	s := dnstest.Start(t)
	srv := func(target string, port uint16) dnsmessage.SRVResource {
		return dnsmessage.SRVResource{Priority: 10, Weight: 10, Port: port, Target: dnsmessage.MustNewName(target)}
	}
	s.SetA("r1.test.", "127.0.0.1")
	s.SetA("r2.test.", "127.0.0.2", "::1") // dual-stack: one replica
	s.SetA("r3.test.", "127.0.0.3")
	s.SetSRV("_http._tcp.pool.test.", srv("r1.test.", 8001), srv("r2.test.", 8002))
	d, err := New(&config.Discovery{DNS: &config.DNSSD{
		Names: []string{"_http._tcp.pool.test."}, Type: "SRV",
		RefreshInterval: model.Duration(100 * time.Millisecond), Server: s.Addr,
	}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ch := updates(t, d)
	u := next(t, ch)
	if u.Err != nil || names(u.Replicas) != "127.0.0.1:8001,127.0.0.2:8002" {
		t.Fatalf("first update = %+v", u)
	}
	s.SetSRV("_http._tcp.pool.test.", srv("r2.test.", 8002), srv("r3.test.", 9000))
	seenWithin(t, ch, 2, "127.0.0.2:8002,127.0.0.3:9000")

	// A target that does not resolve fails the refresh.
	s.SetSRV("_http._tcp.pool.test.", srv("r2.test.", 8002), srv("gone.test.", 9000))
	for i := 0; ; i++ {
		u := next(t, ch)
		if u.Err != nil {
			if !strings.Contains(u.Err.Error(), "gone.test") {
				t.Errorf("error %q does not name the target", u.Err)
			}
			break
		}
		if i >= 1 {
			t.Fatalf("no error for an unresolvable SRV target: %+v", u)
		}
	}
}

func TestDNSNewRefuses(t *testing.T) {
	for _, c := range []*config.DNSSD{
		{Type: "A", Port: 80},
		{Names: []string{"a.test."}, Type: "A"},
		{Names: []string{"a.test."}, Type: "MX", Port: 80},
	} {
		if _, err := New(&config.Discovery{DNS: c}, Options{}); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

// TestDNSMalformedAnswerNamesServer: an answer of the configured server
// that cannot be parsed fails the refresh with an error that names that
// server, never the system's resolver (resolv.conf), for A records, SRV
// records and an SRV record's target.
func TestDNSMalformedAnswerNamesServer(t *testing.T) {
	s := dnstest.Start(t)
	s.SetA("pool.test.", "127.0.0.1")
	s.SetA("r1.test.", "127.0.0.1")
	s.SetSRV("_http._tcp.pool.test.", dnsmessage.SRVResource{Port: 8001, Target: dnsmessage.MustNewName("r1.test.")})
	s.SetMalformed(true)
	for _, c := range []struct {
		typ, name string
		port      int
	}{{"A", "pool.test.", 8000}, {"SRV", "_http._tcp.pool.test.", 0}} {
		d, err := New(&config.Discovery{DNS: &config.DNSSD{
			Names: []string{c.name}, Type: c.typ, Port: c.port,
			RefreshInterval: model.Duration(time.Hour), Server: s.Addr,
		}}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		u := next(t, updates(t, d))
		if u.Err == nil {
			t.Fatalf("%s: a malformed answer gave %+v, want an error", c.typ, u)
		}
		msg := u.Err.Error()
		if !strings.Contains(msg, "on "+s.Addr+":") || !strings.Contains(msg, c.name) || !strings.Contains(msg, "cannot unmarshal") {
			t.Errorf("%s: error %q, want the name, the configured server %s and what is wrong", c.typ, msg, s.Addr)
		}
	}
}
