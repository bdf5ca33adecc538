// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package simtest

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// Lateness watches how late this process' goroutines wake up: a goroutine
// sleeps latenessTick at a time and keeps the largest overrun, as the
// harness' heartbeat does (probe/harness/harness.go). A stream reader waiting on
// its socket is woken the same way, so the largest overrun while a
// request ran is how late the client may have stamped its events.
type Lateness struct {
	mu   sync.Mutex
	max  time.Duration
	quit chan struct{}
	done chan struct{}
}

const latenessTick = time.Millisecond

// WatchLateness starts a watch that stops when the test ends.
func WatchLateness(t testing.TB) *Lateness {
	l := &Lateness{quit: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	t.Cleanup(func() {
		close(l.quit)
		<-l.done
	})
	return l
}

func (l *Lateness) run() {
	defer close(l.done)
	timer := time.NewTimer(latenessTick)
	defer timer.Stop()
	for {
		start := time.Now()
		select {
		case <-l.quit:
			return
		case <-timer.C:
		}
		late := time.Since(start) - latenessTick
		l.mu.Lock()
		l.max = max(l.max, late)
		l.mu.Unlock()
		timer.Reset(latenessTick)
	}
}

// Reset forgets what was seen so far: call it before a measurement.
func (l *Lateness) Reset() {
	l.mu.Lock()
	l.max = 0
	l.mu.Unlock()
}

// Max is the largest overrun since the start or the last Reset.
func (l *Lateness) Max() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.max
}

// Slack is the slack of Check for what ran since the last Reset: a
// server's stamp may trail its write by one wake-up's lateness (Early),
// and a client's instant trails the server's by two loopback hops, each
// up to a wake-up's lateness, plus the client's own work on the event
// (a few milliseconds under the race detector: Late). Sampled lateness
// can miss the worst of a hop, hence Late's margin of one more.
func (l *Lateness) Slack() Slack {
	m := l.Max()
	return Slack{Early: time.Millisecond + m, Late: 5*time.Millisecond + 3*m}
}

// During runs f with the watch reset and returns the slack for what ran,
// and a reason not to trust the measurement when the slack's Late is
// above resolution, the finest difference the test's check must tell
// (for Retry): on a machine that busy a wrong instant could pass.
func (l *Lateness) During(resolution time.Duration, f func()) (Slack, string) {
	l.Reset()
	f()
	s := l.Slack()
	if s.Late > resolution {
		return s, fmt.Sprintf("goroutines woke up to %v late while it ran: a slack of %v cannot tell apart instants %v apart", l.Max(), s.Late, resolution)
	}
	return s, ""
}
