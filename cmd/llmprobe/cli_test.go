// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/internal/proctest"
	"github.com/llmprobe/llmprobe/internal/simtest"
	"github.com/llmprobe/llmprobe/sim"
)

// The tests here run the real binary, built once with plain `go build`
// (and once by `make build`, for its -ldflags), as a user would.

func TestMain(m *testing.M) { proctest.Main(m) }

// moduleRoot is the repository root (this package is cmd/llmprobe).
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// binary builds cmd/llmprobe with plain `go build` (no -ldflags) once
// (mixin_test.go uses it too).
func binary(t *testing.T) string {
	t.Helper()
	return proctest.LLMProbe.Path(t)
}

type cliResult struct {
	code           int
	stdout, stderr string
	peakRSS        int64 // bytes (Linux)
	wall           time.Duration
}

// expectUsageError fails t unless r is a usage error: exit code 2 and one
// line of stderr, "llmprobe: error: ..." containing want.
func expectUsageError(t *testing.T, r cliResult, want string) {
	t.Helper()
	if r.code != 2 {
		t.Errorf("exit code %d, want 2 (stderr %q)", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "llmprobe: error: ") || !strings.Contains(lines[0], want) {
		t.Errorf("stderr is not one line \"llmprobe: error: ...%s...\":\n%s", want, r.stderr)
	}
}

// usageCase is a command line and what its usage error must say.
type usageCase struct {
	args []string
	want string
}

// expectBenchUsageErrors runs `bench --sim` with each case's arguments,
// in parallel subtests, and expects each to end as its usage error with
// nothing on standard output (no simulator or stage started).
func expectBenchUsageErrors(t *testing.T, bin string, cases []usageCase) {
	t.Helper()
	expectUsageErrors(t, bin, []string{"bench", "--sim"}, cases)
}

// expectUsageErrors runs the binary with prefix and each case's arguments,
// in parallel subtests, and expects each to end as its usage error with
// nothing on standard output. The subtests are over when it returns.
func expectUsageErrors(t *testing.T, bin string, prefix []string, cases []usageCase) {
	t.Helper()
	t.Run("usage", func(t *testing.T) {
		for _, tt := range cases {
			args := append(slices.Clone(prefix), tt.args...)
			t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
				t.Parallel()
				r := runBinary(t, bin, nil, append(args, "--log.level=error")...)
				expectUsageError(t, r, tt.want)
				if r.stdout != "" {
					t.Errorf("stdout is not empty:\n%s", r.stdout)
				}
			})
		}
	})
}

// runBinary runs the binary with args (and extra environment) to its end.
func runBinary(t *testing.T, bin string, env []string, args ...string) cliResult {
	t.Helper()
	r := proctest.Run(t, bin, env, args...)
	return cliResult{r.Code, r.Stdout, r.Stderr, r.PeakRSS, r.Wall}
}

