// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"reflect"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/exporter"
	"github.com/llmprobe/llmprobe/internal/bounded"
	"github.com/llmprobe/llmprobe/plan"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/sim"
)

// maxWebConfigFile bounds --web.config.file (TLS and basic-auth settings:
// a few KiB).
const maxWebConfigFile = 1 << 20

// runOptions are the run command's flags.
type runOptions struct {
	configFile string
	demo       bool
	replicas   int
	lifecycle  bool
	selftest   string
	web        *web.FlagConfig

	externalURL string
	routePrefix string
}

func registerRun(app *kingpin.Application) command {
	cmd := app.Command("run", "Probe the configured targets continuously and serve the results as Prometheus metrics (the default command).").Default()
	o := &runOptions{}
	cmd.Flag("config.file", "llmprobe configuration file.").Default("llmprobe.yml").StringVar(&o.configFile)
	cmd.Flag("demo", "Start the built-in simulator on a loopback port and probe it with the embedded demo configuration (--config.file is ignored).").BoolVar(&o.demo)
	cmd.Flag("probe.replicas", "Number of llmprobe replicas sharing every target's rate: this process sends rate/replicas (sum the replicas in Prometheus).").Default("1").Envar("LLMPROBE_REPLICAS").IntVar(&o.replicas)
	cmd.Flag("selftest.file", "Result of llmprobe selftest: a warning is logged at start when the configured rate is above the ceiling it measured (without one, the documented ceiling per CPU).").Default(defaultSelftestFile()).StringVar(&o.selftest)
	cmd.Flag("web.enable-lifecycle", "Enable configuration reload over HTTP (POST /-/reload), as Prometheus' flag of the same name; SIGHUP reloads either way.").BoolVar(&o.lifecycle)
	cmd.Flag("web.external-url", "The URL under which llmprobe is externally reachable (for example, if llmprobe is served via a reverse proxy), as Prometheus' flag of the same name. Used for the links and redirects of the status page. If the URL has a path portion, it is used to prefix all HTTP endpoints served by llmprobe (see --web.route-prefix).").PlaceHolder("<URL>").StringVar(&o.externalURL)
	cmd.Flag("web.route-prefix", "Prefix for the internal routes of web endpoints (/metrics, /-/healthy, /-/ready, /-/reload, /, /config). Defaults to the path of --web.external-url.").PlaceHolder("<path>").StringVar(&o.routePrefix)
	o.web = kingpinflag.AddFlags(cmd, ":9477")
	return command{
		clause: cmd,
		run: func(ctx context.Context, logger *slog.Logger) error {
			if o.replicas < 1 {
				return usagef("--probe.replicas must be at least 1, got %d", o.replicas)
			}
			if _, _, err := exporter.ParseWebURLs(o.externalURL, o.routePrefix); err != nil {
				return usagef("%v", err)
			}
			// exporter-toolkit reads the web configuration itself (at
			// start, then at every TLS handshake and request): it must be a
			// file of sane size, not /dev/zero.
			if f := *o.web.WebConfigFile; f != "" {
				if err := bounded.Check(f, maxWebConfigFile); err != nil {
					return fmt.Errorf("--web.config.file: %w", err)
				}
			}
			return runDaemon(ctx, logger, o)
		},
	}
}

