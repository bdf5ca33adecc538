// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import "sync/atomic"

// The answer budget: a process-wide bound on the memory that in-flight
// non-streamed answers (embeddings) may hold. Before a request that gets
// one is sent, it reserves the most its answer's window can grow to
// (answerReservation); it releases that when the request ends. A request
// the budget cannot take is not sent: it is dropped with reason
// "memory_budget", like an arrival over max_inflight, so that the
// probe's memory stays bounded whatever the servers answer (and the
// server is not blamed for it). Streams need no reservation: what one
// holds is bounded per request (docs/design.md, "Memory").

// DefaultAnswerBudget is the answer budget unless SetAnswerBudget
// changes it: about 450 concurrent embeddings requests of unknown
// dimensions, or 1,900 of 1024 dimensions.
const DefaultAnswerBudget = 256 << 20

// byteBudget is a counting semaphore of bytes that never waits.
type byteBudget struct {
	limit atomic.Int64
	used  atomic.Int64
}

// reserve takes n bytes, or reports false when fewer are left.
func (b *byteBudget) reserve(n int64) bool {
	for {
		used := b.used.Load()
		if used+n > b.limit.Load() {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

func (b *byteBudget) release(n int64) { b.used.Add(-n) }

var answerBudget = func() *byteBudget {
	b := &byteBudget{}
	b.limit.Store(DefaultAnswerBudget)
	return b
}()

// SetAnswerBudget sets the answer budget, in bytes (the binary sets a
// share of its memory limit). Requests already holding a reservation keep
// it.
func SetAnswerBudget(n int64) { answerBudget.limit.Store(max(n, 0)) }

// AnswerBudget returns the answer budget and how much of it is reserved.
func AnswerBudget() (limit, used int64) {
	return answerBudget.limit.Load(), answerBudget.used.Load()
}
