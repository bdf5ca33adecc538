// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/internal/testio"
	"github.com/llmprobe/llmprobe/probe/wire"
)

// changeLog is an IdentityObserver that keeps the changes.
type changeLog []IdentityChange

func (c *changeLog) IdentityChanged(ch IdentityChange) { *c = append(*c, ch) }

// TestIdentityDebounce: the first value is learned; a new one becomes
// current after IdentityConfirmations responses in a row carry it;
// interleaved values (a load balancer over two builds) never do; a
// response that leaves a value out changes nothing.
func TestIdentityDebounce(t *testing.T) {
	var log changeLog
	tr := newIdentityTracker("t", slog.New(slog.DiscardHandler), &log, "")
	fp := func(v string, n int) {
		for range n {
			tr.observe(nil, "", v, "")
		}
	}
	fp("fp-a", 1)
	if st := tr.status(); st.Current.Fingerprint != "fp-a" || st.Changes[IdentityFingerprint] != 0 || len(log) != 0 {
		t.Fatalf("after the first value: %+v, %v", st, log)
	}
	for range 100 { // round-robin over two builds
		fp("fp-b", 1)
		fp("fp-a", 1)
	}
	fp("fp-b", IdentityConfirmations-1)
	fp("fp-a", 1)
	fp("", 50)
	if st := tr.status(); st.Current.Fingerprint != "fp-a" || st.Changes[IdentityFingerprint] != 0 || len(log) != 0 {
		t.Fatalf("after interleaving: %+v, %v", st, log)
	}
	fp("fp-b", IdentityConfirmations)
	st := tr.status()
	if st.Current.Fingerprint != "fp-b" || st.Changes[IdentityFingerprint] != 1 || len(log) != 1 || st.LastChange.IsZero() {
		t.Fatalf("after %d in a row: %+v, %v", IdentityConfirmations, st, log)
	}
	if ch := log[0]; ch.Target != "t" || ch.What != IdentityFingerprint || ch.From != "fp-a" || ch.To != "fp-b" || !ch.At.Equal(st.LastChange) {
		t.Errorf("change %+v", ch)
	}
	if len(st.Recent) != 1 || st.Recent[0] != log[0] {
		t.Errorf("recent %+v", st.Recent)
	}
	// Versions need VersionConfirmations polls in a row.
	tr.observeVersion(wire.VersionInfo{Endpoint: "/version", Version: "0.1.0"})
	tr.observeVersion(wire.VersionInfo{Endpoint: "/version", Version: "0.2.0"})
	tr.observeVersion(wire.VersionInfo{Endpoint: "/version", Version: "0.1.0"})
	if st := tr.status(); st.Current.Version != "0.1.0" || st.Changes[IdentityVersion] != 0 || st.VersionEndpoint != "/version" {
		t.Fatalf("versions: %+v", st)
	}
	for range VersionConfirmations {
		tr.observeVersion(wire.VersionInfo{Endpoint: "/version", Version: "0.2.0"})
	}
	if st := tr.status(); st.Current.Version != "0.2.0" || st.Changes[IdentityVersion] != 1 {
		t.Fatalf("versions: %+v", st)
	}
	// The recent list is bounded, newest first.
	for i := range 3 * MaxRecentIdentityChanges {
		tr.observe(nil, "", "", []string{"s1", "s2"}[i%2])
		for range IdentityConfirmations - 1 {
			tr.observe(nil, "", "", []string{"s1", "s2"}[i%2])
		}
	}
	st = tr.status()
	if len(st.Recent) != MaxRecentIdentityChanges || st.Recent[0].At.Before(st.Recent[1].At) || st.Changes[IdentityServer] != uint64(3*MaxRecentIdentityChanges-1) {
		t.Errorf("recent %d, newest %v, server changes %d", len(st.Recent), st.Recent[0].At, st.Changes[IdentityServer])
	}
}

// TestIdentityObserveSettledAllocatesNothing: a response that repeats the
// current identity takes the lock-free path.
func TestIdentityObserveSettledAllocatesNothing(t *testing.T) {
	tr := newIdentityTracker("t", slog.New(slog.DiscardHandler), nil, "")
	hook := tr.inspect("m")
	res := &wire.Result{Outcome: wire.OutcomeSuccess, Model: "m", ResponseModel: "m-served", SystemFingerprint: "fp", Server: "uvicorn"}
	hook(nil, res)
	if n := testing.AllocsPerRun(1000, func() { hook(nil, res) }); n != 0 {
		t.Errorf("observing a settled identity allocates %v times", n)
	}
	if st := tr.status(); st.Current != (TargetIdentity{Model: "m-served", Fingerprint: "fp", Server: "uvicorn"}) {
		t.Errorf("identity %+v", st.Current)
	}
	// Failures and other models' answers are not the target's identity.
	hook(nil, &wire.Result{Outcome: wire.OutcomeHTTPError, Model: "m", ResponseModel: "x", Server: "nginx"})
	for range IdentityConfirmations {
		hook(nil, &wire.Result{Outcome: wire.OutcomeSuccess, Model: "other", ResponseModel: "other-served"})
	}
	if st := tr.status(); st.Current.Model != "m-served" || st.Current.Server != "uvicorn" {
		t.Errorf("identity %+v", st.Current)
	}
}

