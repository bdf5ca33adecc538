// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/llmprobe/llmprobe/internal/promtest"
)

// binaryVersion is linked into the test binary's build info, so the tests
// can tell it from any other llmprobe.
const binaryVersion = "0.0.0-e2e"

// BinaryEnv names an environment variable that, when set, makes the tests
// run that llmprobe binary (a release build, say) instead of building one.
const BinaryEnv = "LLMPROBE_E2E_BINARY"

// llmprobeBinary is the path of the binary under test; empty in -short
// mode.
var llmprobeBinary string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// Every test skips itself; nothing to build.
		os.Exit(m.Run())
	}
	if p := os.Getenv(BinaryEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: $%s: %v\n", BinaryEnv, err)
			os.Exit(1)
		}
		llmprobeBinary = p
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "llmprobe-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	start := time.Now()
	llmprobeBinary, err = buildBinary(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	if testing.Verbose() {
		fmt.Printf("e2e: built %s in %s\n", llmprobeBinary, time.Since(start).Round(time.Millisecond))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildBinary builds cmd/llmprobe into dir with the go command on $PATH.
// It is built without -race even when the tests are: the build stays
// fast, and the packages' own tests cover the race detector.
func buildBinary(dir string) (string, error) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("the e2e tests build cmd/llmprobe and need the go command on $PATH: %w", err)
	}
	root, err := promtest.ModuleRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "llmprobe")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gobin, "build",
		"-ldflags", "-X github.com/prometheus/common/version.Version="+binaryVersion,
		"-o", out, "github.com/llmprobe/llmprobe/cmd/llmprobe")
	cmd.Dir = root
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/llmprobe: %w\n%s", err, buf.String())
	}
	return out, nil
}

// binary returns the llmprobe binary, skipping t in -short mode.
func binary(t *testing.T) string {
	t.Helper()
	if testing.Short() || llmprobeBinary == "" {
		t.Skip("end-to-end: builds and runs the llmprobe binary (skipped with -short)")
	}
	return llmprobeBinary
}

// logBuffer is a goroutine-safe, bounded output buffer.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

const maxLogBytes = 8 << 20

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len()+len(p) <= maxLogBytes {
		b.buf.Write(p)
	}
	return len(p), nil
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// stopTimeout is how long a process may take to exit after SIGTERM in
// cleanup before it is killed.
const stopTimeout = 15 * time.Second

// process is a running llmprobe command.
type process struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr logBuffer
	done           chan struct{} // closed when the process has exited
	waitErr        error         // valid once done is closed
	cancel         context.CancelFunc
}

// startProcess starts the llmprobe binary with args. The process gets the
// test's environment without any OTEL_* variable (no tracing unless a test
// asks for it) plus env. It is stopped (SIGTERM, then SIGKILL after
// stopTimeout) when the test ends, and its output is logged if the test
// failed.
func startProcess(t *testing.T, name string, env []string, args ...string) *process {
	t.Helper()
	bin := binary(t)
	ctx, cancel := context.WithCancel(context.Background())
	p := &process{name: name, done: make(chan struct{}), cancel: cancel}
	p.cmd = exec.CommandContext(ctx, bin, args...)
	p.cmd.Cancel = func() error { return p.cmd.Process.Signal(syscall.SIGTERM) }
	p.cmd.WaitDelay = stopTimeout
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.Env = append(cleanEnv(), env...)
	setParentDeathSignal(p.cmd)
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		running := !p.Exited()
		p.cancel() // SIGTERM if still running; SIGKILL after WaitDelay
		select {
		case <-p.done:
			// Every server shuts down cleanly on SIGTERM, whatever the
			// test left it doing.
			if code := p.cmd.ProcessState.ExitCode(); running && code != 0 {
				t.Errorf("%s exited %d after SIGTERM (%v), want 0", name, code, p.waitErr)
			}
		case <-time.After(stopTimeout + 5*time.Second):
			t.Errorf("%s did not exit after SIGTERM and SIGKILL", name)
		}
		if t.Failed() {
			t.Logf("%s (%s) output:\n%s", name, strings.Join(args, " "), tail(p.Output(), 48<<10))
		}
	})
	return p
}

