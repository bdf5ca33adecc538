// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.yaml.in/yaml/v3"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/scrub"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/probe/harness"
	"github.com/llmprobe/llmprobe/probe/wire"
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
	Harness func() (harness.Stats, harness.Totals, bool)
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
	// ExternalURL is where users reach llmprobe (--web.external-url), as
	// Prometheus' flag: the pages' links, form actions and redirects use
	// its path, and its origin passes the cross-origin protection (a
	// reverse proxy may rewrite Host). nil: links use RoutePrefix.
	ExternalURL *url.URL
	// Planner supplies the status page's plan figures per class
	// (plan.go; optional).
	Planner *Planner
	// RoutePrefix is the path every endpoint is served under
	// (--web.route-prefix; "" or "/" for none). ParseWebURLs derives it,
	// as Prometheus does, from ExternalURL's path by default.
	RoutePrefix string
}

// ParseWebURLs checks --web.external-url and --web.route-prefix and
// returns the external URL (nil when externalURL is empty) and the route
// prefix: "" for none, else "/path" without a trailing slash. The prefix
// defaults to the external URL's path, as in Prometheus.
func ParseWebURLs(externalURL, routePrefix string) (*url.URL, string, error) {
	var ext *url.URL
	if externalURL != "" {
		u, err := url.Parse(externalURL)
		if err != nil {
			return nil, "", fmt.Errorf("--web.external-url: %w", err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, "", fmt.Errorf("--web.external-url %q: want an absolute http or https URL", externalURL)
		}
		if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return nil, "", fmt.Errorf("--web.external-url %q: credentials, a query or a fragment are not allowed", externalURL)
		}
		u.Path = strings.TrimRight(u.Path, "/")
		u.RawPath = ""
		ext = u
		if routePrefix == "" {
			routePrefix = u.Path
		}
	}
	prefix := cleanPrefix(routePrefix)
	if strings.ContainsAny(prefix, "?#%") || path.Clean("/"+prefix) != "/"+strings.TrimPrefix(prefix, "/") {
		return nil, "", fmt.Errorf("--web.route-prefix %q: want a plain path such as /llmprobe", routePrefix)
	}
	return ext, prefix, nil
}

// cleanPrefix makes a route prefix "" or "/a/b".
func cleanPrefix(p string) string {
	p = strings.Trim(p, "/")
	if p == "" {
		return ""
	}
	return "/" + p
}

//go:embed templates/*.html
var templateFS embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"dur":     fmtDuration,
	"rate":    fmtRate,
	"percent": fmtPercent,
	"ratio":   fmtRatio,
	"pvalue":  func(p float64) string { return fmt.Sprintf("%.2g", p) },
	"time":    func(t time.Time) string { return t.Format("15:04:05.000") },
	"clock":   func(t time.Time) string { return t.Format("15:04:05") },
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
//	/api/v1/recent  each target's recent requests as JSON (llmprobe plan --from)
func NewHandler(o WebOptions) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Gatherer == nil {
		o.Gatherer = prometheus.DefaultGatherer
	}
	prefix := cleanPrefix(o.RoutePrefix)
	w := &web{o: o, link: prefix}
	if o.ExternalURL != nil {
		w.link = strings.TrimRight(o.ExternalURL.EscapedPath(), "/")
	}
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
	mux.HandleFunc("GET /api/v1/recent", w.recentAPI) // recent_api.go
	// A browser must not be able to make another site's page post to
	// /-/reload (or any future state-changing endpoint): cross-origin
	// requests with unsafe methods are refused (Sec-Fetch-Site, or Origin
	// against Host). curl and other non-browser clients send neither.
	// Behind a reverse proxy that rewrites Host, a browser without
	// Sec-Fetch-Site sends the external origin.
	csrf := http.NewCrossOriginProtection()
	if u := o.ExternalURL; u != nil {
		if err := csrf.AddTrustedOrigin(u.Scheme + "://" + u.Host); err != nil {
			o.Logger.Warn("the external URL's origin is not trusted for POST /-/reload", "err", err)
		}
	}
	csrf.SetDenyHandler(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		writeText(rw, http.StatusForbidden, "cross-origin request refused")
	}))
	var h http.Handler = mux
	if prefix != "" {
		h = withPrefix(prefix, mux)
	}
	return csrf.Handler(h)
}

// withPrefix serves h under prefix (/metrics at prefix/metrics, and so
// on); / redirects to prefix/, as Prometheus does, and any other path is
// not found.
func withPrefix(prefix string, h http.Handler) http.Handler {
	strip := http.StripPrefix(prefix, h)
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case strings.HasPrefix(p, prefix+"/"):
			strip.ServeHTTP(rw, r)
		case p == prefix || p == "/":
			http.Redirect(rw, r, prefix+"/", http.StatusFound)
		default:
			http.NotFound(rw, r)
		}
	})
}

