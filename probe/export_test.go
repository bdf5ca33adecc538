// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import "time"

// SetArrivalHook sets e's arrival hook (runner.arrivalHook) for the
// package's external tests: it runs in each runner's arrival loop when an
// arrival's planned instant has come, before it is admitted. Set it before
// the first Apply.
func SetArrivalHook(e *Engine, f func(planned time.Time)) { e.arrivalHook = f }

// SetLogTiming sets e's failing window and the interval of its repeated
// log lines (Engine.failWindow, Engine.logEvery) for the package's
// external tests, which scale them down. Set them before the first Apply.
func SetLogTiming(e *Engine, failWindow, every time.Duration) {
	e.failWindow, e.logEvery = failWindow, every
}

// SetVerdictEvery sets how often the readers started from now on ask
// their judges for a verdict (VerdictEvery), until the test ends.
func SetVerdictEvery(t interface{ Cleanup(func()) }, d time.Duration) {
	old := verdictEvery.Swap(int64(d))
	t.Cleanup(func() { verdictEvery.Store(old) })
}
