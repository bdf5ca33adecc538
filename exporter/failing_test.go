// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"testing"

	"github.com/llmprobe/llmprobe/probe/wire"
)

// TestFailingAlarm: the status page's failing alarm judges the recent
// requests (newest first), or without them the counters since start: at
// least 3 requests, half or more failed; "every request fails" when all
// did, with the outcomes by count and the newest failure.
func TestFailingAlarm(t *testing.T) {
	entries := func(outcomes ...wire.Outcome) []Entry {
		es := make([]Entry, len(outcomes))
		for i, o := range outcomes {
			es[i] = Entry{Outcome: o, ErrorType: string(o) + "-type"}
		}
		return es
	}
	ok, conn, http5 := wire.OutcomeSuccess, wire.OutcomeConnectError, wire.OutcomeHTTPError
	if f := failing(entries(ok, ok, conn, ok), nil); f != nil {
		t.Errorf("1 of 4 failed: alarm %+v", f)
	}
	if f := failing(entries(conn, conn), nil); f != nil {
		t.Errorf("2 requests: alarm %+v (too few to judge)", f)
	}
	f := failing(entries(http5, conn, conn, ok), nil)
	if f == nil || f.All || f.Failed != 3 || f.Of != 4 || f.Latest.ErrorType != "http_error-type" ||
		len(f.Outcomes) != 2 || f.Outcomes[0] != (countView{"connect_error", 2}) || f.Outcomes[1] != (countView{"http_error", 1}) {
		t.Errorf("3 of 4 failed: alarm %+v", f)
	}
	f = failing(entries(conn, conn, conn), nil)
	if f == nil || !f.All || f.Since != "the last " {
		t.Errorf("3 of 3 failed: alarm %+v", f)
	}
	f = failing(nil, map[wire.Outcome]uint64{ok: 0, conn: 36})
	if f == nil || !f.All || f.Failed != 36 || f.Of != 36 || f.Latest != nil || f.Since != "" {
		t.Errorf("36 of 36 since start: alarm %+v", f)
	}
	if f := failing(nil, map[wire.Outcome]uint64{ok: 40, conn: 36}); f != nil {
		t.Errorf("36 of 76 since start: alarm %+v", f)
	}
}