// TestBadCommandLine: a bad flag, argument or flag value of every
// subcommand is one line on standard error, "llmprobe: error: ...", and
// exit code 2; nothing else is printed (no usage text, no log line, not
// the error twice).
func TestBadCommandLine(t *testing.T) {
	bin := binary(t)
	tests := []struct {
		args []string
		env  []string
		want string // in the error line
	}{
		{args: []string{"--bogus"}, want: "unknown long flag '--bogus'"},
		{args: []string{"--log.level=loud", "check-config", "x.yml"}, want: "unrecognized log level loud"},
		{args: []string{"nosuch-command", "x"}, want: "nosuch-command"},

		{args: []string{"run", "--bogus"}, want: "unknown long flag '--bogus'"},
		{args: []string{"run", "extra-argument"}, want: "extra-argument"},
		{args: []string{"run", "--probe.replicas=many"}, want: "many"},
		{args: []string{"run"}, env: []string{"LLMPROBE_REPLICAS=many"}, want: "many"},
		{args: []string{"run", "--probe.replicas=0"}, want: "--probe.replicas must be at least 1, got 0"},

		{args: []string{"check-config"}, want: "required argument 'file' not provided"},
		{args: []string{"check-config", "--bogus", "x.yml"}, want: "unknown long flag '--bogus'"},

		{args: []string{"sim", "--bogus"}, want: "unknown long flag '--bogus'"},
		{args: []string{"sim", "--sim.max-num-seqs=lots"}, want: "lots"},
		{args: []string{"sim", "--sim.timing-step=soon"}, want: "--sim.timing-step"},

		{args: []string{"bench"}, want: "--config.file is required (or --url and --model for the quick start, --sim for the embedded demo)"},
		{args: []string{"bench", "--sim"}, want: "required flag(s) '--stage' not provided"},
		{args: []string{"bench", "--bogus"}, want: "unknown long flag '--bogus'"},
		{args: []string{"bench", "--sim", "--stage=fast"}, want: `--stage "fast": rate must be a positive number`},
		{args: []string{"bench", "--sim", "--stage=1:never"}, want: `--stage "1:never": invalid duration "never" (a duration is like 30s or 5m)`},
		{args: []string{"bench", "--stage=1"}, want: "--config.file is required"},
		{args: []string{"bench", "--sim", "--stage=1", "--slo=ttft=soon"}, want: "--slo"},
		{args: []string{"bench", "--sim", "--stage=1", "--stage.duration=long"}, want: "long"},

		{args: []string{"fit"}, want: "give exactly one source"},
		{args: []string{"fit", "--bogus"}, want: "unknown long flag '--bogus'"},
		{args: []string{"fit", "--access-log=x.jsonl", "--rate=0"}, want: "--rate must be a positive number"},
		{args: []string{"fit", "--access-log=x.jsonl", "--plot=x.gif"}, want: "x.gif"},
		{args: []string{"fit", "--prometheus.url=http://127.0.0.1:1", "--range=ever"}, want: `--range="ever"`},
		{args: []string{"fit", "--prometheus.url=http://127.0.0.1:1", "--time=noon"}, want: `--time="noon"`},

		{args: []string{"selftest", "--bogus"}, want: "unknown long flag '--bogus'"},
		{args: []string{"selftest", "--step.duration=1s"}, want: "--step.duration must be at least 2s"},
		{args: []string{"selftest", "--start-rate=nope"}, want: "nope"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			r := runBinary(t, bin, tt.env, tt.args...)
			expectUsageError(t, r, tt.want)
			if r.stdout != "" {
				t.Errorf("stdout is not empty:\n%s", r.stdout)
			}
		})
	}
}

// TestPlainErrors: a command that fails (here on a file that does not
// exist) says so in one plain "llmprobe: error: ..." line on standard
// error and exits 1; no structured log line reports it, whatever the
// log format.
func TestPlainErrors(t *testing.T) {
	bin := binary(t)
	missing := filepath.Join(t.TempDir(), "missing")
	notFound := "open " + missing + ": no such file or directory"
	out := filepath.Join(t.TempDir(), "out")
	tests := []struct {
		args []string
		want string // the whole last line of stderr
	}{
		{[]string{"check-config", missing}, "llmprobe: error: 1 of 1 configuration files are invalid"},
		{[]string{"run", "--config.file=" + missing, "--web.listen-address=127.0.0.1:0"}, "llmprobe: error: " + notFound},
		{[]string{"bench", "--config.file=" + missing, "--stage=1:1s"}, "llmprobe: error: " + notFound},
		{[]string{"fit", "--access-log=" + missing, "--output=" + out}, "llmprobe: error: " + notFound},
		{[]string{"selftest", "--config.file=" + missing, "--output="}, "llmprobe: error: " + notFound},
		{[]string{"sim", "--sim.config.file=" + missing, "--web.listen-address=127.0.0.1:0"}, "llmprobe: error: reading simulator config: " + notFound},
	}
	for _, tt := range tests {
		for _, format := range []string{"logfmt", "json"} {
			args := append([]string{"--log.format=" + format}, tt.args...)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				t.Parallel()
				r := runBinary(t, bin, nil, args...)
				if r.code != 1 {
					t.Errorf("exit code %d, want 1", r.code)
				}
				lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
				if last := lines[len(lines)-1]; last != tt.want {
					t.Errorf("last line of stderr = %q, want %q", last, tt.want)
				}
				if !strings.Contains(r.stderr, notFound) {
					t.Errorf("stderr does not say %q:\n%s", notFound, r.stderr)
				}
				for _, l := range lines {
					if strings.Contains(l, "level=ERROR") || strings.Contains(l, `"level":"ERROR"`) {
						t.Errorf("an ERROR log line: %s", l)
					}
				}
			})
		}
	}
}

