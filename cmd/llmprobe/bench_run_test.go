// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/version"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/internal/proctest"
)

// closedPort is a loopback address nothing listens on: a listener's,
// closed.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// benchConfig writes a configuration of one target at url (its base, /v1
// added) and returns the file.
func benchConfig(t *testing.T, url string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "bench.yml")
	cfg := `workloads: {w: {classes: [{name: c, prompt_tokens: 4, output_tokens: 2}]}}
targets:
  - name: down
    url: ` + url + `/v1
    model: m
    workload: w
    arrival: {rate: 1}
    request_timeout: 5s
`
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// simFaults writes a simulator configuration whose every completion fails
// with fault kind (e.g. http_500) with probability p.
func simFaults(t *testing.T, kind string, p float64) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "sim.yml")
	if err := os.WriteFile(file, []byte("faults:\n  "+kind+": "+strconv.FormatFloat(p, 'g', -1, 64)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestBenchPreflight: a target nobody listens on fails the preflight:
// exit 1 before any stage, one message naming the target, its URL and the
// outcome with its cause, and no report; --no-preflight runs the stage,
// whose every request fails, prints the stage's outcomes and exits 1 for
// its error share (the reports are written first); --max-error-ratio=1
// accepts it. Against the simulator answering 500 to everything the
// preflight names the HTTP status; a healthy simulator passes it.
func TestBenchPreflight(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary against a closed port and the simulator")
	}
	bin := binary(t)
	addr := closedPort(t)
	cfg := benchConfig(t, "http://"+addr)
	dir := t.TempDir()
	js := filepath.Join(dir, "r.json")

	res := runBinary(t, bin, nil, "bench", "--config.file="+cfg, "--stage=20:1s", "--warmup=0s", "--output="+js)
	if res.code != 1 || res.stdout != "" {
		t.Fatalf("preflight against %s: exit code %d, stdout %q, stderr %q", addr, res.code, res.stdout, res.stderr)
	}
	msg := lastLine(res.stderr)
	for _, want := range []string{"llmprobe: error: preflight", "target down", "http://" + addr + "/v1", "connect_error", "refused", "--no-preflight"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the preflight error has no %q: %q", want, msg)
		}
	}
	if strings.Contains(res.stderr, `msg="bench stage"`) {
		t.Errorf("a stage ran after the failed preflight:\n%s", res.stderr)
	}
	if _, err := os.Stat(js); err == nil {
		t.Error("a report was written after the failed preflight")
	}

	res = runBinary(t, bin, nil, "bench", "--config.file="+cfg, "--stage=20:1s", "--warmup=0s", "--output="+js, "--no-preflight")
	if res.code != 1 {
		t.Fatalf("--no-preflight against %s: exit code %d, want 1; stderr %q", addr, res.code, res.stderr)
	}
	if !strings.Contains(res.stdout, "stage 1 down errors: ") || !strings.Contains(res.stdout, "results failed (100.0%): connect_error ") {
		t.Errorf("no outcome breakdown of the failed stage:\n%s", res.stdout)
	}
	if msg := lastLine(res.stderr); !strings.Contains(msg, "--max-error-ratio=0.5") || !strings.Contains(msg, "stage 1 down") {
		t.Errorf("the error-share failure: %q", msg)
	}
	rep, err := report.ReadReport(js)
	if err != nil {
		t.Fatalf("the report is written before the failure: %v", err)
	}
	if errs, results, share := rep.Stages[0].ErrorShare(); results == 0 || errs != results || share != 1 {
		t.Errorf("error share %d/%d = %g", errs, results, share)
	}
	if res := runBinary(t, bin, nil, "bench", "--config.file="+cfg, "--stage=20:1s", "--warmup=0s", "--no-preflight", "--max-error-ratio=1"); res.code != 0 {
		t.Errorf("--max-error-ratio=1: exit code %d: %s", res.code, res.stderr)
	}

	res = runBinary(t, bin, nil, "bench", "--sim", "--sim.config.file="+simFaults(t, "http_500", 1), "--target=sim-chat", "--stage=2:1s")
	if msg := lastLine(res.stderr); res.code != 1 || !strings.Contains(msg, "target sim-chat") || !strings.Contains(msg, "http_error") || !strings.Contains(msg, "HTTP 500") {
		t.Errorf("preflight against a simulator answering 500: exit code %d, %q", res.code, msg)
	}
	res = runBinary(t, bin, nil, "bench", "--sim", "--target=sim-chat", "--stage=2:1s", "--warmup=0s")
	if res.code != 0 || !strings.Contains(res.stderr, `msg="preflight request succeeded" target=sim-chat`) {
		t.Errorf("a healthy simulator: exit code %d\n%s", res.code, res.stderr)
	}
}

