// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/probe/wire"
)

// TestReportRunAndOutcomes: the JSON always carries the schema version
// (a search's report too, which sets none), the run information and an
// interrupted stage; the text and the Markdown give the outcomes of a
// stage with errors, most frequent first, and say it was interrupted.
func TestReportRunAndOutcomes(t *testing.T) {
	r := &Report{
		Started: time.Unix(0, 0), Finished: time.Unix(10, 0),
		Run: &RunInfo{Version: "1.2.3", CommandLine: []string{"bench", "--stage=1:2s", "--slo=ttft=1s,tpot=2s"}, Host: "h", GOMAXPROCS: 2, NumCPU: 4, Seed: 9, SeedSource: "flag"},
		Stages: []*StageReport{{Stage: 1, Target: "t", RequestedRate: 1, Duration: 3 * time.Second, PlannedDuration: time.Minute, Interrupted: true,
			Outcomes: map[wire.Outcome]int{wire.OutcomeSuccess: 2, wire.OutcomeConnectError: 5, wire.OutcomeTimeout: 1}}},
	}
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.SchemaVersion != ReportSchemaVersion || back.Run == nil || back.Run.Seed != 9 || !back.Stages[0].Interrupted || back.Stages[0].PlannedDuration != time.Minute {
		t.Errorf("read back: %+v %+v", back, back.Run)
	}
	if r.SchemaVersion != 0 {
		t.Error("WriteJSON changed the report")
	}
	const outcomes = "6 of 8 results failed (75.0%): connect_error 5, success 2, timeout 1"
	b.Reset()
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"stage 1 t errors: " + outcomes, "stage 1 t INTERRUPTED: ", "after 3s of 1m0s", "run: llmprobe 1.2.3 (revision -, -)\nrun: host h, GOMAXPROCS 2 of 4 CPUs, seed 9 (flag)\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the text has no %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := r.WriteMarkdown(&b, MarkdownOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"- errors: " + strings.ReplaceAll(outcomes, "_", `\_`), "- **INTERRUPTED**: ", fmt.Sprintf("report schema %d", ReportSchemaVersion),
		"command line: `bench --stage=1:2s --slo=ttft=1s,tpot=2s`", "host h, GOMAXPROCS 2, 4 CPUs", "seed 9 (flag)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the Markdown has no %q:\n%s", want, b.String())
		}
	}
}

// TestRunWarnings: the run's warnings are in the JSON (run.warnings, read
// back), after the run lines of the text and in the Markdown's
// parameters, one line each; a report without any writes none.
func TestRunWarnings(t *testing.T) {
	w := []string{"stage 1 asks for 10 req/s, above the 5 req/s this host drives", "stage 2: the warm-up (5s) is as long as the stage (1s)"}
	r := &Report{Started: time.Unix(0, 0), Finished: time.Unix(10, 0), Run: &RunInfo{Version: "1.2.3", Warnings: w}}
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || back.Run == nil || !slices.Equal(back.Run.Warnings, w) {
		t.Errorf("read back: %+v, %v", back.Run, err)
	}
	b.Reset()
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(b.String(), "\nwarning: "+w[0]+"\nwarning: "+w[1]+"\n") {
		t.Errorf("the text does not end with the warnings:\n%s", b.String())
	}
	b.Reset()
	if err := r.WriteMarkdown(&b, MarkdownOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "repeats the workload's random draws\n- **warning**: "+w[0]+"\n- **warning**: "+w[1]+"\n\n") {
		t.Errorf("the Markdown's parameters have no warnings:\n%s", b.String())
	}
	r.Run.Warnings = nil
	for _, write := range []func(io.Writer) error{r.WriteJSON, r.WriteText, func(w io.Writer) error { return r.WriteMarkdown(w, MarkdownOptions{}) }} {
		b.Reset()
		if err := write(&b); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(b.String(), "warning") {
			t.Errorf("a report without warnings has one:\n%s", b.String())
		}
	}
}

// TestReportCommonRandomNumbers: a report whose stages reused the same
// draws says so in its text, its Markdown and its JSON; one whose stages
// drew their own says nothing of it.
func TestReportCommonRandomNumbers(t *testing.T) {
	for _, crn := range []bool{false, true} {
		r := &Report{Started: time.Unix(0, 0), Finished: time.Unix(10, 0),
			Run:    &RunInfo{Version: "1", Seed: 3, SeedSource: "flag", CommonRandomNumbers: crn},
			Stages: []*StageReport{{Stage: 1, Target: "t", RequestedRate: 1, Duration: time.Second}}}
		var text, md, js bytes.Buffer
		if err := r.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		if err := r.WriteMarkdown(&md, MarkdownOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := r.WriteJSON(&js); err != nil {
			t.Fatal(err)
		}
		for name, out := range map[string]string{"text": text.String(), "Markdown": md.String(), "JSON": js.String()} {
			want := crnNote
			if name == "JSON" {
				want = `"common_random_numbers": true`
			}
			if got := strings.Contains(out, want); got != crn {
				t.Errorf("common random numbers %v: the %s says %q: %v\n%s", crn, name, want, got, out)
			}
		}
	}
}
