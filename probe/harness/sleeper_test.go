// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"slices"
	"testing"
	"time"
)

func TestSleeperWaitsUntilTheInstant(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := NewSleeper(ctx)
	defer s.Close()
	var late []time.Duration
	for range 50 {
		at := time.Now().Add(300 * time.Microsecond)
		if !s.Until(ctx, at) {
			t.Fatal("until returned false without cancellation")
		}
		d := time.Since(at)
		if d < 0 {
			t.Fatalf("woke %v early", -d)
		}
		late = append(late, d)
	}
	// A past instant returns at once.
	if !s.Until(ctx, time.Now().Add(-time.Second)) {
		t.Fatal("a past instant should not wait")
	}
	slices.Sort(late)
	t.Logf("wake-up lateness over 50 sleeps of 300µs: median %v, max %v", late[len(late)/2], late[len(late)-1])
}

func TestSleeperCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s := NewSleeper(ctx)
	defer s.Close()
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	if s.Until(ctx, time.Now().Add(time.Hour)) {
		t.Fatal("until reported the instant after cancellation")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("cancellation took %v", d)
	}
	if s.Until(ctx, time.Now().Add(time.Hour)) {
		t.Fatal("a cancelled sleeper must not wait again")
	}
}
