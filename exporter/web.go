package exporter

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.yaml.in/yaml/v3"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/probe"
)

// WebOptions configure NewHandler. Every field is optional.
type WebOptions struct {
	Logger *slog.Logger
	// Gatherer is what /metrics serves (prometheus.DefaultGatherer if nil).
	Gatherer prometheus.Gatherer
	// Status is read by the status page, typically (*probe.Engine).Status.
	Status func() []probe.TargetStatus
	// Harness supplies the process' measurement-inflation figures,
	// typically (*probe.Engine).Harness (optional).
	Harness func() (probe.HarnessStats, probe.HarnessTotals, bool)
	// Recent supplies the status page's recent requests and failures.
	Recent *Recent
	// Metrics supplies the observed prefix-cache hit ratio per class.
	Metrics *Metrics
	// Reloader serves POST /-/reload (with EnableLifecycle) and /config.
	Reloader *Reloader
	// EnableLifecycle turns on POST /-/reload, as Prometheus'
	// --web.enable-lifecycle does; off, it answers 403 (SIGHUP still
	// reloads).
	EnableLifecycle bool
	// Ready reports readiness for /-/ready (always ready if nil).
	Ready func() bool
	// Version is shown in the page header.
	Version string
}

//go:embed templates/*.html
var templateFS embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"dur":     fmtDuration,
	"rate":    fmtRate,
	"percent": fmtPercent,
	"time":    func(t time.Time) string { return t.Format("15:04:05.000") },
	"date":    func(t time.Time) string { return t.Format(time.RFC3339) },
}).ParseFS(templateFS, "templates/*.html"))

// NewHandler returns llmprobe's HTTP surface:
//
//	/metrics     Prometheus exposition (OpenMetrics negotiated: exemplars need it)
//	/-/healthy   200 while the process serves HTTP
//	/-/ready     200 when o.Ready() says so, else 503
//	/-/reload    POST or PUT, with EnableLifecycle: reload the configuration; 200,
//	             or 500 with the error (403 without EnableLifecycle)
//	/            status page: per-target load, harness health, recent requests
//	/config      the running configuration, secrets hidden
func NewHandler(o WebOptions) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Gatherer == nil {
		o.Gatherer = prometheus.DefaultGatherer
	}
	w := &web{o: o}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{
		ErrorLog:          promhttpLogger{o.Logger},
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
	}))
	mux.HandleFunc("GET /-/healthy", func(rw http.ResponseWriter, _ *http.Request) {
		writeText(rw, http.StatusOK, "Healthy")
	})
	mux.HandleFunc("GET /-/ready", w.ready)
	mux.HandleFunc("POST /-/reload", w.reload)
	mux.HandleFunc("PUT /-/reload", w.reload)
	mux.HandleFunc("GET /{$}", w.status)
	mux.HandleFunc("GET /config", w.config)
	// A browser must not be able to make another site's page post to
	// /-/reload (or any future state-changing endpoint): cross-origin
	// requests with unsafe methods are refused (Sec-Fetch-Site, or Origin
	// against Host). curl and other non-browser clients send neither.
	csrf := http.NewCrossOriginProtection()
	csrf.SetDenyHandler(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		writeText(rw, http.StatusForbidden, "cross-origin request refused")
	}))
	return csrf.Handler(mux)
}

type web struct {
	o WebOptions
}

// promhttpLogger routes promhttp's errors (failed collections, broken
// connections) to slog.
type promhttpLogger struct{ l *slog.Logger }

func (p promhttpLogger) Println(v ...any) {
	p.l.Error("serving metrics", "err", strings.TrimSpace(fmt.Sprintln(v...)))
}

func writeText(rw http.ResponseWriter, code int, msg string) {
	rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	rw.Header().Set("X-Content-Type-Options", "nosniff")
	rw.WriteHeader(code)
	fmt.Fprintln(rw, msg)
}

func (w *web) ready(rw http.ResponseWriter, _ *http.Request) {
	if w.o.Ready != nil && !w.o.Ready() {
		writeText(rw, http.StatusServiceUnavailable, "Not ready")
		return
	}
	writeText(rw, http.StatusOK, "Ready")
}

func (w *web) reload(rw http.ResponseWriter, _ *http.Request) {
	if !w.o.EnableLifecycle {
		writeText(rw, http.StatusForbidden, "Lifecycle API is not enabled (start with --web.enable-lifecycle, or send SIGHUP).")
		return
	}
	if w.o.Reloader == nil {
		writeText(rw, http.StatusServiceUnavailable, "configuration reload is not available")
		return
	}
	if err := w.o.Reloader.Reload(); err != nil {
		writeText(rw, http.StatusInternalServerError, "failed to reload config: "+err.Error())
		return
	}
	writeText(rw, http.StatusOK, "Reloaded")
}