// TestBenchErrorRatio: a simulator failing a fifth of its requests passes
// the default --max-error-ratio and fails --max-error-ratio=0.01, naming
// the stage; the outcomes are printed either way.
func TestBenchErrorRatio(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary against the simulator")
	}
	bin := binary(t)
	sim := simFaults(t, "http_503", 0.2)
	args := []string{"bench", "--sim", "--sim.config.file=" + sim, "--target=sim-completions", "--stage=20:2s", "--warmup=0s", "--no-preflight"}
	res := runBinary(t, bin, nil, args...)
	if res.code != 0 {
		t.Fatalf("a 20%% error share under the default 0.5: exit code %d: %s", res.code, res.stderr)
	}
	if !strings.Contains(res.stdout, "stage 1 sim-completions errors: ") || !strings.Contains(res.stdout, "http_error ") {
		t.Errorf("no outcome breakdown:\n%s", res.stdout)
	}
	res = runBinary(t, bin, nil, append(args, "--max-error-ratio=0.01")...)
	if msg := lastLine(res.stderr); res.code != 1 || !strings.Contains(msg, "stage 1 sim-completions") {
		t.Errorf("--max-error-ratio=0.01: exit code %d, %q", res.code, msg)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// TestBenchOutputsChecked: a report, plot or request file that cannot be
// written is a usage error before the first request (the target counts
// none); so are an unknown extension and one file named twice. Several
// --output files are written at once.
func TestBenchOutputsChecked(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, "no", http.StatusTeapot)
	}))
	defer srv.Close()
	cfg := benchConfig(t, srv.URL)
	dir := t.TempDir()
	ro := filepath.Join(dir, "ro")
	if err := os.Mkdir(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing", "r.json")
	bin := binary(t)
	readOnlyDir := os.Geteuid() != 0 // root writes anywhere
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--output=" + missing}, "missing"},
		{[]string{"--output=" + filepath.Join(notDir, "r.md")}, "not a directory"},
		{[]string{"--output=" + filepath.Join(dir, "r.txt")}, ".json"},
		{[]string{"--output=" + filepath.Join(dir, "r.json"), "--output=" + filepath.Join(dir, ".", "r.json")}, "already written"},
		{[]string{"--output=" + filepath.Join(dir, "r.json"), "--plot=" + filepath.Join(dir, "missing", "p.svg")}, "--plot"},
		{[]string{"--requests=" + filepath.Join(dir, "missing", "r.jsonl")}, "--requests"},
		{[]string{"--output=" + filepath.Join(ro, "r.json")}, "takes no new file"},
	} {
		if strings.Contains(tt.args[0], ro) && !readOnlyDir {
			continue
		}
		res := runBinary(t, bin, nil, append([]string{"bench", "--config.file=" + cfg, "--stage=5:30s"}, tt.args...)...)
		if res.code != 2 || strings.Count(res.stderr, "\n") != 1 || !strings.Contains(res.stderr, tt.want) {
			t.Errorf("%v: exit code %d, stderr %q (want one line with %q)", tt.args, res.code, res.stderr, tt.want)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests were sent before the output files were refused", n)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("the checks left files behind: %v", entries)
	}
}

