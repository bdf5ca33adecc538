// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/llmprobe/llmprobe/internal/proctest"
)

// binaryVersion is linked into the test binary's build info, so the tests
// can tell it from any other llmprobe.
const binaryVersion = "0.0.0-e2e"

// BinaryEnv names an environment variable that, when set, makes the tests
// run that llmprobe binary (a release build, say) instead of building one.
const BinaryEnv = "LLMPROBE_E2E_BINARY"

// llmprobe is the binary under test, built on first use.
var llmprobe = &proctest.Binary{
	Env:     BinaryEnv,
	LDFlags: "-X github.com/prometheus/common/version.Version=" + binaryVersion,
}

func TestMain(m *testing.M) { proctest.Main(m, llmprobe) }

// binary returns the llmprobe binary, skipping t in -short mode.
func binary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: builds and runs the llmprobe binary (skipped with -short)")
	}
	return llmprobe.Path(t)
}

// process is a running llmprobe command (see proctest.Start: it is
// stopped when the test ends and must exit 0 then).
type process = proctest.Process

// runCommand runs llmprobe with args to completion (bounded) and returns
// its exit code, stdout and stderr.
func runCommand(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	r := proctest.Run(t, binary(t), nil, args...)
	return r.Code, r.Stdout, r.Stderr
}

// tail returns at most the last n bytes of s.
func tail(s string, n int) string { return proctest.Tail(s, n) }

// startServer starts an llmprobe server command on a free loopback port
// with env added to its environment: args returns the command line for an
// address. It waits until GET readyPath answers 200 and returns the
// process and its base URL.
func startServer(t *testing.T, name, readyPath string, env []string, args func(addr string) []string) (*process, string) {
	t.Helper()
	return proctest.StartServer(t, binary(t), readyPath, proctest.Options{Name: name, Env: env}, args)
}

// simModel is the model the simulator serves and the targets ask for; its
// dot exercises the regex escaping of the dashboards' model variable.
const simModel = "meta-llama/Llama-3.1-8B-Instruct"

// startSim starts `llmprobe sim` serving simModel with extra flags and
// returns its base URL (without /v1).
func startSim(t *testing.T, flags ...string) (*process, string) {
	t.Helper()
	return proctest.StartSim(t, binary(t), proctest.Options{}, append([]string{"--model=" + simModel, "--log.level=debug"}, flags...)...)
}

// startDaemon starts `llmprobe run` with the configuration file and
// returns its base URL once /-/ready answers.
func startDaemon(t *testing.T, configFile string, flags ...string) (*process, string) {
	t.Helper()
	return proctest.StartDaemon(t, binary(t), proctest.Options{}, append([]string{"--config.file=" + configFile, "--web.enable-lifecycle", "--log.level=debug"}, flags...)...)
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
