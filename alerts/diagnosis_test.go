// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package alerts

import (
	"strings"
	"testing"
)

// TestDiagnosisSentencesCoverEveryCause requires a sentence for every cause
// of the contract's fixed list, and no other, each stating only figures the
// annotation knows how to render; and the annotation of the target's and
// of a replica's verdict to hold every cause's branch and its runbook link.
func TestDiagnosisSentencesCoverEveryCause(t *testing.T) {
	if len(causeSentences) != len(DiagnosisCauses) {
		t.Errorf("%d cause sentences for %d causes", len(causeSentences), len(DiagnosisCauses))
	}
	c := DefaultConfig()
	for _, perReplica := range []bool{false, true} {
		text := c.diagnosisText(perReplica)
		for _, cause := range DiagnosisCauses {
			s, ok := causeSentences[cause]
			if !ok {
				t.Errorf("cause %s has no sentence", cause)
				continue
			}
			if s.meaning == "" {
				t.Errorf("cause %s: no meaning", cause)
			}
			for _, it := range s.evidence {
				f, ok := evidenceFigures[it.figure]
				if !ok || f.name != it.figure || strings.Count(f.text, "%v") != 1 {
					t.Errorf("cause %s states figure %q, which has no rendering (%+v)", cause, it.figure, f)
				}
			}
			if !strings.Contains(text, `eq $cause "`+cause+`" }}: `+s.meaning) {
				t.Errorf("perReplica=%v: the annotation has no branch for %s", perReplica, cause)
			}
		}
		if want := c.RunbookURL + "#" + CauseRunbookAnchor("") + "{{ $cause }}"; !strings.Contains(text, want) {
			t.Errorf("perReplica=%v: the annotation does not link %s", perReplica, want)
		}
		if got := strings.Contains(text, `replica=%q`); got != perReplica {
			t.Errorf("perReplica=%v: selects by the alert's replica: %v", perReplica, got)
		}
	}
}