// TestBenchReportRunInfo: the JSON and the Markdown (both written by one
// run) say how the report was made: the schema version, llmprobe's
// version, the command line with a URL's password hidden, the host,
// GOMAXPROCS, the CPUs and the seed; `bench compare` still reads a report
// without them (written before they were kept).
func TestBenchReportRunInfo(t *testing.T) {
	if testing.Short() {
		t.Skip("a short sweep against the simulator")
	}
	bin := binary(t)
	dir := t.TempDir()
	js, md := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.md")
	prom := "http://user:s3cret@" + closedPort(t)
	args := []string{"bench", "--sim", "--target=sim-chat", "--stage=4:2s", "--warmup=0s", "--seed=7",
		"--output=" + js, "--output=" + md, "--prometheus.url=" + prom, "--gpu.selector=gpu=\"0\""}
	res := runBinary(t, bin, nil, args...)
	if res.code != 0 {
		t.Fatalf("exit code %d: %s", res.code, res.stderr)
	}
	rep, err := report.ReadReport(js)
	if err != nil {
		t.Fatal(err)
	}
	ri := rep.Run
	if rep.SchemaVersion != report.ReportSchemaVersion || ri == nil {
		t.Fatalf("schema %d, run %+v", rep.SchemaVersion, ri)
	}
	host, _ := os.Hostname()
	if ri.Version == "" || ri.Version != version.Version && ri.Version != "devel" || ri.Host != host || ri.GOMAXPROCS < 1 || ri.NumCPU != runtime.NumCPU() || ri.Seed != 7 || ri.SeedSource != "flag" {
		t.Errorf("run info %+v", ri)
	}
	cl := strings.Join(ri.CommandLine, " ")
	if !slices.Contains(ri.CommandLine, "--seed=7") || !slices.Contains(ri.CommandLine, "--stage=4:2s") || strings.Contains(cl, "s3cret") || !strings.Contains(cl, "--prometheus.url=http://xxxxx@") {
		t.Errorf("command line %q", cl)
	}
	doc, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{fmt.Sprintf("report schema %d", report.ReportSchemaVersion), "command line: `bench --sim", "--seed=7", "host " + host, "GOMAXPROCS ", "seed 7 (flag)"} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("the Markdown has no %q", want)
		}
	}
	if strings.Contains(string(doc), "s3cret") {
		t.Error("the Markdown holds the URL's password")
	}
	if !strings.Contains(res.stdout, "run: llmprobe ") || !strings.Contains(res.stdout, "seed 7 (flag)") {
		t.Errorf("stdout has no run line:\n%s", res.stdout)
	}

	// The same report as an older llmprobe wrote it.
	var raw map[string]any
	data, _ := os.ReadFile(js)
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	delete(raw, "schema_version")
	delete(raw, "run")
	for _, s := range raw["stages"].([]any) {
		delete(s.(map[string]any), "planned_duration_ns")
	}
	old := filepath.Join(dir, "old.json")
	data, _ = json.Marshal(raw)
	if err := os.WriteFile(old, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err := report.ReadReport(old); err != nil || r.SchemaVersion != 0 || r.Run != nil {
		t.Fatalf("an old report: %v", err)
	}
	if res := runBinary(t, bin, nil, "bench", "compare", old, js); res.code != 0 || !strings.Contains(res.stdout, "no real change") {
		t.Errorf("compare of an old report: exit code %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}

// arrivals reads a request log: per target, the classes and the planned
// instants' offsets from the first, in planned order.
func arrivals(t *testing.T, file string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var recs []report.RequestRecord
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r report.RequestRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	slices.SortFunc(recs, func(a, b report.RequestRecord) int { return a.Planned.Compare(b.Planned) })
	first := map[string]time.Time{}
	out := map[string][]string{}
	for _, r := range recs {
		if r.Turn > 1 {
			continue // later turns follow their answers
		}
		if _, ok := first[r.Target]; !ok {
			first[r.Target] = r.Planned
		}
		out[r.Target] = append(out[r.Target], r.Class+"@"+r.Planned.Sub(first[r.Target]).String())
	}
	return out
}

// TestBenchSeed: two runs with the same --seed draw the same arrivals
// (the planned instants' offsets, to the nanosecond) and classes per
// target; another seed draws others.
func TestBenchSeed(t *testing.T) {
	if testing.Short() {
		t.Skip("three short sweeps against the simulator")
	}
	bin := binary(t)
	dir := t.TempDir()
	run := func(name, seed string) map[string][]string {
		file := filepath.Join(dir, name+".jsonl")
		res := runBinary(t, bin, nil, "bench", "--sim", "--stage=10:2s", "--warmup=0s", "--no-preflight", "--seed="+seed, "--requests="+file)
		if res.code != 0 {
			t.Fatalf("exit code %d: %s", res.code, res.stderr)
		}
		return arrivals(t, file)
	}
	a, b, c := run("a", "42"), run("b", "42"), run("c", "43")
	for target, got := range a {
		if len(got) < 5 {
			t.Fatalf("%s: %d requests", target, len(got))
		}
		// The first arrivals are compared: at the stage's end the
		// arrival loop stops at a time the scheduler decides.
		n := min(len(got), len(b[target]), 10)
		if !slices.Equal(got[:n], b[target][:n]) {
			t.Errorf("%s: the same seed drew\n%v\n%v", target, got[:n], b[target][:n])
		}
		if m := min(n, len(c[target])); slices.Equal(got[:m], c[target][:m]) {
			t.Errorf("%s: seeds 42 and 43 drew the same %v", target, got[:m])
		}
	}
}

// TestBenchInterrupted: SIGINT during a stage ends it; the reports are
// still written, the stage is marked interrupted in the JSON (with its
// planned duration), the Markdown and standard output, and the run exits
// 1 saying so.
func TestBenchInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("a sweep against the simulator, interrupted")
	}
	bin := binary(t)
	dir := t.TempDir()
	js, md := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.md")
	started := make(chan struct{})
	var once atomic.Bool
	p := proctest.Start(t, bin, proctest.Options{Output: writerFunc(func(b []byte) {
		if bytes.Contains(b, []byte(`msg="bench stage"`)) && once.CompareAndSwap(false, true) {
			close(started)
		}
	})}, "bench", "--sim", "--target=sim-chat", "--stage=5:1m", "--stage=5:1m", "--warmup=0s", "--output="+js, "--output="+md)
	select {
	case <-started:
	case <-p.Done():
		t.Fatalf("bench ended before its stage:\n%s", p.Output())
	case <-time.After(time.Minute):
		t.Fatal("no stage started within a minute")
	}
	time.Sleep(1500 * time.Millisecond) // a few requests
	p.Signal(t, syscall.SIGINT)
	code, ok := p.Wait(time.Minute)
	if !ok {
		t.Fatal("bench did not end after SIGINT")
	}
	if code != 1 || !strings.Contains(lastLine(p.Stderr()), "interrupted") {
		t.Errorf("exit code %d, stderr ends %q", code, lastLine(p.Stderr()))
	}
	if !strings.Contains(p.Stdout(), "stage 1 sim-chat INTERRUPTED: ") {
		t.Errorf("stdout:\n%s", p.Stdout())
	}
	rep, err := report.ReadReport(js)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Stages) != 1 || !rep.Stages[0].Interrupted || rep.Stages[0].PlannedDuration != time.Minute || rep.Stages[0].Duration >= time.Minute {
		t.Errorf("stages %+v", rep.Stages)
	}
	if doc, err := os.ReadFile(md); err != nil || !strings.Contains(string(doc), "**INTERRUPTED**") {
		t.Errorf("the Markdown: %v\n%s", err, doc)
	}
}

