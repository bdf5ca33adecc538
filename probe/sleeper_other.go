// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package probe

import (
	"context"
	"time"
)

// sleeper waits until an instant with a runtime timer (see
// sleeper_linux.go for the precise Linux version).
type sleeper struct{ timer *time.Timer }

func newSleeper(context.Context) *sleeper {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &sleeper{timer: t}
}

// until blocks until t or until ctx is done; it reports whether t came.
func (s *sleeper) until(ctx context.Context, t time.Time) bool {
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

func (s *sleeper) close() { s.timer.Stop() }
