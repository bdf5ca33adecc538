// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package promtest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// ReplaySeparator splits a fuzz input into the answers of a Replay.
const ReplaySeparator = "\x00"

// Replay is a Prometheus HTTP API without a network, for fuzz targets: it
// answers the i-th request with the i-th ReplaySeparator-separated part of
// a fuzz input (cycling), as application/json. With Statuses, a part that
// starts with "!" and three digits is answered with that status and the
// rest of the part. A client that sends more than 64 requests gets an
// error: no fit or refit needs that many queries.
type Replay struct {
	Statuses bool

	mu    sync.Mutex
	parts [][]byte
	n     int
}

// NewReplay splits data into the answers.
func NewReplay(data []byte, statuses bool) *Replay {
	return &Replay{Statuses: statuses, parts: bytes.Split(data, []byte(ReplaySeparator))}
}

// RoundTrip implements http.RoundTripper.
func (p *Replay) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	p.mu.Lock()
	part := p.parts[p.n%len(p.parts)]
	p.n++
	n := p.n
	p.mu.Unlock()
	if n > 64 {
		return nil, fmt.Errorf("request %d: no fit or refit needs so many queries", n)
	}
	status := http.StatusOK
	if p.Statuses && len(part) >= 4 && part[0] == '!' {
		var s int
		if _, err := fmt.Sscanf(string(part[1:4]), "%03d", &s); err == nil && s >= 100 && s <= 999 {
			status, part = s, part[4:]
		}
	}
	return &http.Response{
		StatusCode:    status,
		Status:        fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(part)),
		ContentLength: int64(len(part)),
		Request:       r,
	}, nil
}
