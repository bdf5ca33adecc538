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

// NewSleeper returns a Sleeper; ctx is the linux version's (its waits
// end when ctx is done, as Until's do here).
func NewSleeper(context.Context) *Sleeper { return &Sleeper{timer: stoppedTimer()} }

func (s *Sleeper) wait(ctx context.Context, d time.Duration) bool { return s.waitTimer(ctx, d) }

// Close stops the sleeper's timer.
func (s *Sleeper) Close() { s.timer.Stop() }