// runDaemon is the daemon: load the config (exit on error), start the
// engine and the HTTP surface, reload on SIGHUP and POST /-/reload, and on
// SIGTERM stop scheduling and let in-flight requests finish within the
// grace period.
func runDaemon(ctx context.Context, logger *slog.Logger, o *runOptions) error {
	logger.Info("starting llmprobe", "version", version.Info(), "build_context", version.BuildContext())
	if memLimit.bytes > 0 {
		budget, _ := probe.AnswerBudget()
		logger.Info("soft memory limit", "bytes", memLimit.bytes, "from", memLimit.source, "answer_budget_bytes", budget)
	}

	// A load gives way to SIGTERM/SIGINT (a FIFO, a hung network file
	// system): ctx is cancelled by them.
	load := func() (*config.Config, error) { return config.LoadFileContext(ctx, o.configFile) }
	if o.demo {
		srv, base, simTracing, err := startDemoSim(ctx, logger)
		if err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
			stopTracing(logger, simTracing)
		}()
		logger.Info("demo mode: probing the built-in simulator", "sim_url", base)
		load = func() (*config.Config, error) { return loadDemo(base) }
	}

	// Tracing is set up once, from the configuration at start (the engine
	// takes its tracer when it is built); a reload does not change it.
	initial, err := load()
	if err != nil {
		return invalidConfig(err)
	}
	tracing, err := startTracing(ctx, logger, initial.Tracing, "llmprobe", "")
	if err != nil {
		return err
	}
	defer stopTracing(logger, tracing)
	var tracer trace.Tracer
	var propagator propagation.TextMapPropagator
	if tracing != nil {
		tracer, propagator = tracing.Tracer(), tracing.Propagator()
		if initial.Tracing.RecordContent {
			logger.Warn("tracing.record_content is on: prompt and completion text are recorded on spans")
		}
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		versioncollector.NewCollector("llmprobe"),
	)
	if tracing != nil {
		reg.MustRegister(tracing)
	}
	metrics := exporter.NewMetrics(reg)
	recent := exporter.NewRecent(logger)
	engine := probe.NewEngine(probe.Options{
		Logger:        logger,
		Observer:      probe.Observers{metrics, recent},
		Replicas:      o.replicas,
		UserAgent:     "llmprobe/" + version.Version,
		Tracer:        tracer,
		Propagator:    propagator,
		RecordContent: tracing != nil && initial.Tracing.RecordContent,
	})
	reg.MustRegister(exporter.NewStatusCollector(engine.Status), exporter.NewHarnessCollector(engine.Harness))
	// The plan figures of each configuration, computed in the background
	// after it is applied (docs/plan.md, "In the daemon").
	planner := exporter.NewPlanner(ctx, logger, plan.Options{})
	reg.MustRegister(planner)

	// Metrics learn a config's label sets before the engine starts sending
	// for it, so no early event of a new target is lost.
	reloader := exporter.NewReloader(load, logger, reg,
		exporter.Infallible(metrics.SetConfig),
		exporter.Infallible(recent.SetConfig),
		exporter.Infallible(func(c *config.Config) {
			if !reflect.DeepEqual(c.Tracing, initial.Tracing) {
				logger.Warn("the tracing section changed; it takes effect at the next restart")
			}
		}),
		engine.Apply,
		exporter.Infallible(planner.SetConfig),
	)
	if err := reloader.Reload(); err != nil {
		return err
	}
	warnAboveCeiling(logger, engine.Status(), o.selftest)

	externalURL, routePrefix, err := exporter.ParseWebURLs(o.externalURL, o.routePrefix)
	if err != nil {
		return err
	}
	trackCtx, stopTracking := context.WithCancel(ctx)
	defer stopTracking()
	go recent.Track(trackCtx, engine.Status)

	var ready atomic.Bool
	srv := &http.Server{
		Handler: exporter.NewHandler(exporter.WebOptions{
			Logger:   logger,
			Gatherer: reg,
			Status:   engine.Status,
			Harness:  engine.Harness,
			Recent:   recent,
			Metrics:  metrics,
			Reloader: reloader,
			Planner:  planner,
			Ready:    ready.Load,
			Version:  version.Version,

			EnableLifecycle: o.lifecycle,
			ExternalURL:     externalURL,
			RoutePrefix:     routePrefix,
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- web.ListenAndServe(srv, o.web, logger) }()
	ready.Store(true)

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-hup:
			if rerr := reloader.Reload(); rerr != nil {
				logger.Error("reload failed; the running configuration stays", "err", rerr)
			}
		case err = <-serveErr:
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
			break loop
		}
	}

	ready.Store(false)
	grace := time.Duration(reloader.Current().Global.ShutdownGracePeriod)
	logger.Info("shutting down: scheduling stopped, waiting for in-flight requests", "grace_period", grace)
	gctx, cancel := context.WithTimeout(context.Background(), grace)
	if serr := engine.Shutdown(gctx); serr != nil {
		logger.Warn("grace period over; cancelled the remaining in-flight requests", "err", serr)
	}
	cancel()
	hctx, hcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer hcancel()
	if serr := srv.Shutdown(hctx); serr != nil {
		logger.Warn("http server shutdown", "err", serr)
	}
	if err != nil {
		return fmt.Errorf("serving http: %w", err)
	}
	logger.Info("llmprobe stopped")
	return nil
}

