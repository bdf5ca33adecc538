// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"time"
)

// Until blocks until t or until ctx is done; it reports whether t came.
func (s *Sleeper) Until(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	return s.wait(ctx, d)
}

// waitTimer waits d on the runtime timer, or until ctx is done; it
// reports whether d passed.
func (s *Sleeper) waitTimer(ctx context.Context, d time.Duration) bool {
	s.timer.Reset(d)
	select {
	case <-ctx.Done():
		s.timer.Stop()
		return false
	case <-s.timer.C:
		return true
	}
}

// stoppedTimer is a runtime timer that has not started.
func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}
