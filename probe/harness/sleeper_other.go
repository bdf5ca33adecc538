// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package harness

import (
	"context"
	"time"
)

// Sleeper waits until an instant with a runtime timer (see
// sleeper_linux.go for the precise Linux version).
type Sleeper struct{ timer *time.Timer }

func NewSleeper(context.Context) *Sleeper {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &Sleeper{timer: t}
}

// until blocks until t or until ctx is done; it reports whether t came.
func (s *Sleeper) Until(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	s.timer.Reset(d)
	select {
	case <-ctx.Done():
		s.timer.Stop()
		return false
	case <-s.timer.C:
		return true
	}
}

func (s *Sleeper) Close() { s.timer.Stop() }
