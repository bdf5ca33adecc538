// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/llmprobe/llmprobe/dist"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/servermetrics"
)

// Report is the outcome of a sweep.
type Report struct {
	Started  time.Time      `json:"started"`
	Finished time.Time      `json:"finished"`
	Sampling []SamplingInfo `json:"sampling"`
	// Workloads summarises what each target was sent.
	Workloads []WorkloadInfo `json:"workloads,omitempty"`
	// SLOBounds are the latency bounds the run was judged by (--slo, else
	// the configuration's objectives), for the plot and the Markdown.
	SLOBounds []SLOBound     `json:"slo_bounds,omitempty"`
	Stages    []*StageReport `json:"stages"`
	// Find is the outcome of a search (--find, --levels); nil for a plain
	// list of stages.
	Find *FindReport `json:"find,omitempty"`
	// Percentiles are the percentiles asked for (--percentiles), in
	// percent; every Quantiles then holds them (empty: p50, p95, p99).
	Percentiles []float64 `json:"percentiles,omitempty"`
	// Dataset describes the prompts' dataset (--dataset; nil without).
	Dataset *DatasetInfo `json:"dataset,omitempty"`
	// ClosedLoop are the closed-loop levels (--concurrency), apart from
	// the open-loop Stages: never compare the two (closedloop.go).
	ClosedLoop []*ClosedLoopStage `json:"closed_loop,omitempty"`

	// SchemaVersion is the report format's version (ReportSchemaVersion
	// when written; 0, absent, in reports written before it was kept,
	// which read as version 1). Run says how the report was produced
	// (nil in those older reports).
	SchemaVersion int      `json:"schema_version,omitempty"`
	Run           *RunInfo `json:"run,omitempty"`
}

// ReportSchemaVersion is the version of the JSON report written: 2 added
// schema_version, run and the stages' interrupted and planned duration;
// 3 each stage's figures under vllm bench serve's keys (Serving), its
// warnings and warm-up (warmup_ns), the outcome cancelled_at_grace, and
// left out output_tokens_per_second and prompt_tokens_per_second (their
// tokens and their time were not of the same requests: see
// output_throughput and total_token_throughput). Reports without
// schema_version are version 1 and read the same.
const ReportSchemaVersion = 3

// RunInfo is what it takes to reproduce a report: the program, the
// command line, the machine and the workload's seed.
type RunInfo struct {
	// Version is llmprobe's version (prometheus/common/version), Revision
	// its VCS revision, GoVersion the toolchain it was built with.
	Version   string `json:"llmprobe_version"`
	Revision  string `json:"revision,omitempty"`
	GoVersion string `json:"go_version,omitempty"`
	// CommandLine is the program's arguments, secrets redacted.
	CommandLine []string `json:"command_line"`
	Host        string   `json:"host"`
	GOMAXPROCS  int      `json:"gomaxprocs"`
	NumCPU      int      `json:"num_cpu"`
	// Seed is global.seed as the run used it: the arrivals, class picks
	// and request plans of every target are drawn from it (with the
	// target's name and the stage's number), so the same seed gives the
	// same draws. SeedSource says where it came from: "flag" (--seed),
	// "config" (global.seed) or "random" (drawn for the run; give it as
	// --seed to repeat the draws).
	Seed       uint64 `json:"seed"`
	SeedSource string `json:"seed_source,omitempty"`
	// Warnings are what the run was warned of before (and while) it ran,
	// each a sentence naming its stage where it has one: a stage asking
	// for more than the harness' ceiling on this host, a stage the
	// warm-up fills. The text and the Markdown print them.
	Warnings []string `json:"warnings,omitempty"`
	// CommonRandomNumbers: every stage reused the same draws, rescaled to
	// its rate (--common-random-numbers, for paired comparisons), so one
	// random factor moved all the stages together; by default each stage
	// draws its own.
	CommonRandomNumbers bool `json:"common_random_numbers,omitempty"`
}

// crnNote says what common random numbers do to a report's stages.
const crnNote = "common random numbers: every stage reused the same draws, rescaled to its rate, so their errors move together (a paired comparison, not independent stages)"

