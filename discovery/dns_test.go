// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package discovery

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"golang.org/x/net/dns/dnsmessage"

	"github.com/llmprobe/llmprobe/config"
)

// dnsServer is an authoritative DNS server over UDP on 127.0.0.1 whose
// answers the test changes.
type dnsServer struct {
	addr string
	conn net.PacketConn

	mu       sync.Mutex
	a        map[string][]netip.Addr // A and AAAA, by FQDN (with the dot)
	srv      map[string][]dnsmessage.SRVResource
	servfail bool
	queries  int
}

func newDNSServer(t *testing.T) *dnsServer {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &dnsServer{addr: conn.LocalAddr().String(), conn: conn, a: map[string][]netip.Addr{}, srv: map[string][]dnsmessage.SRVResource{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.serve()
	}()
	t.Cleanup(func() {
		conn.Close()
		<-done
	})
	return s
}

func (s *dnsServer) setA(name string, addrs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.a[name] = nil
	for _, a := range addrs {
		s.a[name] = append(s.a[name], netip.MustParseAddr(a))
	}
}

func (s *dnsServer) setSRV(name string, records ...dnsmessage.SRVResource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.srv[name] = records
}

func (s *dnsServer) setServfail(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.servfail = on
}

func (s *dnsServer) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if resp, ok := s.answer(buf[:n]); ok {
			s.conn.WriteTo(resp, from)
		}
	}
}

func (s *dnsServer) answer(req []byte) ([]byte, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(req)
	if err != nil {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queries++
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RCode: dnsmessage.RCodeSuccess}
	name := strings.ToLower(q.Name.String())
	_, knownA := s.a[name]
	_, knownSRV := s.srv[name]
	switch {
	case s.servfail:
		rh.RCode = dnsmessage.RCodeServerFailure
	case !knownA && !knownSRV:
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	b.StartQuestions()
	b.Question(q)
	b.StartAnswers()
	if rh.RCode == dnsmessage.RCodeSuccess {
		rrh := dnsmessage.ResourceHeader{Name: q.Name, Type: q.Type, Class: dnsmessage.ClassINET, TTL: 1}
		switch q.Type {
		case dnsmessage.TypeA:
			for _, a := range s.a[name] {
				if a.Is4() {
					b.AResource(rrh, dnsmessage.AResource{A: a.As4()})
				}
			}
		case dnsmessage.TypeAAAA:
			for _, a := range s.a[name] {
				if a.Is6() {
					b.AAAAResource(rrh, dnsmessage.AAAAResource{AAAA: a.As16()})
				}
			}
		case dnsmessage.TypeSRV:
			for _, r := range s.srv[name] {
				b.SRVResource(rrh, r)
			}
		}
	}
	out, err := b.Finish()
	return out, err == nil
}

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
	s := newDNSServer(t)
	s.setA("pool.test.", "127.0.0.3", "127.0.0.1", "127.0.0.2")
	d, err := New(&config.Discovery{DNS: &config.DNSSD{
		Names: []string{"pool.test.", "absent.test."}, Type: "A", Port: 8000, // absent: NXDOMAIN, no replicas
		RefreshInterval: model.Duration(100 * time.Millisecond), Server: s.addr,
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
	s.setA("pool.test.", "127.0.0.1", "127.0.0.2", "127.0.0.4")
	seenWithin(t, ch, 2, "127.0.0.1:8000,127.0.0.2:8000,127.0.0.4:8000")

	// SERVFAIL: an error update, never an empty set; the set is back once
	// the server answers.
	s.setServfail(true)
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
	s.setServfail(false)
	seenWithin(t, ch, 2, "127.0.0.1:8000,127.0.0.2:8000,127.0.0.4:8000")

	// An answer without records is an empty set (not an error).
	s.setA("pool.test.")
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
	s := newDNSServer(t)
	s.setA("pool6.test.", "::1", "127.0.0.1")
	d, err := New(&config.Discovery{DNS: &config.DNSSD{
		Names: []string{"pool6.test."}, Type: "AAAA", Port: 8000,
		RefreshInterval: model.Duration(time.Hour), Server: s.addr,
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
	s := newDNSServer(t)
	srv := func(target string, port uint16) dnsmessage.SRVResource {
		return dnsmessage.SRVResource{Priority: 10, Weight: 10, Port: port, Target: dnsmessage.MustNewName(target)}
	}
	s.setA("r1.test.", "127.0.0.1")
	s.setA("r2.test.", "127.0.0.2", "::1") // dual-stack: one replica
	s.setA("r3.test.", "127.0.0.3")
	s.setSRV("_http._tcp.pool.test.", srv("r1.test.", 8001), srv("r2.test.", 8002))
	d, err := New(&config.Discovery{DNS: &config.DNSSD{
		Names: []string{"_http._tcp.pool.test."}, Type: "SRV",
		RefreshInterval: model.Duration(100 * time.Millisecond), Server: s.addr,
	}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ch := updates(t, d)
	u := next(t, ch)
	if u.Err != nil || names(u.Replicas) != "127.0.0.1:8001,127.0.0.2:8002" {
		t.Fatalf("first update = %+v", u)
	}
	s.setSRV("_http._tcp.pool.test.", srv("r2.test.", 8002), srv("r3.test.", 9000))
	seenWithin(t, ch, 2, "127.0.0.2:8002,127.0.0.3:9000")

	// A target that does not resolve fails the refresh.
	s.setSRV("_http._tcp.pool.test.", srv("r2.test.", 8002), srv("gone.test.", 9000))
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