// TestIdentityRollingDeployOfReplicas: the replicas of a discovery target
// share one identity, each polling its own version endpoint. During a
// rolling deploy their polls interleave the old and the new version, and
// two in a row of the new one came by chance (the identity flipped back
// and forth, each flip cutting the regression baseline); with N replicas a
// new version needs N polls in a row, about one round of all of them.
func TestIdentityRollingDeployOfReplicas(t *testing.T) {
	var log changeLog
	tr := newIdentityTracker("pool", slog.New(slog.DiscardHandler), &log, "")
	tr.pollers.Store(8)
	v := func(s string) { tr.observeVersion(wire.VersionInfo{Endpoint: "/version", Version: s}) }
	v("0.1.0")
	// Half the replicas updated: rounds of 8 polls, 4 of each in a row.
	for range 20 {
		for range 4 {
			v("0.2.0")
		}
		for range 4 {
			v("0.1.0")
		}
	}
	if st := tr.status(); st.Current.Version != "0.1.0" || len(log) != 0 {
		t.Fatalf("mid-rollout: version %q, changes %v", st.Current.Version, log)
	}
	for range 8 { // every replica on the new build
		v("0.2.0")
	}
	if st := tr.status(); st.Current.Version != "0.2.0" || len(log) != 1 {
		t.Fatalf("after the rollout: version %q, changes %v", st.Current.Version, log)
	}
}

// TestIdentityLogBounded: a part's first change is logged at once; the
// changes within a minute of its last line are held and go out as one
// summary a minute after it, each part on its own; a change after a quiet
// minute is logged at once again. Every change is still counted and told.
func TestIdentityLogBounded(t *testing.T) {
	var buf testio.Buffer
	var log changeLog
	tr := newIdentityTracker("t", slog.New(slog.NewTextHandler(&buf, nil)), &log, "")
	t0 := time.Unix(1_700_000_000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	change := func(what, from, to string, s int) {
		tr.announce(nil, IdentityChange{Target: "t", What: what, From: from, To: to, At: at(s)}, at(s))
	}
	lines := func() []string { return strings.Split(strings.TrimSpace(buf.String()), "\n") }

	change(IdentityFingerprint, "a", "b", 0)
	change(IdentityServer, "s1", "s2", 0)
	for s := 1; s <= 20; s++ {
		change(IdentityFingerprint, []string{"b", "a"}[(s+1)%2], []string{"b", "a"}[s%2], s)
	}
	tr.parts[1].current = "a" // what the tracker holds after the last change
	tr.flushLog(at(59))
	if got := lines(); len(got) != 2 || !strings.Contains(got[0], "what=fingerprint from=a to=b") || !strings.Contains(got[1], "what=server from=s1 to=s2") {
		t.Fatalf("within the minute: %q", got)
	}
	tr.flushLog(at(60))
	tr.flushLog(at(61))
	got := lines()
	if len(got) != 3 || !strings.Contains(got[2], `level=WARN msg="target identity flapping" target=t what=fingerprint changes=20 over=1m0s from=b to=a`) {
		t.Fatalf("the summary: %q", got)
	}
	change(IdentityFingerprint, "a", "b", 130)
	if got := lines(); len(got) != 4 || !strings.Contains(got[3], `msg="target identity changed" target=t what=fingerprint from=a to=b`) {
		t.Fatalf("after a quiet minute: %q", got)
	}
	if len(log) != 23 {
		t.Errorf("the observer was told %d changes, want all 23", len(log))
	}
}

// TestIdentityKeyOncePerDeploy: the diagnosis' identity key changes with
// the first confirmed change of a deploy, not again for its other parts
// confirmed within DeployBurst, and again for a later deploy.
func TestIdentityKeyOncePerDeploy(t *testing.T) {
	tr := newIdentityTracker("t", slog.New(slog.DiscardHandler), nil, "test")
	t0 := time.Unix(1_700_000_000, 0)
	k0 := tr.key(t0)
	tr.mu.Lock()
	tr.changes[1]++ // the fingerprint
	tr.mu.Unlock()
	k1 := tr.key(t0.Add(10 * time.Second))
	tr.mu.Lock()
	tr.changes[3]++ // the version, 6 s later
	tr.mu.Unlock()
	k2 := tr.key(t0.Add(16 * time.Second))
	k3 := tr.key(t0.Add(2 * time.Minute))
	tr.mu.Lock()
	tr.changes[1]++ // the next deploy
	tr.mu.Unlock()
	k4 := tr.key(t0.Add(10 * time.Minute))
	if k0 == k1 || k1 != k2 || k2 != k3 || k3 == k4 {
		t.Errorf("keys %q %q %q %q %q: want a change at the first part and at the next deploy only", k0, k1, k2, k3, k4)
	}
}
