// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	commoncfg "github.com/prometheus/common/config"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/probe/wire"
)

// ApplyFunc takes a new configuration into use, or refuses it with an
// error and leaves everything as it was. (*probe.Engine).Apply is one.
type ApplyFunc func(*config.Config) error

// Infallible adapts a setter that cannot refuse a configuration, such as
// (*Metrics).SetConfig and (*Recent).SetConfig, to an ApplyFunc.
func Infallible(set func(*config.Config)) ApplyFunc {
	return func(c *config.Config) error {
		set(c)
		return nil
	}
}

// Reloader loads the configuration, hands it to every applier and keeps
// the one running. A configuration is swapped in only if it loaded and
// validated AND every applier accepted it; otherwise the running one stays
// and the error is logged and returned. Reloads are serialised, so SIGHUP
// and POST /-/reload may race freely.
type Reloader struct {
	load     func() (*config.Config, error)
	appliers []ApplyFunc
	logger   *slog.Logger
	now      func() time.Time

	mu      sync.Mutex // serialises reloads
	current atomic.Pointer[config.Config]
	status  atomic.Pointer[ReloadStatus]

	success   prometheus.Gauge
	timestamp prometheus.Gauge
}

func NewReloader(load func() (*config.Config, error), logger *slog.Logger, reg prometheus.Registerer, appliers ...ApplyFunc) *Reloader {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r := &Reloader{
		load:     load,
		appliers: appliers,
		logger:   logger,
		now:      time.Now,
		success: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace,
			Name:      "config_last_reload_successful",
			Help:      "1 if the last configuration load or reload succeeded, 0 if it failed (the previous configuration keeps running).",
		}),
		timestamp: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace,
			Name:      "config_last_reload_success_timestamp_seconds",
			Help:      "Unix time of the last successful configuration load or reload.",
		}),
	}
	if reg != nil {
		reg.MustRegister(r.success, r.timestamp)
	}
	return r
}

// Reload loads and validates the configuration and applies it. On any
// error the running configuration is kept, llmprobe_config_last_reload_successful
// drops to 0, and the error (naming file, line and field for a bad file)
// is returned, and logged when a configuration is running (the first load's
// error is the caller's to report).
func (r *Reloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	prev := r.status.Load()
	cand, err := r.reload()
	if err != nil {
		// The error may quote the file (a value in the wrong field) or an
		// applier's complaint: the secrets of the running configuration and
		// of the refused one are scrubbed before it is logged, returned or
		// shown.
		rerr := &ReloadError{msg: scrubConfigText(err.Error(), r.current.Load(), cand), err: err}
		st := &ReloadStatus{Time: now, Failed: true, Error: rerr.msg}
		if prev != nil {
			st.LastSuccess = prev.LastSuccess
		}
		r.status.Store(st)
		r.success.Set(0)
		if r.current.Load() != nil {
			r.logger.Error("configuration not loaded; the running configuration is kept", "err", rerr.msg)
		}
		return rerr
	}
	r.status.Store(&ReloadStatus{Time: now, LastSuccess: now})
	r.success.Set(1)
	r.timestamp.Set(float64(now.UnixNano()) / 1e9)
	r.logger.Info("configuration loaded", "source", r.current.Load().Source)
	return nil
}

// ReloadStatus is the outcome of the last configuration load or reload.
type ReloadStatus struct {
	Time        time.Time // of the last attempt
	Failed      bool
	Error       string    // the failure, secrets scrubbed; one problem per line
	LastSuccess time.Time // zero before the first success
}

// ErrorLines returns the failure one problem per line, each made safe to
// show (no control characters, bounded length), at most maxReloadLines.
func (s ReloadStatus) ErrorLines() []string {
	if s.Error == "" {
		return nil
	}
	lines := strings.Split(s.Error, "\n")
	var out []string
	for i, l := range lines {
		if i == maxReloadLines {
			out = append(out, fmt.Sprintf("… and %d more", len(lines)-i))
			break
		}
		out = append(out, sanitize(l))
	}
	return out
}

// maxReloadLines bounds the problems of a refused file the page lists.
const maxReloadLines = 20

// Status returns the outcome of the last load or reload (ok is false
// before the first attempt).
func (r *Reloader) Status() (s ReloadStatus, ok bool) {
	if p := r.status.Load(); p != nil {
		return *p, true
	}
	return ReloadStatus{}, false
}

// ReloadError is a refused load or reload. Its message has the secrets of
// the running and of the refused configuration scrubbed; Unwrap returns
// the original error (config.Errors for a bad file), whose own message is
// not scrubbed.
type ReloadError struct {
	msg string
	err error
}

func (e *ReloadError) Error() string { return e.msg }
func (e *ReloadError) Unwrap() error { return e.err }

// reload loads and applies a configuration; on failure it returns the
// candidate when it loaded (so its secrets can be scrubbed too).
func (r *Reloader) reload() (*config.Config, error) {
	if r.load == nil {
		return nil, errors.New("no configuration source")
	}
	cfg, err := r.load()
	if err != nil {
		return cfg, err
	}
	if cfg == nil {
		return nil, errors.New("configuration source returned no configuration")
	}
	for i, apply := range r.appliers {
		if err := apply(cfg); err != nil {
			if cur := r.current.Load(); cur != nil {
				for j := range i {
					if rerr := r.appliers[j](cur); rerr != nil {
						r.logger.Error("restoring the running configuration failed", "err", rerr)
					}
				}
			}
			return cfg, fmt.Errorf("applying configuration: %w", err)
		}
	}
	r.current.Store(cfg)
	return nil, nil
}

// scrubConfigText removes from s every secret the given configurations
// declare (nil ones are skipped), with probe's Redactor: the targets' and
// workload_from's, server_metrics' and diagnosis.prometheus' HTTP client secrets (inline and files, in their common
// encodings) and the tracing headers.
func scrubConfigText(s string, cfgs ...*config.Config) string {
	for _, c := range cfgs {
		if c == nil {
			continue
		}
		for _, t := range c.Targets {
			if t == nil {
				continue
			}
			s = wire.NewRedactor(t.HTTPClientConfig).Scrub(s)
			if wf := t.WorkloadFrom; wf != nil && wf.Prometheus != nil {
				s = wire.NewRedactor(wf.Prometheus.HTTPClientConfig).Scrub(s)
			}
			if sm := t.ServerMetrics; sm != nil {
				s = wire.NewRedactor(sm.HTTPClientConfig).Scrub(s)
			}
		}
		if p := c.Global.Diagnosis.Prometheus; p != nil {
			s = wire.NewRedactor(p.HTTPClientConfig).Scrub(s)
		}
		if len(c.Tracing.Headers) > 0 {
			h := commoncfg.Header{}
			for _, v := range c.Tracing.Headers {
				h.Secrets = append(h.Secrets, v)
			}
			s = wire.NewRedactor(commoncfg.HTTPClientConfig{HTTPHeaders: &commoncfg.Headers{Headers: map[string]commoncfg.Header{"x": h}}}).Scrub(s)
		}
	}
	return s
}

// Current returns the running configuration, nil before the first
// successful Reload. It must not be modified.
func (r *Reloader) Current() *config.Config { return r.current.Load() }