type writerFunc func([]byte)

func (f writerFunc) Write(b []byte) (int, error) { f(b); return len(b), nil }

// TestRedactArgs: secrets never reach the report's command line.
func TestRedactArgs(t *testing.T) {
	in := []string{"bench", "--api-key=sk-1", "--auth.token", "sk-2", "--prometheus.url=https://u:pw@prom:9090/?x=1",
		"--server-metrics=a=http://u:pw2@h/metrics,b=http://h2/metrics?api_key=k3", "http://u:pw4@x", "--stage=1:2s", "--no-auth-check"}
	got := strings.Join(redactArgs(in), " ")
	for _, secret := range []string{"sk-1", "sk-2", "pw@", "pw2", "k3", "pw4"} {
		if strings.Contains(got, secret) {
			t.Errorf("%q holds %q", got, secret)
		}
	}
	for _, keep := range []string{"--stage=1:2s", "https://xxxxx@prom:9090/?x=xxxxx", "a=http://xxxxx@h/metrics,b=http://h2/metrics?api_key=xxxxx", "--no-auth-check", "--auth.token " + redacted} {
		if !strings.Contains(got, keep) {
			t.Errorf("%q lost %q", got, keep)
		}
	}
}

// TestProgressFormat: the progress names the stage i/n, its rate and the
// ETAs, and gives each target its own line with its rate in req/s beside
// the count sent; a search says how many stages it runs at most.
func TestProgressFormat(t *testing.T) {
	p := bench.Progress{Stage: 2, Stages: 3, Elapsed: 95 * time.Second, Duration: 5 * time.Minute, RequestedRate: 40,
		Targets: []bench.TargetProgress{
			{Target: "a-sixteen-chars!", Sent: 123456, Rate: 1234.5, Errors: 99999, Dropped: 12345, TTFTP50: 0.0123, TTFTP99: 12.345, TTFTCount: 10},
			{Target: "b", Sent: 1, Rate: 1},
		}}
	stages := []bench.Stage{{Rate: 20, Duration: time.Minute}, {Rate: 40, Duration: 5 * time.Minute}, {Rate: 80, Duration: 2 * time.Minute}}
	lines := formatProgress(p, progressPlan{stages: stages, total: 3, exact: true})
	want := []string{
		"stage 2/3 at 40 req/s: 1m35s of 5m0s, ETA 3m25s (run 5m25s)",
		"  a-sixteen-chars!: 123456 sent (1234.5 req/s), 99999 err, 12345 drop, TTFT p50 12.3ms p99 12.35s",
		"  b: 1 sent (1.0 req/s), 0 err, 0 drop, TTFT -",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	for _, l := range lines {
		if len(l) > 100 {
			t.Errorf("%d columns: %q", len(l), l)
		}
	}
	p.Done = true
	if got := formatProgress(p, progressPlan{total: 12})[0]; got != "stage 2 of at most 12 at 40 req/s: 1m35s of 5m0s, done" {
		t.Errorf("a search's done stage: %q", got)
	}
	var b bytes.Buffer
	plainProgress(&b, progressPlan{stages: stages, total: 3, exact: true})(p)
	if got := b.String(); strings.ContainsAny(got, "\r\x1b") || strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, "bench progress: stage 2/3 at 40 req/s") || !strings.Contains(got, "; b: 1 sent (1.0 req/s)") {
		t.Errorf("plain line %q", got)
	}
}