// TestCheckConfigEveryProblem: check-config lists every problem of a file
// in one run, each file:line:column: field: message, unknown keys and
// missing credential, password and TLS files included (and never a
// secret file's content); run refuses the same file at start with the
// same lines.
func TestCheckConfigEveryProblem(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "password"), []byte("s3cr3t-password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "llmprobe.yml")
	doc := `globall: {warmup: 1s}
workloads:
  w:
    classes:
      - name: c
        prompt_tokens: {dist: lognormal, median: 100, p99: 50, max: 10, bogus: 1}
        output_tokens: 10
targets:
  - name: t
    url: http://127.0.0.1:8000/v1
    model: m
    workload: w
    arrival: {rate: 0, rat: 2}
    slo: {objective: 0.99, ttft: 1s, window: 3q}
    http_client_config:
      authorization: {credentials_file: token}
      tls_config: {ca_file: ca.pem, cert_file: /nonexistent/cert.pem, key_file: key.pem, min_version: TLS99}
  - name: u
    url: http://127.0.0.1:8000/v1
    model: m
    workload: w
    arrival: {rate: 1}
    http_client_config:
      basic_auth: {username: u, password_file: password}
      authorization: {credentials: abc}
      typo: 1
  - name: v
    url: http://127.0.0.1:8000/v1
    model: m
    workload: w
    arrival: {rate: 1}
    http_client_config:
      basic_auth: {username: u, password_file: nopassword}
`
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	in := func(name string) string { return `"` + filepath.Join(dir, name) + `"` }
	want := []string{
		`1:1: globall: unknown field "globall" (did you mean "global"?)`,
		`6:9: workloads.w.classes[0].prompt_tokens: lognormal: p99 (50) must be greater than median (100)`,
		`6:73: workloads.w.classes[0].prompt_tokens.bogus: unknown field "bogus"`,
		`13:15: targets[0].arrival.rate: must be a positive number of requests per second, got 0`,
		`13:24: targets[0].arrival.rat: unknown field "rat"`,
		`14:38: targets[0].slo.window: not a valid duration "3q" (a number and a unit, e.g. 500ms, 30s, 5m, 1h)`,
		`16:23: targets[0].http_client_config.authorization.credentials_file: file ` + in("token") + ` does not exist`,
		`17:20: targets[0].http_client_config.tls_config.ca_file: file ` + in("ca.pem") + ` does not exist`,
		`17:37: targets[0].http_client_config.tls_config.cert_file: file "/nonexistent/cert.pem" does not exist`,
		`17:71: targets[0].http_client_config.tls_config.key_file: file ` + in("key.pem") + ` does not exist`,
		`17:90: targets[0].http_client_config.tls_config.min_version: unknown TLS version: TLS99`,
		`23:5: targets[1].http_client_config: at most one of basic_auth, oauth2 & authorization must be configured`,
		`26:7: targets[1].http_client_config.typo: unknown field "typo"`,
		`33:33: targets[2].http_client_config.basic_auth.password_file: file ` + in("nopassword") + ` does not exist`,
	}
	for i := range want {
		want[i] = file + ":" + want[i]
	}

	r := runBinary(t, bin, nil, "check-config", file)
	if r.code != 1 {
		t.Errorf("check-config exit code %d, want 1", r.code)
	}
	wantOut := "FAILED: " + file + "\n" + strings.Join(want, "\n") + "\nllmprobe: error: 1 of 1 configuration files are invalid\n"
	if r.stderr != wantOut {
		t.Errorf("check-config stderr:\n%s\nwant:\n%s", r.stderr, wantOut)
	}
	if strings.Contains(r.stderr+r.stdout, "s3cr3t") || strings.Contains(r.stderr, "abc") {
		t.Errorf("check-config shows a secret:\n%s", r.stderr)
	}

	r = runBinary(t, bin, nil, "run", "--config.file="+file, "--web.listen-address=127.0.0.1:0")
	if r.code != 1 {
		t.Errorf("run exit code %d, want 1", r.code)
	}
	if wantRun := "llmprobe: error: the configuration is invalid:\n" + strings.Join(want, "\n") + "\n"; !strings.HasSuffix(r.stderr, wantRun) {
		t.Errorf("run stderr:\n%s\nwant it to end with:\n%s", r.stderr, wantRun)
	}
	if strings.Contains(r.stderr, "s3cr3t") {
		t.Errorf("run shows a secret:\n%s", r.stderr)
	}
}

