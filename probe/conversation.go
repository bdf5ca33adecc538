// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/probe/workload"
)

// MaxHistoryBytes bounds the text a conversation carries from turn to turn
// (its messages or prompt, plus the last answer). A real 128k-token
// context is about 0.5 MiB of text; past the bound the conversation ends
// as failed instead of sending ever larger bodies (a server that ignores
// max_tokens within the per-response bounds would otherwise make each
// later turn resend all of it).
const MaxHistoryBytes = 2 << 20

// converse runs a multi-turn conversation that arrived at planned. Each
// later turn is planned at the previous answer's end plus a think time,
// counted as scheduled then, and subject to the same in-flight limit and
// lateness bound as any arrival. The conversation ends at its last turn
// (completed), at the first turn that does not succeed (failed), or when a
// turn cannot be sent (dropped) — including when the target stops.
func (r *runner) converse(ctx context.Context, first workload.Plan, planned time.Time, seed uint64) {
	defer r.reqs.Done()
	rng := rand.New(rand.NewPCG(seed, ^seed))
	c := first.Class
	conv := workload.NewConversation(rng)
	turns := c.Turns.Draw(rng)

	outcome := ConversationCompleted
	defer func() {
		r.obs.ConversationEnded(r.name, r.beginEvent(), c.Name, outcome)
		r.endEvent()
	}()

	res := r.exchange(r.builder.FirstTurn(&first, rng, conv), planned)
	for turn := 2; ; turn++ {
		switch {
		case res == nil:
			outcome = ConversationDropped
			return
		case res.Outcome != wire.OutcomeSuccess:
			outcome = ConversationFailed
			return
		case turn > turns:
			return
		case conv.Size(res.Completion) > MaxHistoryBytes:
			outcome = ConversationFailed
			if r.historyWarned.CompareAndSwap(false, true) {
				r.logger.Warn("a conversation's history passed the bound and was ended as failed; answers are far longer than the workload plans",
					"target", r.name, "class", c.Name, "bytes", conv.Size(res.Completion), "max_bytes", MaxHistoryBytes, "turn", turn-1)
			}
			return
		}
		planned = answerEnd(res).Add(c.Turns.Think(rng))
		if !r.awaitTurn(ctx, c, planned) {
			outcome = ConversationDropped
			return
		}
		userTokens, maxTokens := c.NextTurnLengths(rng)
		res = r.exchange(r.builder.NextTurn(c, conv, res, userTokens, maxTokens, rng), planned)
	}
}

// replaySession replays a trace session (a from_trace class whose trace
// has sessions) that arrived at planned: its records in turn order, each
// sent as the record says (Builder.FromRecord: its prompt, whose hash-id
// blocks carry the history a prefix cache sees, and its answer length).
// A later turn is planned at the previous answer's end plus what the trace
// left between the two turns' arrivals beyond that answer's time here
// (never negative), and is admitted like any arrival. The conversation
// ends as converse's do: completed, failed or dropped.
func (r *runner) replaySession(ctx context.Context, first workload.Plan, planned time.Time, seed uint64) {
	defer r.reqs.Done()
	rng := rand.New(rand.NewPCG(seed, ^seed))
	c := first.Class
	recs := first.Records
	id := workload.NewConversation(rng).ID

	outcome := ConversationCompleted
	defer func() {
		r.obs.ConversationEnded(r.name, r.beginEvent(), c.Name, outcome)
		r.endEvent()
	}()

	for i, rec := range recs {
		p := r.builder.FromRecord(c, rec, c.Trace.BlockSize, rng)
		p.Res.ConversationID, p.Res.Turn = id, i+1
		res := r.exchange(p, planned)
		switch {
		case res == nil:
			outcome = ConversationDropped
			return
		case res.Outcome != wire.OutcomeSuccess:
			outcome = ConversationFailed
			return
		case i == len(recs)-1:
			return
		}
		think := recs[i+1].Offset - rec.Offset - res.E2E
		planned = answerEnd(res).Add(max(think, 0))
		if !r.awaitTurn(ctx, c, planned) {
			outcome = ConversationDropped
			return
		}
	}
}

// answerEnd is when a turn's answer ended: its start plus its E2E, or now
// for a request that never started.
func answerEnd(res *wire.Result) time.Time {
	if res.Start.IsZero() {
		return time.Now()
	}
	return res.Start.Add(res.E2E)
}

// awaitTurn waits for a later turn's planned instant and admits it like
// any arrival; false when it was dropped (shutdown while waiting, late or
// over max_inflight), counted as such.
func (r *runner) awaitTurn(ctx context.Context, c *workload.Class, planned time.Time) bool {
	if d := time.Until(planned); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			r.schedule(c)
			r.drop(c, DropShutdown, time.Now())
			return false
		case <-t.C:
		}
	}
	return r.admit(c, planned)
}
