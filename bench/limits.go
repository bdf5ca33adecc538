// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"sync"
	"sync/atomic"
)

// collectorLimits are a collector's request bound (Options.MaxRequests)
// and the percentiles it reports (Options.Percentiles).
type collectorLimits struct {
	maxRequests int64
	// reached counts the targets that were sent maxRequests; done closes
	// (reached, on the collector) when all were.
	reached atomic.Int64
	done    chan struct{}
	once    sync.Once
	ps      []float64 // percent
}

// setLimits takes the bounds of opts; reached never closes without
// MaxRequests.
func (c *collector) setLimits(opts Options) {
	c.limits.maxRequests = int64(opts.MaxRequests)
	c.limits.ps = opts.Percentiles
	c.limits.done = make(chan struct{})
	c.reached = c.limits.done
}

// sent notes that a target was sent its n-th request.
func (l *collectorLimits) sent(n int64, targets int) {
	if l.maxRequests > 0 && n == l.maxRequests && l.reached.Add(1) == int64(targets) {
		l.once.Do(func() { close(l.done) })
	}
}