type web struct {
	o    WebOptions
	link string // the path prefix of links, "" or "/a/b"
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

// reloadFormField is the status page's reload form's field: a POST that
// carries it is the browser's, answered with 303 See Other back to the
// page; any other request (curl, PUT, a POST without the field) gets the
// text answer and status code.
const reloadFormField = "from"

func (w *web) reload(rw http.ResponseWriter, r *http.Request) {
	if !w.o.EnableLifecycle {
		writeText(rw, http.StatusForbidden, "Lifecycle API is not enabled (start with --web.enable-lifecycle, or send SIGHUP).")
		return
	}
	if w.o.Reloader == nil {
		writeText(rw, http.StatusServiceUnavailable, "configuration reload is not available")
		return
	}
	fromPage := isPageForm(rw, r)
	err := w.o.Reloader.Reload()
	if fromPage {
		outcome := "ok"
		if err != nil {
			outcome = "failed"
		}
		http.Redirect(rw, r, w.link+"/?reload="+outcome, http.StatusSeeOther)
		return
	}
	if err != nil {
		writeText(rw, http.StatusInternalServerError, "failed to reload config: "+err.Error())
		return
	}
	writeText(rw, http.StatusOK, "Reloaded")
}

// isPageForm reports whether r is the status page's form being submitted:
// a POST with a form body (at most 4 KiB) carrying reloadFormField.
func isPageForm(rw http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct != "application/x-www-form-urlencoded" && ct != "multipart/form-data" {
		return false
	}
	r.Body = http.MaxBytesReader(rw, r.Body, 4<<10)
	if ct == "multipart/form-data" {
		if err := r.ParseMultipartForm(4 << 10); err != nil {
			return false
		}
	} else if err := r.ParseForm(); err != nil {
		return false
	}
	return r.PostForm.Get(reloadFormField) == "status-page"
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
	Prefix  string // of links: "" or "/a/b"
	// ReloadFailed is the last reload when it failed (nil otherwise): a
	// banner until the next successful one.
	ReloadFailed *ReloadStatus
}

func (w *web) pageData(title string) pageData {
	d := pageData{Title: title, Version: w.o.Version, Now: time.Now(), Prefix: w.link}
	if w.o.Reloader != nil {
		if st, ok := w.o.Reloader.Status(); ok && st.Failed {
			d.ReloadFailed = &st
		}
	}
	return d
}

type statusPage struct {
	pageData
	// Problems is the summary at the top: a line per target with a
	// problem (failing, saturated, overloaded, regressed); none when all
	// is well.
	Problems []problemView
	// Why is a sentence per target with server_metrics, under the
	// problems: its diagnosis, or why there is none (diagnosis.go).
	Why        []whyView
	Targets    []targetView
	Reload     bool // POST /-/reload is enabled
	Harness    harness.Stats
	HasHarness bool
	// ReloadNotice is the outcome of the reload the page's form asked for
	// (after its 303 redirect); nil otherwise.
	ReloadNotice *ReloadStatus
	WindowSpan   time.Duration
	HasWindow    bool // Recent keeps the recent window
}

// whyView is a target's line of the status page's Why list: its cause
// ("" without a verdict) and its sentence.
type whyView struct {
	Target, Cause, Line string
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
	// The tables show the newest few rows; the others are folded into
	// a <details> below them.
	RecentShown, RecentMore     []Entry
	FailuresShown, FailuresMore []Entry
	Latency                     WindowSnapshot
	HasWindow                   bool
	Charts                      []svgChart // the timeline: rates, TTFT
	// ReplicaViews are the replicas of a target with discovery.
	ReplicaViews []replicaView
	// ServerLines say what the target's (and replicas') engines said of
	// themselves, or why there is no server view (serverview.go).
	ServerLines []string
	// Plan is what the target's rates buy and spend (plan.go); nil
	// without a planner.
	Plan *planView
}

// replicaView is a row of a target's replica table.
type replicaView struct {
	probe.ReplicaStatus
	Target        string
	Pod           string
	Retired       bool
	Verdict       string // "failing", "saturated", "overloaded", "warm-up" (any of them, comma-separated) or "ok"
	VerdictDetail string // the saturation and overload reasons in words
}

func replicaViews(s *probe.TargetStatus) []replicaView {
	var out []replicaView
	for _, r := range s.Replicas {
		v := replicaView{ReplicaStatus: r, Target: s.Name, Pod: r.Labels["pod"], Retired: !r.Gone.IsZero()}
		var verdict, detail []string
		if f := r.Failing; f != nil {
			verdict = append(verdict, "failing")
			detail = append(detail, fmt.Sprintf("%d of %d requests failed", f.Failed, f.Judged))
		}
		if r.Saturated {
			verdict = append(verdict, "saturated")
			if r.SaturationReason != "" {
				detail = append(detail, r.SaturationReason)
			}
		}
		if r.Overloaded {
			verdict = append(verdict, "overloaded")
			if r.OverloadReason != "" {
				detail = append(detail, r.OverloadReason)
			}
		}
		if r.Warmup {
			verdict = append(verdict, "warm-up")
		}
		if len(verdict) == 0 {
			verdict = append(verdict, "ok")
		}
		v.Verdict, v.VerdictDetail = strings.Join(verdict, ", "), strings.Join(detail, "; ")
		out = append(out, v)
	}
	return out
}

// Rows the status page shows of each target's tables before folding the
// rest into a <details>.
const (
	recentShown   = 5
	failuresShown = 10
)

// problemView is a line of the summary at the top of the status page: a
// target with something wrong, and each problem, linking to its banner.
type problemView struct {
	Target string
	Parts  []problemPart
}

type problemPart struct {
	Anchor string   // the id of the problem's banner
	Text   string   // what is wrong
	Label  string   // before the codes
	Codes  []string // outcome, error type, class: shown as code
	Note   string   // after the codes
}

// problems is t's line of the summary; ok is false when all is well.
func problems(t *probe.TargetStatus) (problemView, bool) {
	p := problemView{Target: t.Name}
	if f := t.Failing; f != nil {
		part := problemPart{Anchor: "failing-" + t.Name, Text: "most requests fail"}
		if f.All {
			part.Text = "every request fails"
		}
		if len(f.Outcomes) > 0 {
			part.Codes = append(part.Codes, string(f.Outcomes[0].Outcome))
		}
		if f.Example.ErrorType != "" {
			part.Codes = append(part.Codes, f.Example.ErrorType)
		}
		if n := len(f.Replicas); n > 0 {
			part.Note = fmt.Sprintf("on %d replicas", n)
			if n == 1 {
				part.Note = "on 1 replica"
			}
		}
		p.Parts = append(p.Parts, part)
	}
	if t.Saturated {
		p.Parts = append(p.Parts, problemPart{Anchor: "saturated-" + t.Name, Text: "harness saturated"})
	}
	if t.Overloaded {
		p.Parts = append(p.Parts, problemPart{Anchor: "overloaded-" + t.Name, Text: "overloaded"})
	}
	for _, r := range t.Regressions {
		if r.Regressed {
			p.Parts = append(p.Parts, problemPart{Anchor: "regression-" + t.Name + "-" + r.Class + "-" + r.Metric,
				Text: r.Metric + " regressed", Label: "class ", Codes: []string{r.Class}})
		}
	}
	return p, len(p.Parts) > 0
}

// fold splits rows into the first n and the rest.
func fold(rows []Entry, n int) (shown, more []Entry) {
	if len(rows) <= n {
		return rows, nil
	}
	return rows[:n], rows[n:]
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

func (w *web) status(rw http.ResponseWriter, r *http.Request) {
	page := statusPage{
		pageData:   w.pageData("Status"),
		Reload:     w.o.Reloader != nil && w.o.EnableLifecycle,
		WindowSpan: windowSpan,
		HasWindow:  w.o.Recent != nil,
	}
	if r.URL.Query().Has("reload") && w.o.Reloader != nil {
		if st, ok := w.o.Reloader.Status(); ok {
			page.ReloadNotice = &st
		}
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
		v := targetView{TargetStatus: s, KeepsRecent: w.o.Recent != nil, ServerLines: serverLines(&s)}
		if s.Warmup && cfg != nil {
			v.WarmupUntil = s.Since.Add(time.Duration(cfg.Global.Warmup))
		}
		for _, d := range probe.DropReasons {
			v.Drops = append(v.Drops, countView{string(d), s.Dropped[d]})
			v.DropTotal += s.Dropped[d]
		}
		for _, o := range wire.Outcomes {
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
			v.RecentShown, v.RecentMore = fold(v.Recent, recentShown)
			v.FailuresShown, v.FailuresMore = fold(v.Failures, failuresShown)
			if v.Latency, v.HasWindow = w.o.Recent.Window(s.Name); v.HasWindow {
				v.Charts = timelineCharts(s.Name, v.Latency)
			}
		}
		v.ReplicaViews = replicaViews(&s)
		v.Plan = w.o.Planner.view(s.Name)
		page.Targets = append(page.Targets, v)
		if l := whyLine(&s, time.Now()); l != "" {
			wv := whyView{Target: s.Name, Line: l}
			if s.Diagnosis != nil {
				wv.Cause = string(s.Diagnosis.Cause)
			}
			page.Why = append(page.Why, wv)
		}
		if p, ok := problems(&s); ok {
			page.Problems = append(page.Problems, p)
		}
	}
	w.render(rw, "status.html", page)
}

type configPage struct {
	pageData
	YAML  string
	Error string
}

func (w *web) config(rw http.ResponseWriter, _ *http.Request) {
	page := configPage{pageData: w.pageData("Configuration")}
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
// marshal as "<secret>"; every URL is masked.
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
	// URLs are shown as everywhere else (scrub.URL): proxy_url's query,
	// an oauth2 token_url's user information and query, workload_from's
	// query are not Secrets.
	return scrub.URLs(buf.String()), nil
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

// fmtRatio renders a current/baseline ratio: "1.45×".
func fmtRatio(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "–"
	}
	return fmt.Sprintf("%.2f×", r)
}

func fmtPercent(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", 100*r)
}