// TestReloadRefusesMissingFiles: the running daemon refuses a
// configuration whose http_client_config names a file that does not
// exist, on POST /-/reload (HTTP 500 with the positioned error) and on
// SIGHUP alike, and keeps probing with the configuration it runs; once
// the file exists the same configuration is taken.
func TestReloadRefusesMissingFiles(t *testing.T) {
	bin := binary(t)
	simCfg := sim.DefaultConfig()
	simCfg.ZeroLatency = true
	_, simBase := simtest.Listen(t, simCfg)

	dir := t.TempDir()
	file := filepath.Join(dir, "llmprobe.yml")
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("s3cr3t-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	config := func(target, credentials string) string {
		return fmt.Sprintf(`global: {warmup: 0s, shutdown_grace_period: 2s}
workloads:
  w: {classes: [{name: c, prompt_tokens: 8, output_tokens: 2}]}
targets:
  - name: %s
    url: %s/v1
    model: sim-model
    workload: w
    arrival: {process: constant, rate: 5}
    http_client_config:
      authorization: {credentials_file: %s}
`, target, simBase, credentials)
	}
	write := func(s string) {
		t.Helper()
		tmp := file + ".tmp"
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	write(config("first", "token"))

	daemon, base := proctest.StartDaemon(t, bin, proctest.Options{}, "--config.file="+file, "--web.enable-lifecycle")
	defer func() {
		_ = daemon.Stop(20 * time.Second) // how it exits is not what this test judges
		if strings.Contains(daemon.Stderr(), "s3cr3t") {
			t.Errorf("the daemon logged a secret:\n%s", daemon.Stderr())
		}
	}()

	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	gauge := func() string {
		t.Helper()
		m := regexp.MustCompile(`(?m)^llmprobe_config_last_reload_successful (\S+)$`).FindStringSubmatch(get("/metrics"))
		if m == nil {
			t.Fatal("no llmprobe_config_last_reload_successful on /metrics")
		}
		return m[1]
	}
	// The target's name as /config prints it (the page's own markup may
	// hold either word).
	running := func(want, not string) {
		t.Helper()
		page := get("/config")
		if !strings.Contains(page, "name: "+want) || strings.Contains(page, "name: "+not) {
			t.Errorf("/config does not show target %q (and not %q):\n%s", want, not, page)
		}
	}
	running("first", "second")

	// A new configuration naming a file that does not exist.
	write(config("second", "missing-token"))
	wantErr := file + `:11:23: targets[0].http_client_config.authorization.credentials_file: file "` + filepath.Join(dir, "missing-token") + `" does not exist`
	resp, err := http.Post(base+"/-/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), wantErr) {
		t.Errorf("POST /-/reload: HTTP %d %s\nwant 500 with %s", resp.StatusCode, body, wantErr)
	}
	if g := gauge(); g != "0" {
		t.Errorf("llmprobe_config_last_reload_successful = %s after a refused reload, want 0", g)
	}
	running("first", "second")

	// SIGHUP: refused the same way, logged.
	daemon.Signal(t, syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(daemon.Stderr(), "missing-token") < 2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := strings.Count(daemon.Stderr(), "missing-token"); n < 2 {
		t.Errorf("the refused SIGHUP reload is not logged:\n%s", daemon.Stderr())
	}
	running("first", "second")

	// The file appears: the same configuration is taken.
	if err := os.WriteFile(filepath.Join(dir, "missing-token"), []byte("s3cr3t-other\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	daemon.Signal(t, syscall.SIGHUP)
	for deadline := time.Now().Add(10 * time.Second); gauge() != "1"; {
		if time.Now().After(deadline) {
			t.Fatalf("the configuration is not taken once its file exists:\n%s", daemon.Stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
	running("second", "first")
}

// TestVersion: --version names the build user and date. `make build`
// sets them (and version, revision, branch) with -ldflags; a plain `go
// build` prints no empty field.
func TestVersion(t *testing.T) {
	field := func(out, name string) string {
		m := regexp.MustCompile(`(?m)^\s*` + name + `:\s*(.*)$`).FindStringSubmatch(out)
		if m == nil {
			return ""
		}
		return strings.TrimSpace(m[1])
	}
	t.Run("go build", func(t *testing.T) {
		r := runBinary(t, binary(t), nil, "--version")
		if r.code != 0 {
			t.Fatalf("exit code %d: %s", r.code, r.stderr)
		}
		if !regexp.MustCompile(`^llmprobe, version \S+ \(branch: \S+, revision: \S+\)\n`).MatchString(r.stdout) {
			t.Errorf("first line has an empty field:\n%s", r.stdout)
		}
		for _, f := range []string{"build user", "build date", "go version", "platform"} {
			if field(r.stdout, f) == "" {
				t.Errorf("%s is empty:\n%s", f, r.stdout)
			}
		}
	})
	t.Run("make build", func(t *testing.T) {
		if _, err := exec.LookPath("make"); err != nil {
			t.Skip("make not installed")
		}
		dir := t.TempDir()
		cmd := exec.Command("make", "--no-print-directory", "-C", moduleRoot(t), "build", "BIN="+dir, "BUILD_USER=builder@buildhost")
		cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=1700000000")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make build: %v\n%s", err, out)
		}
		r := runBinary(t, filepath.Join(dir, "llmprobe"), nil, "--version")
		if r.code != 0 {
			t.Fatalf("exit code %d: %s", r.code, r.stderr)
		}
		if got := field(r.stdout, "build user"); got != "builder@buildhost" {
			t.Errorf("build user = %q, want builder@buildhost:\n%s", got, r.stdout)
		}
		if got := field(r.stdout, "build date"); got != "20231114-22:13:20" {
			t.Errorf("build date = %q, want 20231114-22:13:20 (SOURCE_DATE_EPOCH):\n%s", got, r.stdout)
		}
		rev, err := exec.Command("git", "-C", moduleRoot(t), "rev-parse", "HEAD").Output()
		if err == nil && !strings.Contains(r.stdout, "revision: "+strings.TrimSpace(string(rev))+")") {
			t.Errorf("revision is not %s:\n%s", rev, r.stdout)
		}
		// Without the overrides: the user and host who built it, and now.
		cmd = exec.Command("make", "--no-print-directory", "-C", moduleRoot(t), "build", "BIN="+dir)
		cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make build: %v\n%s", err, out)
		}
		r = runBinary(t, filepath.Join(dir, "llmprobe"), nil, "--version")
		if got := field(r.stdout, "build user"); !regexp.MustCompile(`^\S+@\S+$`).MatchString(got) {
			t.Errorf("build user = %q, want user@host:\n%s", got, r.stdout)
		}
		got, err := time.Parse("20060102-15:04:05", field(r.stdout, "build date"))
		if err != nil || time.Since(got) > time.Hour || time.Since(got) < -time.Minute {
			t.Errorf("build date = %q (%v), want about now:\n%s", field(r.stdout, "build date"), err, r.stdout)
		}
	})
}

// TestDemoFileChecks: the shipped demo configuration passes check-config
// as it is, and `run --demo` (which embeds it) probes the simulator it
// starts: successful requests within seconds.
func TestDemoFileChecks(t *testing.T) {
	bin := binary(t)
	r := runBinary(t, bin, nil, "check-config", filepath.Join(moduleRoot(t), "examples", "demo.yml"))
	if r.code != 0 || !strings.HasPrefix(r.stdout, "SUCCESS: ") || r.stderr != "" {
		t.Errorf("check-config examples/demo.yml: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	daemon, base := proctest.StartServer(t, bin, "/-/ready", proctest.Options{}, func(addr string) []string {
		return []string{"run", "--demo", "--web.listen-address=" + addr}
	})
	defer func() { _ = daemon.Stop(proctest.StopTimeout) }() // how it exits is not what this test judges
	success := regexp.MustCompile(`(?m)^llmprobe_requests_total\{[^}]*outcome="success"[^}]*target="sim-chat"[^}]*\} [1-9]`)
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get(base + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if success.Match(b) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("run --demo: no successful request of sim-chat within 30s:\n%s", daemon.Stderr())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