// TestConsoleLogAroundProgress: on a terminal a log line (bench's or the
// simulator child's) clears the progress block, is written whole on its
// own line, and the block is redrawn below it; a finished stage's block
// stays as its summary and is not cleared by later lines.
func TestConsoleLogAroundProgress(t *testing.T) {
	var term bytes.Buffer // stdout and stderr on one terminal
	c := &console{out: &term}
	logger := slog.New(consoleHandler{slog.NewTextHandler(&term, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}}), c}).With("k", "v")
	child := &lineWriter{c: c, w: &term}
	show := progressPrinter(c, progressPlan{total: 1, exact: true})
	p := bench.Progress{Stage: 1, Stages: 1, Elapsed: time.Second, Duration: 2 * time.Second, RequestedRate: 2,
		Targets: []bench.TargetProgress{{Target: "a", Sent: 2, Rate: 2}, {Target: "b", Sent: 1, Rate: 1}}}
	block := strings.Join(formatProgress(p, progressPlan{total: 1, exact: true}), "\n")
	show(p)
	logger.Info("hello")
	child.Write([]byte("child says"))
	child.Write([]byte(" hi\n"))
	p.Done = true
	show(p)
	done := strings.Join(formatProgress(p, progressPlan{total: 1, exact: true}), "\n")
	logger.Info("after")
	const clear = "\r\x1b[2A\x1b[J" // three lines: back to the first, erase below
	want := block +
		clear + "level=INFO msg=hello k=v\n" + block +
		clear + "child says hi\n" + block +
		clear + done + "\n" +
		"level=INFO msg=after k=v\n"
	if got := term.String(); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}

	// On a narrow terminal the lines are cut, so that none wraps and
	// the block's height stays what the clearing counts.
	term.Reset()
	c = &console{out: &term, width: 20}
	progressPrinter(c, progressPlan{total: 1, exact: true})(p)
	for _, l := range strings.Split(term.String(), "\n") {
		if n := len([]rune(l)); n >= 20 {
			t.Errorf("%d columns on a terminal of 20: %q", n, l)
		}
	}
}
