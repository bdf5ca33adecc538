// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestParseCPUStat(t *testing.T) {
	v2 := "usage_usec 1000\nuser_usec 600\nsystem_usec 400\nnr_periods 50\nnr_throttled 5\nthrottled_usec 250000\nnr_bursts 0\nburst_usec 0\n"
	p, tp, th, ok := parseCPUStat([]byte(v2), true)
	if !ok || p != 50 || tp != 5 || th != 250*time.Millisecond {
		t.Errorf("v2: %d %d %v %v", p, tp, th, ok)
	}
	v1 := "nr_periods 21\nnr_throttled 21\nthrottled_time 1605199352\nnr_bursts 0\nburst_time 0\n"
	p, tp, th, ok = parseCPUStat([]byte(v1), false)
	if !ok || p != 21 || tp != 21 || th != 1605199352 {
		t.Errorf("v1: %d %d %v %v", p, tp, th, ok)
	}
	if _, _, _, ok := parseCPUStat([]byte("usage_usec 5\n"), true); ok {
		t.Error("a cpu.stat without throttling fields (no CPU controller) parsed")
	}
}

func TestFindCPUStat(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string { return writeTree(t, dir, name, content) }
	write("v1/cpu/kubepods/pod1/cpu.stat", "nr_periods 0\n")
	write("v2/kubepods.slice/pod2/cpu.stat", "nr_periods 0\n")
	for _, tc := range []struct {
		name, cgroup, mountinfo, want string
		v2                            bool
	}{
		{"v2", "0::/kubepods.slice/pod2\n",
			"30 23 0:26 / " + dir + "/v2 rw,nosuid - cgroup2 cgroup2 rw\n", dir + "/v2/kubepods.slice/pod2/cpu.stat", true},
		{"v1", "12:cpu,cpuacct:/kubepods/pod1\n1:name=systemd:/x\n0::/\n",
			"31 23 0:28 / " + dir + "/v1/cpu rw - cgroup cgroup rw,cpu,cpuacct\n40 23 0:29 / " + dir + "/v2 rw - cgroup2 cgroup2 rw\n", dir + "/v1/cpu/kubepods/pod1/cpu.stat", false},
		{"none", "0::/nowhere\n", "30 23 0:26 / " + dir + "/v2 rw - cgroup2 cgroup2 rw\n", "", false},
	} {
		cg, mi := write(tc.name+".cgroup", tc.cgroup), write(tc.name+".mountinfo", tc.mountinfo)
		got, v2 := findCPUStat(cg, mi)
		if got != tc.want || v2 != tc.v2 {
			t.Errorf("%s: %q v2=%v, want %q v2=%v", tc.name, got, v2, tc.want, tc.v2)
		}
	}
}

// TestHarnessMonitorSeesSchedulerLatency: goroutines that queue behind
// busy ones show up in the Go scheduler figures.
func TestHarnessMonitorSeesSchedulerLatency(t *testing.T) {
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	m := NewMonitor(10 * time.Second)
	var wg sync.WaitGroup
	stop := time.Now().Add(300 * time.Millisecond)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				for i := 0; i < 1e6; i++ {
				}
				runtime.Gosched()
			}
		}()
	}
	wg.Wait()
	m.Sample(time.Now())
	st := m.Stats(time.Microsecond)
	if st.SchedEvents == 0 || st.SchedOver == 0 || st.SchedP99 <= 0 || st.Inflation < st.SchedP99 {
		t.Fatalf("scheduler figures: %+v", st)
	}
	if runtime.GOOS == "linux" && !st.HasSchedstat {
		t.Errorf("no schedstat on Linux: %+v", st)
	}
	tot := m.Totals()
	if len(tot.SchedBuckets) != len(tot.SchedCounts) || len(tot.SchedCounts) == 0 {
		t.Fatalf("totals: %d buckets, %d counts", len(tot.SchedBuckets), len(tot.SchedCounts))
	}
}

// TestHeartbeatRecordsWakeUps: the heartbeat wakes every 10 ms and its
// lateness shows in the window's figures and the totals.
func TestHeartbeatRecordsWakeUps(t *testing.T) {
	m := NewMonitor(10 * time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Heartbeat(ctx)
	}()
	time.Sleep(300 * time.Millisecond)
	cancel()
	<-done
	m.Sample(time.Now())
	st := m.Stats(time.Hour)
	if st.WakeEvents < 10 || st.WakeEvents > 40 || st.WakeOver != 0 || st.WakeP99 <= 0 || st.Inflation < st.WakeP99 {
		t.Fatalf("heartbeat figures over 300 ms: %+v", st)
	}
	tot := m.Totals()
	var n uint64
	for _, c := range tot.WakeCounts {
		n += c
	}
	if n != st.WakeEvents || len(tot.WakeBuckets) != len(tot.WakeCounts) {
		t.Fatalf("totals: %d wake-ups in %d buckets, window %d", n, len(tot.WakeBuckets), st.WakeEvents)
	}
}

// TestCgroupMemoryLimit: the soft memory limit comes from the least limit
// of the process' cgroup and its visible parents, v2 or v1; "max" and
// v1's unlimited are no limit.
func TestCgroupMemoryLimit(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string { return writeTree(t, dir, name, content) }
	write("v2/memory.max", "max\n")
	write("v2/kubepods.slice/memory.max", "2147483648\n")
	write("v2/kubepods.slice/pod/memory.max", "536870912\n")
	write("v2/system.slice/memory.max", "1073741824\n")
	write("v2/system.slice/llmprobe.service/memory.max", "max\n")
	write("v2/free/memory.max", "max\n")
	write("v1/memory/docker/abc/memory.limit_in_bytes", "268435456\n")
	write("v1/memory/unlimited/memory.limit_in_bytes", "9223372036854771712\n")
	v2 := "30 23 0:26 / " + dir + "/v2 rw,nosuid - cgroup2 cgroup2 rw\n"
	v1 := "31 23 0:28 / " + dir + "/v1/memory rw - cgroup cgroup rw,memory\n"
	for _, tc := range []struct {
		name, cgroup, mountinfo string
		want                    int64
		ok                      bool
	}{
		{"v2 pod", "0::/kubepods.slice/pod\n", v2, 512 << 20, true},
		{"v2 parent", "0::/system.slice/llmprobe.service\n", v2, 1 << 30, true},
		{"v2 none", "0::/free\n", v2, 0, false},
		{"v2 namespace", "0::/\n", "30 23 0:26 / " + dir + "/v2/kubepods.slice/pod rw - cgroup2 cgroup2 rw\n", 512 << 20, true},
		{"v2 mount root", "0::/kubepods.slice/pod\n", "30 23 0:26 /kubepods.slice/pod " + dir + "/v2/kubepods.slice/pod rw - cgroup2 cgroup2 rw\n", 512 << 20, true},
		{"v1", "4:memory:/docker/abc\n0::/\n", v1, 256 << 20, true},
		{"v1 unlimited", "4:cpu,memory:/unlimited\n", v1, 0, false},
		{"no cgroup", "", v2, 0, false},
	} {
		cg, mi := write(tc.name+".cgroup", tc.cgroup), write(tc.name+".mountinfo", tc.mountinfo)
		got, ok := cgroupMemoryLimit(cg, mi)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: %d %v, want %d %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// writeTree writes content to dir/name, making the directories on the
// way, and returns the path.
func writeTree(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
