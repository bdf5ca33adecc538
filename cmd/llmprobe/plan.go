// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/exporter"
	"github.com/llmprobe/llmprobe/internal/bounded"
	"github.com/llmprobe/llmprobe/internal/httpclient"
	"github.com/llmprobe/llmprobe/internal/scrub"
	"github.com/llmprobe/llmprobe/plan"
	"github.com/llmprobe/llmprobe/probe/wire"
)

// planFlags are `llmprobe plan`'s flags.
type planFlags struct {
	configFile string
	from       string
	fromConfig string
	detect     []string
	format     string
	trials     int
	mixinFile  string
}

func registerPlan(app *kingpin.Application) command {
	f := &planFlags{}
	cmd := app.Command("plan", "How much probing is enough: per target and class, the detection delay of the regressions on-call cares about, whether the SLO alerts can fire, the tokens a day and their cost, and the lowest rate meeting a goal. Contacts no target (docs/plan.md).")
	cmd.Flag("config.file", "The llmprobe configuration to plan.").Required().StringVar(&f.configFile)
	cmd.Flag("from", "A running llmprobe's URL (its --web.listen-address, with any route prefix): plan each class on the latencies of its recent requests (/api/v1/recent) instead of the reference model.").StringVar(&f.from)
	cmd.Flag("from.config.file", "An http_client_config file for --from (a daemon behind --web.config.file's auth or TLS).").StringVar(&f.fromConfig)
	cmd.Flag("detect", "A detection goal METRIC:EFFECT:WITHIN, e.g. ttft:+25%:10m, ttft:p99x2:2h, errors:5%:30m (repeatable): the lowest rate catching it within WITHIN in 90% of steps, with its cost.").StringsVar(&f.detect)
	cmd.Flag("format", "Output: text or json (one document on standard output).").Default("text").EnumVar(&f.format, "text", "json")
	cmd.Flag("trials", "Simulated steps per figure.").Default(fmt.Sprint(plan.DefaultTrials)).IntVar(&f.trials)
	cmd.Flag("mixin.config.file", "The mixin configuration your alerts were generated from (llmprobe mixin): its SLO burn-rate windows and guards. Default: the shipped rules'.").StringVar(&f.mixinFile)
	return command{
		clause: cmd,
		run: func(ctx context.Context, _ *slog.Logger) error {
			return runPlan(ctx, f, os.Stdout)
		},
	}
}

// maxRecentAPI bounds the daemon's /api/v1/recent answer: 10000 requests
// per target of about 200 bytes, for many targets.
const maxRecentAPI = 256 << 20

func runPlan(ctx context.Context, f *planFlags, stdout io.Writer) error {
	var o plan.Options
	if f.trials < 1 || f.trials > 100000 {
		return usagef("--trials must be from 1 to 100000, got %d", f.trials)
	}
	o.Trials = f.trials
	for _, d := range f.detect {
		g, err := plan.ParseGoal(d)
		if err != nil {
			return usagef("--detect %v", err)
		}
		o.Goals = append(o.Goals, g)
	}
	var from *url.URL
	if f.from != "" {
		u, err := url.Parse(f.from)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return usagef("--from=%q: want a running llmprobe's http or https URL, e.g. http://127.0.0.1:9477, without credentials or a query", scrub.URL(f.from))
		}
		from = u
	} else if f.fromConfig != "" {
		return usagef("--from.config.file needs --from")
	}
	if f.mixinFile != "" {
		a, err := loadMixinConfig(f.mixinFile)
		if err != nil {
			return fmt.Errorf("--mixin.config.file: %w", err)
		}
		o.Alerts = &a
	}
	cfg, err := config.LoadFileContext(ctx, f.configFile)
	if err != nil {
		return invalidConfig(err)
	}
	if from != nil {
		if o.Observed, err = fetchObserved(ctx, from, f.fromConfig); err != nil {
			return err
		}
	}
	rep, err := plan.Plan(cfg, o)
	if err != nil {
		return err
	}
	if f.format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return plan.WriteText(stdout, rep)
}

// fetchObserved reads a running daemon's recent requests (its
// /api/v1/recent, bounded) into each class's samples: the successes'
// latencies, warm-up left out.
func fetchObserved(ctx context.Context, from *url.URL, configFile string) (map[plan.Key]*plan.Samples, error) {
	hc := httpclient.Plain
	if configFile != "" {
		c, err := loadHTTPConfigFile(ctx, configFile)
		if err != nil {
			return nil, fmt.Errorf("--from.config.file: %w", err)
		}
		hc = *c
	}
	client, err := httpclient.New(hc, "llmprobe_plan", httpclient.Options{Timeout: 30 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("--from.config.file %s: %w", configFile, err)
	}
	client = bounded.Client(client, maxRecentAPI, "the daemon's /api/v1/recent")
	u := *from
	u.Path = strings.TrimRight(u.Path, "/") + "/api/v1/recent"
	u.RawPath = ""
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("--from: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("--from: %s", scrub.URLs(err.Error()))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("--from: %s answered %s (is it llmprobe 0.x with /api/v1/recent?)", scrub.URL(u.String()), resp.Status)
	}
	var api exporter.RecentAPI
	if err := json.NewDecoder(resp.Body).Decode(&api); err != nil {
		var tl *bounded.TooLargeError
		if errors.As(err, &tl) {
			return nil, fmt.Errorf("--from: %v", err)
		}
		return nil, fmt.Errorf("--from: %s did not answer JSON recent requests: %s", scrub.URL(u.String()), scrub.Chars(err.Error()))
	}
	out := map[plan.Key]*plan.Samples{}
	for _, t := range api.Targets {
		for _, r := range t.Requests {
			if r.Warmup {
				continue
			}
			k := plan.Key{Target: t.Target, Class: r.Class}
			s := out[k]
			if s == nil {
				s = &plan.Samples{}
				out[k] = s
			}
			s.Requests++
			if r.Outcome != string(wire.OutcomeSuccess) {
				s.Errors++
				continue
			}
			if r.TTFT > 0 {
				s.TTFT = append(s.TTFT, r.TTFT)
			}
			if r.TPOT > 0 {
				s.TPOT = append(s.TPOT, r.TPOT)
			}
			if r.E2E > 0 {
				s.E2E = append(s.E2E, r.E2E)
			}
		}
	}
	return out, nil
}