func (w *web) render(rw http.ResponseWriter, name string, data any) {
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, name, data); err != nil {
		w.o.Logger.Error("rendering page", "page", name, "err", err)
		writeText(rw, http.StatusInternalServerError, "internal error rendering the page")
		return
	}
	rw.Header().Set("Content-Type", "text/html; charset=utf-8")
	rw.Header().Set("X-Content-Type-Options", "nosniff")
	rw.Write(buf.Bytes())
}

// Page data.

type pageData struct {
	Title   string
	Version string
	Now     time.Time
}

type statusPage struct {
	pageData
	Targets    []targetView
	Reload     bool // POST /-/reload is enabled
	Harness    probe.HarnessStats
	HasHarness bool
}

type targetView struct {
	probe.TargetStatus
	WarmupUntil time.Time // zero when unknown
	Drops       []countView
	DropTotal   uint64
	Results     []countView
	ClassViews  []classView
	Recent      []Entry
	Failures    []Entry
	KeepsRecent bool
}

type countView struct {
	Name  string
	Count uint64
}

type classView struct {
	probe.ClassStatus
	HitRatio    float64
	HitObserved bool
	SLO         *SLOCounts // nil: the class has no SLO
}

func (w *web) status(rw http.ResponseWriter, _ *http.Request) {
	page := statusPage{
		pageData: pageData{Title: "Status", Version: w.o.Version, Now: time.Now()},
		Reload:   w.o.Reloader != nil && w.o.EnableLifecycle,
	}
	var cfg *config.Config
	if w.o.Reloader != nil {
		cfg = w.o.Reloader.Current()
	}
	var statuses []probe.TargetStatus
	if w.o.Status != nil {
		statuses = w.o.Status()
	}
	if w.o.Harness != nil {
		page.Harness, _, page.HasHarness = w.o.Harness()
	}
	for _, s := range statuses {
		v := targetView{TargetStatus: s, KeepsRecent: w.o.Recent != nil}
		if s.Warmup && cfg != nil {
			v.WarmupUntil = s.Since.Add(time.Duration(cfg.Global.Warmup))
		}
		for _, d := range probe.DropReasons {
			v.Drops = append(v.Drops, countView{string(d), s.Dropped[d]})
			v.DropTotal += s.Dropped[d]
		}
		for _, o := range probe.Outcomes {
			v.Results = append(v.Results, countView{string(o), s.Outcomes[o]})
		}
		for _, c := range s.Classes {
			cv := classView{ClassStatus: c}
			if w.o.Metrics != nil {
				cv.HitRatio, cv.HitObserved = w.o.Metrics.HitRatio(s.Name, c.Name)
				if sc, ok := w.o.Metrics.SLO(s.Name, c.Name); ok {
					cv.SLO = &sc
				}
			}
			v.ClassViews = append(v.ClassViews, cv)
		}
		if w.o.Recent != nil {
			v.Recent, v.Failures = w.o.Recent.Snapshot(s.Name)
		}
		page.Targets = append(page.Targets, v)
	}
	w.render(rw, "status.html", page)
}

type configPage struct {
	pageData
	YAML  string
	Error string
}

func (w *web) config(rw http.ResponseWriter, _ *http.Request) {
	page := configPage{pageData: pageData{Title: "Configuration", Version: w.o.Version, Now: time.Now()}}
	var cfg *config.Config
	if w.o.Reloader != nil {
		cfg = w.o.Reloader.Current()
	}
	switch out, err := marshalConfig(cfg); {
	case cfg == nil:
		page.Error = "No configuration is loaded."
	case err != nil:
		w.o.Logger.Error("marshalling the running configuration", "err", err)
		page.Error = "The running configuration could not be shown: " + err.Error()
	default:
		page.YAML = out
	}
	w.render(rw, "config.html", page)
}

// marshalConfig renders cfg as YAML. Secrets (passwords, bearer
// credentials, OAuth2 client secrets) are prometheus/common Secrets, which
// marshal as "<secret>".
func marshalConfig(cfg *config.Config) (string, error) {
	if cfg == nil {
		return "", nil
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(cfg); err != nil {
		return "", err
	}
	if err := enc.Close(); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// Formatting helpers for the templates.

func fmtDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}

func fmtRate(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "–"
	}
	return fmt.Sprintf("%.3g/s", r)
}

func fmtPercent(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", 100*r)
}