// warnAboveCeiling logs a warning when the targets' requested rates add up
// to more than this host is known to drive with an honest verdict.
func warnAboveCeiling(logger *slog.Logger, status []probe.TargetStatus, selftestFile string) {
	total := 0.0
	for _, s := range status {
		total += s.RequestedRate
	}
	ceiling, source := harnessCeiling(selftestFile)
	if total > ceiling {
		logger.Warn("the configured rate is above what this host drives with an honest verdict; expect llmprobe_harness_saturated (run more replicas, or give llmprobe more CPU)",
			"requested_rate", fmt.Sprintf("%.0f/s", total), "ceiling", fmt.Sprintf("%.0f/s", ceiling), "ceiling_from", source)
	}
}

// startTracing starts the trace pipeline of one service (see
// exporter.NewTracing) when tracing is enabled by cfg or the OTEL_*
// environment; it returns nil otherwise. defaultName is service.name
// unless the environment or cfg names the service; forcedName, when set,
// wins over both.
func startTracing(ctx context.Context, logger *slog.Logger, cfg config.Tracing, defaultName, forcedName string) (*exporter.Tracing, error) {
	t, err := exporter.NewTracing(ctx, exporter.TracingOptions{
		Config:             cfg,
		DefaultServiceName: defaultName,
		ServiceName:        forcedName,
		ServiceVersion:     version.Version,
		Logger:             logger,
	})
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	if t == nil {
		return nil, nil
	}
	otel.SetErrorHandler(exporter.OTelErrorHandler(logger, time.Minute))
	endpoint := t.Endpoint()
	if endpoint == "" {
		endpoint = "(exporter default)"
	}
	// The endpoint without credentials; the headers are never logged.
	logger.Info("tracing requests over OTLP", "protocol", t.Protocol(), "service", t.ServiceName(), "endpoint", endpoint)
	return t, nil
}

// stopTracing flushes and stops a trace pipeline (nil: nothing to do),
// waiting at most 5s for the collector.
func stopTracing(logger *slog.Logger, t *exporter.Tracing) {
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		logger.Warn("tracing shutdown: some spans may not have been exported", "err", err)
	}
	if s := t.Stats(); s.DroppedFull+s.DroppedFailed > 0 {
		logger.Warn("spans were dropped", "queue_full", s.DroppedFull, "export_failed", s.DroppedFailed, "exported", s.Exported)
	}
}

// startDemoSim starts the built-in simulator of demo mode on a loopback
// port. When tracing is enabled by the environment it traces as its own
// service, llmprobe-sim, whatever OTEL_SERVICE_NAME says (that names the
// daemon).
func startDemoSim(ctx context.Context, logger *slog.Logger) (*sim.Server, string, *exporter.Tracing, error) {
	simLogger := logger.With("component", "sim")
	tracing, err := startTracing(ctx, simLogger, config.Tracing{}, "llmprobe-sim", "llmprobe-sim")
	if err != nil {
		return nil, "", nil, err
	}
	cfg := sim.DefaultConfig()
	if tracing != nil {
		cfg.TracerProvider = tracing.TracerProvider()
	}
	srv, base, err := sim.Listen("127.0.0.1:0", cfg, simLogger)
	if err != nil {
		stopTracing(logger, tracing)
		return nil, "", nil, fmt.Errorf("starting the built-in simulator: %w", err)
	}
	return srv, base, tracing, nil
}