// cleanEnv is the test's environment without OTEL_* variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	return env
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "[...]\n" + s[len(s)-n:]
}

// Output is everything the process wrote, stdout then stderr.
func (p *process) Output() string {
	return "--- stdout\n" + p.stdout.String() + "--- stderr\n" + p.stderr.String()
}

// Stderr is what the process wrote to stderr (promslog's output).
func (p *process) Stderr() string { return p.stderr.String() }

// Signal sends sig to the process.
func (p *process) Signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signalling %s with %v: %v", p.name, sig, err)
	}
}

// Exited reports whether the process has exited.
func (p *process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait waits up to timeout for the process to exit and returns its exit
// code (-1 when a signal killed it). ok is false on timeout.
func (p *process) Wait(timeout time.Duration) (code int, ok bool) {
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode(), true
	case <-time.After(timeout):
		return 0, false
	}
}

// runCommand runs llmprobe with args to completion (bounded to 1 minute)
// and returns its exit code, stdout and stderr.
func runCommand(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), args...)
	cmd.Env = cleanEnv()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("llmprobe %s: timed out\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), o.String(), e.String())
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("llmprobe %s: %v", strings.Join(args, " "), err)
	}
	return cmd.ProcessState.ExitCode(), o.String(), e.String()
}

// freeAddr returns a loopback address whose port was free a moment ago.
// Another process may take it before ours binds it: startServer retries.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// readyTimeout bounds how long a started server may take to be ready.
const readyTimeout = 30 * time.Second

// startServer starts an llmprobe server command on a free loopback port:
// args returns the command line for an address. It waits until GET
// readyPath answers 200 and returns the process and its base URL. A port
// taken in between is retried with another one.
func startServer(t *testing.T, name, readyPath string, env []string, args func(addr string) []string) (*process, string) {
	t.Helper()
	var last *process
	for attempt := 0; attempt < 3; attempt++ {
		addr := freeAddr(t)
		p := startProcess(t, name, env, args(addr)...)
		base := "http://" + addr
		err := waitReady(p, base+readyPath, readyTimeout)
		if err == nil {
			return p, base
		}
		last = p
		if p.Exited() && strings.Contains(p.Stderr(), "address already in use") {
			continue
		}
		t.Fatalf("%s: %v\n%s", name, err, tail(p.Output(), 16<<10))
	}
	t.Fatalf("%s: no free port after 3 attempts\n%s", name, tail(last.Output(), 16<<10))
	return nil, ""
}

var pollClient = &http.Client{Timeout: 2 * time.Second}

// waitReady polls url until it answers 200, the process exits, or timeout.
func waitReady(p *process, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if p.Exited() {
			return fmt.Errorf("exited before %s was ready (%v)", url, p.waitErr)
		}
		resp, err := pollClient.Get(url)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %s", url, timeout)
}

// simModel is the model the simulator serves and the targets ask for; its
// dot exercises the regex escaping of the dashboards' model variable.
const simModel = "meta-llama/Llama-3.1-8B-Instruct"

// startSim starts `llmprobe sim` serving simModel with extra flags and
// returns its base URL (without /v1).
func startSim(t *testing.T, flags ...string) (*process, string) {
	t.Helper()
	return startServer(t, "llmprobe sim", "/health", nil, func(addr string) []string {
		return append([]string{"sim", "--web.listen-address=" + addr, "--model=" + simModel, "--log.level=debug"}, flags...)
	})
}

// startDaemon starts `llmprobe run` with the configuration file and
// returns its base URL once /-/ready answers.
func startDaemon(t *testing.T, configFile string, flags ...string) (*process, string) {
	t.Helper()
	return startServer(t, "llmprobe run", "/-/ready", nil, func(addr string) []string {
		return append([]string{"run", "--config.file=" + configFile, "--web.listen-address=" + addr, "--web.enable-lifecycle", "--log.level=debug"}, flags...)
	})
}

