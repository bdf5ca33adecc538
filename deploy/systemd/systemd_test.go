// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package systemd_test checks deploy/systemd/llmprobe.service: its
// commands are command lines the real binary accepts, it reloads by
// signalling its own main process, it is hardened, secrets reach it as
// credentials, and systemd-analyze verify accepts it.
package systemd_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/internal/proctest"
)

const unitFile = "llmprobe.service"

// The paths the unit names.
const (
	unitBinary = "/usr/local/bin/llmprobe"
	unitConfig = "/etc/llmprobe/llmprobe.yml"
	// credentialPath is where the configuration reads the API key
	// LoadCredential hands over (the unit's comment says so).
	credentialPath = "/run/credentials/llmprobe.service/api-key"
)

// unit is a parsed unit file: section -> key -> values in order (a key
// may repeat: ExecReload=, SystemCallFilter=).
type unit map[string]map[string][]string

func (u unit) one(t *testing.T, section, key string) string {
	t.Helper()
	v := u[section][key]
	if len(v) != 1 {
		t.Fatalf("[%s] %s= is set %d times, want once", section, key, len(v))
	}
	return v[0]
}

// parseUnit reads a unit file as systemd does: sections, Key=Value,
// comments (# and ;) and lines continued with a trailing backslash.
func parseUnit(t *testing.T, data []byte) unit {
	t.Helper()
	u := unit{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	var cont strings.Builder
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if cont.Len() > 0 {
			// Inside a continuation, comment lines are skipped.
			if trimmed := strings.TrimSpace(line); strings.HasPrefix(trimmed, "#") || strings.HasPrefix(trimmed, ";") {
				continue
			}
		} else {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
				continue
			}
			if strings.HasPrefix(line, "[") {
				if !strings.HasSuffix(line, "]") {
					t.Fatalf("%s:%d: bad section header %q", unitFile, n, line)
				}
				section = line[1 : len(line)-1]
				if u[section] == nil {
					u[section] = map[string][]string{}
				}
				continue
			}
		}
		if s, ok := strings.CutSuffix(line, `\`); ok {
			cont.WriteString(s)
			cont.WriteByte(' ')
			continue
		}
		cont.WriteString(line)
		full := cont.String()
		cont.Reset()
		key, value, ok := strings.Cut(full, "=")
		if !ok || section == "" {
			t.Fatalf("%s:%d: not Key=Value in a section: %q", unitFile, n, full)
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		u[section][key] = append(u[section][key], value)
	}
	if cont.Len() > 0 {
		t.Fatalf("%s: ends inside a continued line", unitFile)
	}
	return u
}

// splitCommand splits an Exec*= value into words as systemd does for
// the forms used here (whitespace, double and single quotes), after
// dropping the leading special prefixes (-, @, :, +, !).
func splitCommand(t *testing.T, s string) []string {
	t.Helper()
	s = strings.TrimLeft(s, "-@:+!")
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		t.Fatalf("unterminated quote in %q", s)
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

func readUnit(t *testing.T) (unit, []byte) {
	t.Helper()
	data, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	return parseUnit(t, data), data
}

func TestMain(m *testing.M) { proctest.Main(m) }

// TestUnitSettings: the reload, stop, hardening and secrets settings the
// documentation relies on.
func TestUnitSettings(t *testing.T) {
	u, data := readUnit(t)
	svc := u["Service"]
	if svc == nil {
		t.Fatal("no [Service] section")
	}
	// Reload signals this unit's main process only (never every llmprobe
	// on the host), after checking the file.
	reload := svc["ExecReload"]
	if len(reload) == 0 || reload[len(reload)-1] != "/bin/kill -HUP $MAINPID" {
		t.Errorf("the last ExecReload= is %q, want /bin/kill -HUP $MAINPID", reload)
	}
	if len(reload) > 1 {
		if w := splitCommand(t, reload[0]); len(w) < 2 || w[0] != unitBinary || w[1] != "check-config" {
			t.Errorf("the first ExecReload= is %q, want %s check-config ...", reload[0], unitBinary)
		}
	}
	for key, want := range map[string]string{
		"DynamicUser":             "yes",
		"NoNewPrivileges":         "yes",
		"ProtectSystem":           "strict",
		"ProtectHome":             "yes",
		"PrivateTmp":              "yes",
		"PrivateDevices":          "yes",
		"CapabilityBoundingSet":   "",
		"RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
		"Restart":                 "on-failure",
	} {
		if got := u.one(t, "Service", key); got != want {
			t.Errorf("%s=%s, want %s", key, got, want)
		}
	}
	// The stop timeout covers the default shutdown grace period (25s)
	// and 10s of HTTP and span shutdown.
	stop, err := time.ParseDuration(u.one(t, "Service", "TimeoutStopSec"))
	if err != nil || stop < 35*time.Second {
		t.Errorf("TimeoutStopSec=%s, want at least 35s", u.one(t, "Service", "TimeoutStopSec"))
	}
	// Secrets arrive as credentials or from an environment file, never
	// inline.
	creds := svc["LoadCredential"]
	if len(creds) == 0 || !strings.HasPrefix(creds[0], "api-key:") {
		t.Errorf("LoadCredential=%q, want api-key:...", creds)
	}
	if !bytes.Contains(data, []byte("credentials_file: "+credentialPath)) {
		t.Errorf("the unit does not show the configuration reading the credential from %s", credentialPath)
	}
	secretish := regexp.MustCompile(`(?i)(key|token|secret|password|passwd|credential|authorization|bearer)`)
	for _, env := range svc["Environment"] {
		if secretish.MatchString(env) {
			t.Errorf("Environment=%s looks like an inline secret; use LoadCredential or EnvironmentFile", env)
		}
	}
	for _, key := range []string{"SetCredential", "SetCredentialEncrypted"} {
		if len(svc[key]) > 0 {
			t.Errorf("%s= puts a secret in the unit file", key)
		}
	}
	if u.one(t, "Install", "WantedBy") != "multi-user.target" {
		t.Error("[Install] WantedBy is not multi-user.target")
	}
}

// TestUnitCommands: every command of the unit is a command line the
// real binary accepts, and does what the unit means: check-config passes
// on a configuration that reads the credential, `run` with ExecStart's
// exact flags serves and is ready, and ExecReload's commands (check,
// then SIGHUP to the main pid) reload it.
func TestUnitCommands(t *testing.T) {
	u, _ := readUnit(t)
	dir := t.TempDir()
	bin := proctest.LLMProbe.Path(t)

	// The machine the unit expects, under dir: the credential the
	// configuration reads, the cache directory.
	cacheDir := filepath.Join(dir, "cache")
	credDir := filepath.Join(dir, "credentials")
	for _, d := range []string{cacheDir, credDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(credDir, "api-key"), []byte("s3cr3t-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A target the daemon probes: a closed port is enough (the requests
	// fail; the configuration is what is checked).
	closed := proctest.FreeAddr(t)
	configFile := filepath.Join(dir, "llmprobe.yml")
	cfg := fmt.Sprintf(`global: {shutdown_grace_period: 1s}
workloads:
  w: {classes: [{name: c, prompt_tokens: 8, output_tokens: 2}]}
targets:
  - name: api
    url: http://%s/v1
    model: m
    workload: w
    arrival: {rate: 0.1}
    http_client_config:
      authorization: {credentials_file: %s}
`, closed, filepath.Join(credDir, "api-key"))
	if err := os.WriteFile(configFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// localize turns a command of the unit into this test's: the binary,
	// the configuration and the listen address it uses, and the
	// environment systemd would expand.
	localize := func(line, addr string) []string {
		t.Helper()
		words := splitCommand(t, line)
		for i, w := range words {
			w = strings.ReplaceAll(w, "${CACHE_DIRECTORY}", cacheDir)
			w = strings.ReplaceAll(w, unitConfig, configFile)
			if strings.HasPrefix(w, "--web.listen-address=") {
				w = "--web.listen-address=" + addr
			}
			if strings.Contains(w, "$") {
				t.Fatalf("a variable the test does not know in %q", line)
			}
			words[i] = w
		}
		if words[0] == unitBinary {
			words[0] = bin
		}
		return words
	}

	start := splitCommand(t, u.one(t, "Service", "ExecStart"))
	if start[0] != unitBinary || start[1] != "run" {
		t.Fatalf("ExecStart=%q, want %s run ...", start, unitBinary)
	}
	// The exact flags parse (--help exits 0 only when they do: a bad
	// flag is exit code 2).
	if r := proctest.Run(t, bin, nil, append(start[1:], "--help")...); r.Code != 0 {
		t.Errorf("llmprobe %s --help: exit code %d\n%s%s", strings.Join(start[1:], " "), r.Code, r.Stdout, r.Stderr)
	}
	for _, f := range []string{"--config.file", "--web.listen-address", "--selftest.file"} {
		if !strings.Contains(u.one(t, "Service", "ExecStart"), f+"=") {
			t.Errorf("ExecStart does not set %s", f)
		}
	}

	for _, line := range append(u["Service"]["ExecStartPre"], u["Service"]["ExecReload"][:len(u["Service"]["ExecReload"])-1]...) {
		args := localize(line, "")
		if r := proctest.Run(t, args[0], nil, args[1:]...); r.Code != 0 {
			t.Errorf("%s: exit code %d\n%s%s", line, r.Code, r.Stdout, r.Stderr)
		} else if !strings.Contains(r.Stdout+r.Stderr, "SUCCESS") {
			t.Errorf("%s: %s%s", line, r.Stdout, r.Stderr)
		}
	}

	daemon, base := proctest.StartServer(t, bin, "/-/ready", proctest.Options{}, func(addr string) []string {
		return localize(u.one(t, "Service", "ExecStart"), addr)[1:]
	})
	defer func() { _ = daemon.Stop(20 * time.Second) }() // how it exits is not what this test judges

	// ExecReload: check, then kill -HUP $MAINPID.
	reload := u["Service"]["ExecReload"]
	kill := strings.Fields(strings.ReplaceAll(reload[len(reload)-1], "$MAINPID", fmt.Sprint(daemon.Pid())))
	if out, err := exec.Command(kill[0], kill[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(kill, " "), err, out)
	}
	waitFor(t, "SIGHUP did not reload", func() bool {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		// Two successful loads: the start and the reload.
		return regexp.MustCompile(`(?m)^llmprobe_config_last_reload_successful 1$`).Match(b) &&
			strings.Count(daemon.Stderr(), "configuration loaded") >= 2
	})
	if daemon.Exited() {
		t.Fatalf("the daemon exited: %v\n%s", daemon.Err(), daemon.Stderr())
	}
}

// TestSystemdAnalyzeVerify: systemd's own check of the unit, with the
// binary it names present.
func TestSystemdAnalyzeVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	dir := t.TempDir()
	bin := proctest.LLMProbe.Path(t)
	data, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	unitPath := filepath.Join(dir, unitFile)
	if err := os.WriteFile(unitPath, bytes.ReplaceAll(data, []byte(unitBinary), []byte(bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, analyze, "verify", unitPath).CombinedOutput()
	if err != nil {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	// verify reports some problems without failing.
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, unitFile) {
			t.Errorf("systemd-analyze verify: %s", l)
		}
	}
}

func status(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func waitFor(t *testing.T, msg string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
