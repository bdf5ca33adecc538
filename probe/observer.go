// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import "github.com/llmprobe/llmprobe/probe/wire"

// What the engine tells its observers (exporter.Metrics, exporter.Recent,
// bench's collector): every arrival, drop, send, result and conversation.

// DropReason says why a scheduled request was never sent. The values are
// the `reason` label of llmprobe_requests_dropped_total.
type DropReason string

const (
	DropInflightLimit DropReason = "inflight_limit" // max_inflight requests were already running
	DropLate          DropReason = "late"           // could not be sent within global.late_after of its planned instant
	DropShutdown      DropReason = "shutdown"       // planned, but the runner stopped (reload or exit) first
	DropMemoryBudget  DropReason = "memory_budget"  // its answer would not fit the process' answer budget (budget.go)
)

// DropReasons lists every drop reason, in a stable order.
var DropReasons = [...]DropReason{DropInflightLimit, DropLate, DropShutdown, DropMemoryBudget}

// ConversationOutcome says how a multi-turn conversation ended. The values
// are the `outcome` label of llmprobe_conversations_total.
type ConversationOutcome string

const (
	ConversationCompleted ConversationOutcome = "completed" // every turn succeeded
	ConversationFailed    ConversationOutcome = "failed"    // a turn ended with an outcome other than success
	ConversationDropped   ConversationOutcome = "dropped"   // a turn could not be sent (inflight_limit, late, shutdown)
)

// ConversationOutcomes lists every conversation outcome, in a stable order.
var ConversationOutcomes = [...]ConversationOutcome{ConversationCompleted, ConversationFailed, ConversationDropped}

// Observer receives the engine's events. Implementations must be safe for
// concurrent use and must not block: they run on the probe's hot path.
type Observer interface {
	// Scheduled is called for every arrival on a target's timeline.
	Scheduled(target, replica, class string)
	// Dropped is called for an arrival that was never sent.
	Dropped(target, replica, class string, reason DropReason)
	// Sent is called when a request is handed to the HTTP client; the
	// achieved rate is the rate of Sent calls.
	Sent(target, replica, class string)
	// Observe is called once per sent request, after it ended.
	Observe(r *wire.Result)
	// ConversationEnded is called once per multi-turn conversation.
	ConversationEnded(target, replica, class string, outcome ConversationOutcome)
}

// Observers fans events out to several observers, in order.
type Observers []Observer

// Scheduled implements Observer.
func (os Observers) Scheduled(target, replica, class string) {
	for _, o := range os {
		o.Scheduled(target, replica, class)
	}
}

// Dropped implements Observer.
func (os Observers) Dropped(target, replica, class string, reason DropReason) {
	for _, o := range os {
		o.Dropped(target, replica, class, reason)
	}
}

// Sent implements Observer.
func (os Observers) Sent(target, replica, class string) {
	for _, o := range os {
		o.Sent(target, replica, class)
	}
}

// Observe implements Observer.
func (os Observers) Observe(r *wire.Result) {
	for _, o := range os {
		o.Observe(r)
	}
}

// ConversationEnded implements Observer.
func (os Observers) ConversationEnded(target, replica, class string, outcome ConversationOutcome) {
	for _, o := range os {
		o.ConversationEnded(target, replica, class, outcome)
	}
}