// describe is the run in two lines of under 100 columns (for a host
// name up to 20 characters): the program, then the machine and the seed.
func (ri *RunInfo) describe() [2]string {
	return [2]string{
		fmt.Sprintf("llmprobe %s (revision %s, %s)", ri.Version, orDash(ri.Revision), orDash(ri.GoVersion)),
		fmt.Sprintf("host %s, GOMAXPROCS %d of %d CPUs, seed %d (%s)", orDash(ri.Host), ri.GOMAXPROCS, ri.NumCPU, ri.Seed, orDash(ri.SeedSource)),
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// SamplingInfo records the sampling parameters of a class: numbers taken
// at different settings are not comparable.
type SamplingInfo struct {
	Target      string         `json:"target"`
	Class       string         `json:"class"`
	Temperature float64        `json:"temperature"`
	TopP        float64        `json:"top_p"`
	TopK        int            `json:"top_k,omitempty"`
	ExtraBody   map[string]any `json:"extra_body,omitempty"`
}

// Quantiles summarises one measurement, in seconds.
type Quantiles struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
	// Percentiles are those asked for (Report.Percentiles), by name
	// ("p90", "p99.9"); none unless asked for.
	Percentiles map[string]float64 `json:"percentiles,omitempty"`
}

// Summarize is the Quantiles of the values v, in seconds (zero for none).
func Summarize(v []float64) Quantiles {
	if len(v) == 0 {
		return Quantiles{}
	}
	s := dist.Summarize(v)
	return Quantiles{Count: s.Count, Mean: s.Mean, P50: s.P50, P95: s.P95, P99: s.P99, Max: s.Max}
}

// StageReport is one target at one stage.
type StageReport struct {
	Stage         int           `json:"stage"`
	Target        string        `json:"target"`
	Model         string        `json:"model"`
	RequestedRate float64       `json:"requested_rate"`
	AchievedRate  float64       `json:"achieved_rate"`
	Duration      time.Duration `json:"duration_ns"`

	Scheduled int                      `json:"scheduled"`
	Sent      int                      `json:"sent"`
	Dropped   map[probe.DropReason]int `json:"dropped"`
	Outcomes  map[wire.Outcome]int     `json:"outcomes"`
	// Conversations counts multi-turn conversations by outcome.
	Conversations map[probe.ConversationOutcome]int `json:"conversations,omitempty"`
	// Warmup counts the requests planned in the warm-up (but those
	// cancelled at the grace's end, CutAtGrace): Sent is Warmup +
	// CutAtGrace + Serving's Completed + Failed.
	Warmup int `json:"warmup_requests"`
	// WarmupDuration is the stage's warm-up: the requests planned in it
	// are counted, but in no figure.
	WarmupDuration time.Duration `json:"warmup_ns,omitempty"`
	// InFlightAtEnd counts the requests still running when the stage
	// ended; they were waited for, at most Grace (Drain is how long the
	// wait took), and their results count for the stage. CutAtGrace of
	// them were still running when the grace ran out and were cancelled:
	// their outcome is OutcomeCancelledAtGrace, and they are in no figure.
	// The stage's wall time is Duration + Drain.
	InFlightAtEnd int           `json:"in_flight_at_end"`
	Drain         time.Duration `json:"drain_ns"`
	Grace         time.Duration `json:"grace_ns"`
	CutAtGrace    int           `json:"cut_at_grace"`
	Estimated     int           `json:"usage_estimated"`

	TTFT Quantiles `json:"ttft_seconds"`
	TPOT Quantiles `json:"tpot_seconds"`
	ITL  Quantiles `json:"itl_seconds"`
	E2E  Quantiles `json:"e2e_seconds"`
	Lag  Quantiles `json:"schedule_lag_seconds"`

	CacheHitRatio    float64 `json:"prefix_cache_hit_ratio"`
	ReuseIntent      float64 `json:"prefix_reuse_target_ratio"`
	ClientCPUPer1000 float64 `json:"client_cpu_seconds_per_1000_requests"`

	// Serving are the stage's figures as vllm bench serve defines them
	// (serving.go), over its measured requests; the JSON has them beside
	// the other keys under vLLM's names (serving_json.go). Nil when no
	// measured request ended (Warnings says why), and in reports written
	// before schema 3.
	Serving *Serving `json:"-"`
	// Warnings say what makes the stage's figures weaker than they look:
	// a stage no longer than its warm-up, too few completed requests for
	// the percentiles shown, requests cut at the grace's end.
	Warnings []string `json:"warnings,omitempty"`

	// Served counts the successful requests that ended inside the measured
	// window (after warm-up, before the stage ended: those that finish in
	// the grace period do not count), whenever they started; ServedRate
	// and ServedOutputTokensPerSec are per second of that window. It is
	// what the target served, where AchievedRate is what was sent: past
	// capacity the two part. The searches judge by it (a stage's served
	// rate does not wait for its drain); it is not vLLM's figure (Serving).
	Served                   int     `json:"served_requests"`
	ServedRate               float64 `json:"served_rate"`
	ServedOutputTokensPerSec float64 `json:"served_output_tokens_per_second"`

	// Trusted is false when the requested load was not delivered and
	// measured honestly: the harness was saturated (late sends or drops,
	// inflated timestamps) or the target overloaded (drops over
	// max_inflight), by the daemon's rules; the reasons say which.
	Trusted bool     `json:"trusted"`
	Reasons []string `json:"untrusted_reasons,omitempty"`

	// SLO is the stage's goodput under the SLO (nil without one).
	SLO *SLOReport `json:"slo,omitempty"`

	// Samples are up to MaxSamples per-request values of TTFT, TPOT and
	// E2E drawn uniformly from the stage's (what `bench compare` tests).
	Samples *Samples `json:"samples,omitempty"`

	// Server is what the target server's own metrics say about the
	// stage's window (Options.ServerMetrics; nil without).
	Server *servermetrics.Stats `json:"server_metrics,omitempty"`
	// TTFTGap is the probe's TTFT minus the server's (p50 and p99) over
	// the stage (nil without the server's TTFT histogram).
	TTFTGap *TTFTGap `json:"probe_minus_server_ttft_seconds,omitempty"`
	// GPU is the stage's dcgm-exporter averages (Options.PrometheusURL;
	// the same for every target of the stage).
	GPU *servermetrics.GPUStats `json:"gpu,omitempty"`
	// Cost is the stage's energy and cost per generated token (servermetrics;
	// the same for every target of the stage).
	Cost *servermetrics.CostStats `json:"cost,omitempty"`

	// Interrupted is true when the run was cancelled (SIGINT, SIGTERM)
	// before the stage's planned duration, PlannedDuration, was over: its
	// figures cover only Duration.
	Interrupted     bool          `json:"interrupted,omitempty"`
	PlannedDuration time.Duration `json:"planned_duration_ns,omitempty"`

	// Replay describes the trace a replay stage replayed (bench.OpenReplay);
	// nil for a stage of a fixed rate.
	Replay *ReplayInfo `json:"replay,omitempty"`
}

// Shortfall says, in words, when the stage sent fewer requests than its
// requested rate explains, and is empty when the count is within chance.
// Arrivals are random: over a stage a Poisson count of mean λ = rate ×
// duration has a standard deviation of √λ, so 32 of an expected 40 (20
// req/s for 2 s) is chance, not a shortfall, while a 2% bound would call it
// one half the time. A count is short when it is below both 98% of λ and
// λ − 4√λ (a Poisson count falls that low with probability below 1e-4):
// at low counts only a gross shortfall shows, which is what the count can
// tell; late and dropped sends are the verdict's evidence (Trusted).
func (s *StageReport) Shortfall() string {
	if ri := s.Replay; ri != nil {
		// A replay plans an exact count: every record not sent is said.
		if s.Sent >= ri.Records {
			return ""
		}
		dropped, _ := s.counts()
		return fmt.Sprintf("sent %d of the %d records the replay planned (%d dropped, %d not due when it ended)",
			s.Sent, ri.Records, dropped, ri.Records-s.Scheduled)
	}
	want := s.RequestedRate * s.Duration.Seconds()
	if !(want > 0) {
		return ""
	}
	low := math.Min(0.98*want, want-4*math.Sqrt(want))
	if float64(s.Sent) >= low {
		return ""
	}
	return fmt.Sprintf("sent %d of an expected %.0f requests (%.1f of %.0f req/s), fewer than chance explains (at least %.0f)",
		s.Sent, want, s.AchievedRate, s.RequestedRate, math.Ceil(low))
}

// ErrorShare is the stage's failed results (errs: other than success,
// and not cancelled at the grace's end), its results other than those
// cancelled, and the share of the first in the second (0 without results).
func (s *StageReport) ErrorShare() (errs, results int, share float64) {
	for o, n := range s.Outcomes {
		if o != OutcomeCancelledAtGrace {
			results += n
		}
	}
	errs = failed(s.Outcomes)
	if results > 0 {
		share = float64(errs) / float64(results)
	}
	return errs, results, share
}

// failed counts the results other than success: the failures (a request
// cancelled at the grace's end is none).
func failed(outcomes map[wire.Outcome]int) (n int) {
	for o, c := range outcomes {
		if o != wire.OutcomeSuccess && o != OutcomeCancelledAtGrace {
			n += c
		}
	}
	return n
}

// describeOutcomes is the stage's results by outcome, most frequent
// first, when any failed ("" otherwise): "17 of 17 results failed
// (100.0%): connect_error 17".
func (s *StageReport) describeOutcomes() string {
	errs, results, share := s.ErrorShare()
	if errs == 0 {
		return ""
	}
	// Those cancelled at the grace's end are not results of the server
	// (describeDrain says how many).
	outcomes := slices.DeleteFunc(slices.Collect(maps.Keys(s.Outcomes)), func(o wire.Outcome) bool { return o == OutcomeCancelledAtGrace })
	slices.SortFunc(outcomes, func(a, b wire.Outcome) int {
		if d := s.Outcomes[b] - s.Outcomes[a]; d != 0 {
			return d
		}
		return strings.Compare(string(a), string(b))
	})
	parts := make([]string, 0, len(outcomes))
	for _, o := range outcomes {
		parts = append(parts, fmt.Sprintf("%s %d", o, s.Outcomes[o]))
	}
	return fmt.Sprintf("%d of %d results failed (%.1f%%): %s", errs, results, 100*share, strings.Join(parts, ", "))
}

// describeInterrupted says how much of the stage ran when it was cut
// ("" when it was not).
func (s *StageReport) describeInterrupted() string {
	if !s.Interrupted {
		return ""
	}
	return fmt.Sprintf("interrupted (the run was cancelled, SIGINT or SIGTERM) after %s of %s; the figures cover what ran",
		s.Duration.Round(time.Millisecond), s.PlannedDuration)
}

// describeDrain says what the stage waited for after its end ("" when
// nothing was in flight).
func (s *StageReport) describeDrain() string {
	if s.InFlightAtEnd == 0 {
		return ""
	}
	d := fmt.Sprintf("%d requests in flight at the stage's end, waited for %s (grace %s); their results count for the stage",
		s.InFlightAtEnd, s.Drain.Round(time.Millisecond), s.Grace)
	if s.CutAtGrace > 0 {
		d += fmt.Sprintf("; %d still running at the grace's end were cancelled (%s: in no figure)", s.CutAtGrace, OutcomeCancelledAtGrace)
	}
	return d
}

// describeWall is the stage's time: the requested rate, how long it
// sent, the drain after it and its wall time.
func (s *StageReport) describeWall() string {
	return fmt.Sprintf("%s req/s requested for %s, drain %s, wall %s", strconv.FormatFloat(s.RequestedRate, 'g', 4, 64),
		s.Duration.Round(time.Millisecond), s.Drain.Round(time.Millisecond), (s.Duration + s.Drain).Round(time.Millisecond))
}

// describeFigures says which of the requests sent the Serving figures
// are of ("" without figures).
func (s *StageReport) describeFigures() string {
	f := s.Serving
	if f == nil {
		return ""
	}
	measured := f.Completed + f.Failed
	d := fmt.Sprintf("figures of %d of the %d requests sent", measured, s.Sent)
	var not []string
	if s.CutAtGrace > 0 {
		not = append(not, fmt.Sprintf("the %d cancelled at the grace", s.CutAtGrace))
	}
	if s.Warmup > 0 {
		not = append(not, fmt.Sprintf("the %d planned in the %s warm-up", s.Warmup, s.WarmupDuration))
	}
	if len(not) > 0 {
		d += ": not " + strings.Join(not, " nor ")
	}
	return d
}

// WriteJSON writes the report as indented JSON.
// A report without a schema version (a search's, one read from an older
// file) is written as ReportSchemaVersion, the format written.
func (r *Report) WriteJSON(w io.Writer) error {
	out := *r
	if out.SchemaVersion == 0 {
		out.SchemaVersion = ReportSchemaVersion
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(&out)
}

// WriteText writes a table per target: one row per stage with the load
// it was taken at, the latency quantiles, and whether it can be trusted.
func (r *Report) WriteText(w io.Writer) error {
	// Two narrow tables (under 100 columns for target names of up to 16
	// characters): the load of each stage and its verdict, then one row
	// per stage, target and metric with the samples beside the quantiles.
	if len(r.Stages) == 0 && len(r.ClosedLoop) > 0 {
		return r.writeClosedLoopOnly(w) // closedloop.go
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "stage\ttarget\treq/s\tachieved\tsent\tdrop\terr\twall\tcache\tCPU/1k\ttrusted\t")
	for _, s := range r.Stages {
		dropped, errs := s.counts()
		trusted := "yes"
		if !s.Trusted {
			trusted = "NO"
		}
		fmt.Fprintf(tw, "%d\t%s\t%.1f\t%.1f\t%d\t%d\t%d\t%.1fs\t%.1f%%\t%.3f\t%s\t\n",
			s.Stage, s.Target, s.RequestedRate, s.AchievedRate, s.Sent, dropped, errs,
			(s.Duration + s.Drain).Seconds(), 100*s.CacheHitRatio, s.ClientCPUPer1000, trusted)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "stage\ttarget\tmetric\tn\t%s\tmax\t\n", strings.Join(quantileHeader(r.Percentiles), "\t"))
	for _, s := range r.Stages {
		for _, m := range s.metrics() {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t\n", s.Stage, s.Target, m.name, m.q.Count,
				strings.Join(quantileCells(m.q, r.Percentiles), "\t"), fmtQ(m.q, m.q.Max))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range r.Stages {
		fmt.Fprintln(w)
		s.writeServing(w, r.SchemaVersion) // serving_text.go
	}
	fmt.Fprintln(w)
	for _, s := range r.Stages {
		for _, why := range s.Reasons {
			fmt.Fprintf(w, "stage %d %s NOT TRUSTED: %s\n", s.Stage, s.Target, why)
		}
	}
	for _, s := range r.Stages {
		for _, warning := range s.Warnings {
			fmt.Fprintf(w, "stage %d %s WARNING: %s\n", s.Stage, s.Target, warning)
		}
	}
	for _, s := range r.Stages {
		if d := s.describeDrain(); d != "" {
			fmt.Fprintf(w, "stage %d %s: %s\n", s.Stage, s.Target, d)
		}
	}
	for _, s := range r.Stages {
		if d := s.describeOutcomes(); d != "" {
			fmt.Fprintf(w, "stage %d %s errors: %s\n", s.Stage, s.Target, d)
		}
	}
	for _, s := range r.Stages {
		if d := s.describeInterrupted(); d != "" {
			fmt.Fprintf(w, "stage %d %s INTERRUPTED: %s\n", s.Stage, s.Target, d)
		}
	}
	writeReplay(w, r.Stages) // replay.go
	writeServerMetrics(w, r.Stages)
	writeGPU(w, r.Stages)
	writeCost(w, r.Stages)
	writeSLO(w, r.Stages)
	writeFind(w, r.Find)
	writeClosedLoop(w, r)
	writeDataset(w, r.Dataset)
	var sampling []string
	for _, si := range r.Sampling {
		extra := ""
		if len(si.ExtraBody) > 0 {
			keys := slices.Sorted(maps.Keys(si.ExtraBody))
			parts := make([]string, len(keys))
			for i, k := range keys {
				parts[i] = fmt.Sprintf("%s=%v", k, si.ExtraBody[k])
			}
			extra = " " + strings.Join(parts, " ")
		}
		sampling = append(sampling, fmt.Sprintf("%s/%s temperature=%g top_p=%g%s", si.Target, si.Class, si.Temperature, si.TopP, extra))
	}
	_, err := fmt.Fprintf(w, "sampling: %s\n", strings.Join(sampling, "; "))
	if err == nil && r.Run != nil {
		d := r.Run.describe()
		_, err = fmt.Fprintf(w, "run: %s\nrun: %s\n", d[0], d[1])
		if err == nil && r.Run.CommonRandomNumbers {
			_, err = fmt.Fprintf(w, "run: %s\n", crnNote)
		}
		for _, warning := range r.Run.Warnings {
			if err == nil {
				_, err = fmt.Fprintf(w, "warning: %s\n", warning)
			}
		}
	}
	return err
}

// fmtQ formats one quantile of q, or "-" when q has no observation.
func fmtQ(q Quantiles, v float64) string {
	if q.Count == 0 {
		return "-"
	}
	return FormatSeconds(v)
}

// FormatSeconds is a duration in seconds as the report writes it: 0, µs,
// ms to a tenth, or s to a hundredth (NaN, +Inf and -Inf named).
func FormatSeconds(s float64) string {
	if n := servermetrics.NonFinite(s); n != "" {
		return n
	}
	switch {
	case s == 0:
		return "0"
	case s < 1e-3:
		return fmt.Sprintf("%.0fµs", s*1e6)
	case s < 0.99995: // not "1000.0ms"
		return fmt.Sprintf("%.1fms", s*1e3)
	default:
		return fmt.Sprintf("%.2fs", s)
	}
}
