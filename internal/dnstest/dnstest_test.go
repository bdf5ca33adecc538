// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package dnstest

import (
	"context"
	"net"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// TestLargeAnswer: an answer larger than a UDP response may be (64 SRV
// records) is sent truncated over UDP and whole over TCP, as a real
// server does, so Go's resolver gets every record.
func TestLargeAnswer(t *testing.T) {
	s := Start(t)
	var recs []dnsmessage.SRVResource
	for i := range 64 {
		recs = append(recs, dnsmessage.SRVResource{Port: uint16(20000 + i), Target: dnsmessage.MustNewName("replica.test.")})
	}
	s.SetSRV("_llm._tcp.pool.test.", recs...)
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, s.Addr)
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, srvs, err := r.LookupSRV(ctx, "", "", "_llm._tcp.pool.test.")
	if err != nil || len(srvs) != 64 {
		t.Fatalf("LookupSRV: %d records, %v; want 64", len(srvs), err)
	}
}
