// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package dnstest is a DNS server for tests: the answers of a headless
// Service or of SRV records, changed by the test, on a loopback port
// that a resolver is pointed at (discovery's dns.server). It imports no
// llmprobe package.
package dnstest

import (
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// Server is an authoritative DNS server on 127.0.0.1, over UDP and TCP on
// one port, whose answers the test changes: A and AAAA records by name,
// SRV records, SERVFAIL for every question while SetServfail(true), and
// answers cut short (that no resolver can parse) while SetMalformed(true).
// A name it has no records for is NXDOMAIN. An answer larger than a UDP
// response may be (512 bytes, or the size the question's EDNS0 record
// offers) goes over UDP truncated (TC, no records), and whole over TCP,
// where the resolver asks again.
type Server struct {
	Addr string // host:port of the server, for a resolver to dial
	conn net.PacketConn
	ln   net.Listener

	mu        sync.Mutex
	a         map[string][]netip.Addr // A and AAAA, by FQDN (with the dot)
	srv       map[string][]dnsmessage.SRVResource
	servfail  bool
	malformed bool
	queries   int
}

// Start serves on a free port of 127.0.0.1 (UDP and TCP) until the test
// ends.
func Start(t testing.TB) *Server {
	t.Helper()
	var (
		conn net.PacketConn
		ln   net.Listener
		err  error
	)
	for range 10 {
		if conn, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if ln, err = net.Listen("tcp", conn.LocalAddr().String()); err == nil {
			break
		}
		conn.Close() // the port is taken for TCP: another
	}
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: conn.LocalAddr().String(), conn: conn, ln: ln, a: map[string][]netip.Addr{}, srv: map[string][]dnsmessage.SRVResource{}}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		s.serve()
	}()
	go func() {
		defer wg.Done()
		s.serveTCP(&wg)
	}()
	t.Cleanup(func() {
		conn.Close()
		ln.Close()
		wg.Wait()
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
		if resp, ok := s.answer(buf[:n], true); ok {
			s.conn.WriteTo(resp, from)
		}
	}
}

// serveTCP answers every connection's questions (each message after its
// 2-byte length) until the listener closes; wg counts the connections.
func (s *Server) serveTCP(wg *sync.WaitGroup) {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			for {
				c.SetDeadline(time.Now().Add(10 * time.Second))
				var l [2]byte
				if _, err := io.ReadFull(c, l[:]); err != nil {
					return
				}
				req := make([]byte, binary.BigEndian.Uint16(l[:]))
				if _, err := io.ReadFull(c, req); err != nil {
					return
				}
				resp, ok := s.answer(req, false)
				if !ok {
					return
				}
				if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(resp))), resp...)); err != nil {
					return
				}
			}
		}()
	}
}

// answer is the response to req; over UDP, one larger than the question
// offers is truncated.
func (s *Server) answer(req []byte, udp bool) ([]byte, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(req)
	if err != nil {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	limit := 512
	if p.SkipAllQuestions() == nil && p.SkipAllAnswers() == nil && p.SkipAllAuthorities() == nil {
		for {
			ah, err := p.AdditionalHeader()
			if err != nil {
				break
			}
			if ah.Type == dnsmessage.TypeOPT {
				limit = max(limit, int(ah.Class)) // EDNS0: the UDP size the resolver takes
			}
			if p.SkipAdditional() != nil {
				break
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queries++
	out, ok := s.response(h, q, false)
	if ok && udp && len(out) > limit {
		out, ok = s.response(h, q, true)
	}
	return out, ok
}

// response is the response to question q of header h: with its records,
// or truncated (TC, the question only). s.mu is held.
func (s *Server) response(h dnsmessage.Header, q dnsmessage.Question, truncated bool) ([]byte, bool) {
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RCode: dnsmessage.RCodeSuccess, Truncated: truncated}
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
	if rh.RCode == dnsmessage.RCodeSuccess && !s.malformed && !truncated {
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
