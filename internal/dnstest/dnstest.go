// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package dnstest is a DNS server for tests: the answers of a headless
// Service or of SRV records, changed by the test, on a loopback port
// that a resolver is pointed at (discovery's dns.server). It imports no
// llmprobe package.
package dnstest

import (
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// Server is an authoritative DNS server over UDP on 127.0.0.1 whose
// answers the test changes: A and AAAA records by name, SRV records,
// SERVFAIL for every question while SetServfail(true), and answers cut
// short (that no resolver can parse) while SetMalformed(true). A name it
// has no records for is NXDOMAIN.
type Server struct {
	Addr string // host:port of the server, for a resolver to dial
	conn net.PacketConn

	mu        sync.Mutex
	a         map[string][]netip.Addr // A and AAAA, by FQDN (with the dot)
	srv       map[string][]dnsmessage.SRVResource
	servfail  bool
	malformed bool
	queries   int
}

// Start serves on a free UDP port of 127.0.0.1 until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: conn.LocalAddr().String(), conn: conn, a: map[string][]netip.Addr{}, srv: map[string][]dnsmessage.SRVResource{}}
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

// SetA sets the A and AAAA records of name (a fully qualified name with
// its final dot) to addrs.
func (s *Server) SetA(name string, addrs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.a[name] = nil
	for _, a := range addrs {
		s.a[name] = append(s.a[name], netip.MustParseAddr(a))
	}
}

// SetSRV sets the SRV records of name.
func (s *Server) SetSRV(name string, records ...dnsmessage.SRVResource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.srv[name] = records
}

// SetServfail makes every answer SERVFAIL while on.
func (s *Server) SetServfail(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.servfail = on
}

// SetMalformed cuts every answer short while on: its header and question
// parse, and it claims a record it does not hold.
func (s *Server) SetMalformed(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.malformed = on
}

func (s *Server) serve() {
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

func (s *Server) answer(req []byte) ([]byte, bool) {
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
	if rh.RCode == dnsmessage.RCodeSuccess && !s.malformed {
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
	if err != nil {
		return nil, false
	}
	if s.malformed {
		out[7] = 1 // ANCOUNT: one record, and none follows
	}
	return out, true
}

// Queries is how many questions the server was asked.
func (s *Server) Queries() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries
}