// placeholder matches ${NAME} in configuration fixtures.
var placeholder = regexp.MustCompile(`\$\{([A-Z_]+)\}`)

// renderFixture reads testdata/name, substitutes ${NAME} placeholders with
// vars (every placeholder must have a value) and returns the result.
func renderFixture(t *testing.T, name string, vars map[string]string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	out := placeholder.ReplaceAllStringFunc(string(raw), func(m string) string {
		key := placeholder.FindStringSubmatch(m)[1]
		v, ok := vars[key]
		if !ok {
			missing = append(missing, key)
		}
		return v
	})
	if len(missing) > 0 {
		t.Fatalf("testdata/%s: no value for %s", name, strings.Join(missing, ", "))
	}
	return out
}

// writeFileAtomic replaces path with data through a rename, so a reload
// never reads a half-written file.
func writeFileAtomic(t *testing.T, path, data string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// httpDo sends a request and returns the status, headers and body.
func httpDo(t *testing.T, method, url string, header http.Header) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	client := &http.Client{Timeout: 15 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return resp.StatusCode, resp.Header, string(body)
}

// get fetches url and fails t unless it answers 200.
func get(t *testing.T, url string) string {
	t.Helper()
	code, _, body := httpDo(t, http.MethodGet, url, nil)
	if code != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d: %.500s", url, code, body)
	}
	return body
}

// exposition is a parsed text-format scrape.
type exposition map[string]*dto.MetricFamily

// scrape fetches base/metrics in the text format and parses it.
func scrape(t *testing.T, base string) (exposition, string) {
	t.Helper()
	text := get(t, base+"/metrics")
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parsing %s/metrics: %v", base, err)
	}
	return mfs, text
}

// labelsOf returns a metric's labels as a map.
func labelsOf(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func matches(m *dto.Metric, want map[string]string) bool {
	got := labelsOf(m)
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// value is a counter's or gauge's value, or a histogram's sample count.
func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

// sum adds up the series of family name whose labels include want; found
// is false when no series matched.
func (e exposition) sum(name string, want map[string]string) (total float64, found bool) {
	mf := e[name]
	if mf == nil {
		return 0, false
	}
	for _, m := range mf.GetMetric() {
		if matches(m, want) {
			total += value(m)
			found = true
		}
	}
	return total, found
}

// labelValues returns the distinct values of label among family name's
// series.
func (e exposition) labelValues(name, label string) map[string]bool {
	out := map[string]bool{}
	if mf := e[name]; mf != nil {
		for _, m := range mf.GetMetric() {
			if v, ok := labelsOf(m)[label]; ok {
				out[v] = true
			}
		}
	}
	return out
}

// pollScrape scrapes base/metrics until cond accepts it or timeout; it
// fails t with what on timeout and returns the accepted exposition.
func pollScrape(t *testing.T, base string, timeout time.Duration, what string, cond func(exposition) bool) exposition {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		mfs, text := scrape(t, base)
		if cond(mfs) {
			return mfs
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s\nlast /metrics (llmprobe_* lines):\n%s", timeout, what, grepLines(text, "llmprobe_", 200))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// grepLines returns at most n lines of s that contain sub.
func grepLines(s, sub string, n int) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
			if len(out) == n {
				out = append(out, "[...]")
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// keyPosition returns the 1-based line and column of the first YAML key
// named key in text (a key, not a longer key it prefixes).
func keyPosition(t *testing.T, text, key string) (line, col int) {
	t.Helper()
	re := regexp.MustCompile(`(^|[\s{,])` + regexp.QuoteMeta(key) + `:`)
	for i, l := range strings.Split(text, "\n") {
		if loc := re.FindStringIndex(l); loc != nil {
			c := loc[0]
			if l[c] != key[0] {
				c++ // skip the separator the match started with
			}
			return i + 1, c + 1
		}
	}
	t.Fatalf("key %q not found", key)
	return 0, 0
}

// position formats file:line:column as config errors do.
func position(file string, line, col int) string {
	return file + ":" + strconv.Itoa(line) + ":" + strconv.Itoa(col)
}
