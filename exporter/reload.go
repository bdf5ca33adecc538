package exporter

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmprobe/llmprobe/config"
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
	err := r.reload()
	if err != nil {
		r.success.Set(0)
		if r.current.Load() != nil {
			r.logger.Error("configuration not loaded; the running configuration is kept", "err", err)
		}
		return err
	}
	r.success.Set(1)
	r.timestamp.Set(float64(r.now().UnixNano()) / 1e9)
	r.logger.Info("configuration loaded", "source", r.current.Load().Source)
	return nil
}

func (r *Reloader) reload() error {
	if r.load == nil {
		return errors.New("no configuration source")
	}
	cfg, err := r.load()
	if err != nil {
		return err
	}
	if cfg == nil {
		return errors.New("configuration source returned no configuration")
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
			return fmt.Errorf("applying configuration: %w", err)
		}
	}
	r.current.Store(cfg)
	return nil
}

// Current returns the running configuration, nil before the first
// successful Reload. It must not be modified.
func (r *Reloader) Current() *config.Config { return r.current.Load() }
