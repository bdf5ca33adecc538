// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Shared, read-only header values (net/http does not modify them).
var (
	jsonContentType = []string{"application/json"}
	sseContentType  = []string{"text/event-stream; charset=utf-8"}
)

// Server is one simulated OpenAI-compatible LLM server: an HTTP front end
// over a continuous-batching engine, with its own Prometheus registry.
// Several can run in one process.
type Server struct {
	cfg     Config
	logger  *slog.Logger
	metrics *metrics
	engine  *engine
	faults  *faultTable
	handler http.Handler
	http    *http.Server

	models      map[string]int // served name (model or adapter) -> index
	modelNames  []string       // Models, then the adapters' names
	modelJSON   [][]byte       // each name as a JSON string literal
	adapters    []*adapter     // index i is model index len(Models)+i
	modelsBody  []byte         // GET /v1/models answer
	created     int64          // model creation time reported by /v1/models
	idPrefix    [16]byte       // random hex prefix of response ids
	idCounter   atomic.Uint64
	rngMu       sync.Mutex
	rng         *mrand.Rand
	panics      atomic.Int64 // recovered handler panics (bugs; tests check it stays 0)
	shutdownOne sync.Once
	tracing     *tracing         // nil when Config.TracerProvider is nil
	reqlog      *requestLog      // nil when Config.RequestLog is empty
	background  *background      // nil without Config.Background
	gateway     *gatewaySchedule // nil without Config.Gateway
	dcgm        *dcgm
	closing     chan struct{} // closed when Shutdown begins
	tok         tokenizer
	identity    identitySchedule // read-only after New

	// reasoningDelta opens a reasoning token's choice, in the configured
	// reasoning_field: `{"index":0,"delta":{"reasoning_content":"`.
	reasoningDelta string
}

// New builds a server from cfg (validated) and starts its engine. Call
// Shutdown to stop it, whether or not Serve was used.
func New(cfg Config, logger *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid simulator config: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg.Models = append([]string(nil), cfg.Models...)
	cfg.TimingSteps = append([]TimingStep(nil), cfg.TimingSteps...)
	cfg.Adapters = append([]AdapterConfig(nil), cfg.Adapters...)
	cfg.IdentitySteps = append([]IdentityStep(nil), cfg.IdentitySteps...)
	cfg.Background = append([]BackgroundStep(nil), cfg.Background...)
	cfg.Gateway.Steps = append([]GatewayStep(nil), cfg.Gateway.Steps...)
	s := &Server{
		closing: make(chan struct{}),
		cfg:     cfg,
		logger:  logger,
		faults:  newFaultTable(&cfg.Faults),
		models:  make(map[string]int, len(cfg.Models)),
		tok:     tokenizer{maxLetters: cfg.LettersPerToken, beginOfText: cfg.BeginOfText, imagePixels: cfg.ImageTokenPixels},
	}
	seed1, seed2 := serverSeeds(cfg.Seed)
	s.rng = mrand.New(mrand.NewPCG(seed1, seed2))
	const hexdigits = "0123456789abcdef"
	for i := range s.idPrefix {
		s.idPrefix[i] = hexdigits[s.rng.IntN(16)]
	}
	// The start every schedule's After counts from.
	start := time.Now()
	s.created = start.Unix()
	s.identity = newIdentitySchedule(cfg.Identity, scaleIdentitySteps(cfg.IdentitySteps, cfg.scheduleScale()), start)
	s.adapters = newAdapters(&cfg)
	s.modelNames = append([]string(nil), cfg.Models...)
	for _, a := range s.adapters {
		s.modelNames = append(s.modelNames, a.name)
	}
	for i, m := range s.modelNames {
		s.models[m] = i
		b, _ := json.Marshal(m)
		s.modelJSON = append(s.modelJSON, b)
	}
	s.modelsBody = s.buildModelsBody()
	field := cfg.ReasoningField
	if field == "" {
		field = reasoningContentField
	}
	s.reasoningDelta = `{"index":0,"delta":{"` + field + `":"`

	s.tracing = newTracing(cfg.TracerProvider)
	s.engine = newEngine(&s.cfg, nil, start)
	s.metrics = newMetrics(&s.cfg, s.engine)
	s.engine.metrics = s.metrics
	if len(s.adapters) > 0 {
		s.metrics.registry.MustRegister(newLoraCollector(s.adapters))
	}
	simLabels := prometheus.Labels{"model_name": cfg.Models[0]}
	if cfg.Gateway.configured() {
		s.gateway = newGatewaySchedule(cfg.Gateway, cfg.scheduleScale(), start)
		s.gateway.register(s.metrics.registry, simLabels)
	}
	s.dcgm = newDCGM(cfg.DCGM, cfg.Models)
	if cfg.RequestLog != "" {
		l, err := openRequestLog(cfg.RequestLog, logger, s.metrics.registry, prometheus.Labels{"model_name": cfg.Models[0]})
		if err != nil {
			return nil, err
		}
		s.reqlog = l
	}
	s.handler = s.routes()
	s.http = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       5 * time.Minute,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
		// HTTP/1.1 and h2c (HTTP/2 with prior knowledge) on the same
		// port, told apart by the connection's first bytes; HTTP/2 by
		// ALPN where the server is served over TLS (Handler under
		// httptest's StartTLS, as tests do).
		Protocols: new(http.Protocols),
	}
	s.http.Protocols.SetHTTP1(true)
	s.http.Protocols.SetUnencryptedHTTP2(true)
	s.http.Protocols.SetHTTP2(true)
	s.engine.start()
	s.dcgm.start(&s.engine.busy)
	if len(cfg.Background) > 0 {
		s.background = newBackground(s.engine, &s.cfg, start, backgroundSeed(seed1, seed2))
		s.background.register(s.metrics.registry, simLabels)
		go s.background.run()
	}
	return s, nil
}

// serverSeeds returns the seeds of a server's generator: derived from
// Config.Seed, or random when it is 0.
func serverSeeds(seed uint64) (uint64, uint64) {
	if seed == 0 {
		var b [16]byte
		_, _ = rand.Read(b[:])
		return binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:])
	}
	return seed, seed ^ 0x9e3779b97f4a7c15
}

// Listen starts a server on addr (e.g. "127.0.0.1:0") and serves it in a
// goroutine. It returns the server and its base URL (http://host:port,
// with 127.0.0.1 for an unspecified address); OpenAI endpoints are under
// baseURL+"/v1".
func Listen(addr string, cfg Config, logger *slog.Logger) (*Server, string, error) {
	s, err := New(cfg, logger)
	if err != nil {
		return nil, "", err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		_ = s.Shutdown(context.Background())
		return nil, "", fmt.Errorf("simulator listen on %q: %w", addr, err)
	}
	go func() {
		if err := s.Serve(l); err != nil {
			s.logger.Error("simulator stopped serving", "addr", l.Addr().String(), "err", err)
		}
	}()
	return s, baseURL(l.Addr()), nil
}

func baseURL(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return "http://" + a.String()
	}
	ip := tcp.IP
	if ip == nil || ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return "http://" + net.JoinHostPort(ip.String(), strconv.Itoa(tcp.Port))
}

// Handler returns the HTTP handler serving every endpoint, /metrics
// included.
func (s *Server) Handler() http.Handler { return s.handler }

// Registry returns the server's own Prometheus registry.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.registry }

// Config returns the configuration the server runs with.
func (s *Server) Config() Config {
	c := s.cfg
	c.Models = append([]string(nil), s.cfg.Models...)
	c.TimingSteps = append([]TimingStep(nil), s.cfg.TimingSteps...)
	c.Adapters = append([]AdapterConfig(nil), s.cfg.Adapters...)
	c.IdentitySteps = append([]IdentityStep(nil), s.cfg.IdentitySteps...)
	c.Background = append([]BackgroundStep(nil), s.cfg.Background...)
	c.Gateway.Steps = append([]GatewayStep(nil), s.cfg.Gateway.Steps...)
	return c
}

// Serve accepts connections on l until Shutdown; it then returns nil.
func (s *Server) Serve(l net.Listener) error {
	err := s.http.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// requestLogCloseWait bounds how long Shutdown waits for the request-log
// lines of handlers still running after the engine stopped.
const requestLogCloseWait = 2 * time.Second

// Shutdown stops accepting requests, lets the ones in flight finish (their
// streams keep being generated), then stops the engine. When ctx ends
// first, remaining streams are cut and their connections closed. The
// request log, if any, is written out and closed last.
func (s *Server) Shutdown(ctx context.Context) error {
	var err error
	s.shutdownOne.Do(func() {
		close(s.closing)
		s.dcgm.stop()
		if s.background != nil {
			s.background.stop() // no new arrivals; those in the engine are aborted with it
		}
		err = s.http.Shutdown(ctx)
		s.engine.stop() // aborts whatever is left, so handlers return
		if err != nil {
			_ = s.http.Close()
		}
		if s.reqlog != nil {
			// The handlers still running end promptly now that the
			// engine has stopped; their lines go in before the file
			// closes.
			s.reqlog.close(requestLogCloseWait)
		}
	})
	return err
}

type route struct {
	method  string
	handler http.HandlerFunc
}

func (s *Server) routes() http.Handler {
	metricsHandler := promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
	})
	table := map[string]route{
		"/v1/chat/completions": {http.MethodPost, s.handleChat},
		"/v1/completions":      {http.MethodPost, s.handleCompletions},
		"/v1/responses":        {http.MethodPost, s.handleResponses},
		"/v1/messages":         {http.MethodPost, s.handleMessages},
		"/v1/embeddings":       {http.MethodPost, s.handleEmbeddings},
		"/v1/models":           {http.MethodGet, s.handleModels},
		"/tokenize":            {http.MethodPost, s.handleTokenize},
		"/version":             {http.MethodGet, s.handleVersion},
		"/health":              {http.MethodGet, handleHealth},
		"/metrics":             {http.MethodGet, metricsHandler.ServeHTTP},
		"/dcgm/metrics": {http.MethodGet, promhttp.HandlerFor(s.dcgm.registry, promhttp.HandlerOpts{
			ErrorHandling: promhttp.ContinueOnError,
		}).ServeHTTP},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer s.recoverPanic(w, r)
		if s.gateway != nil && r.URL.Path != "/metrics" && r.URL.Path != "/dcgm/metrics" {
			s.gateway.wait(r, s.closing)
		}
		if sv := s.identity.at(time.Now()).server; sv != nil {
			w.Header()["Server"] = sv
		}
		rt, ok := table[r.URL.Path]
		if !ok {
			writeError(w, &apiError{status: http.StatusNotFound, typ: "invalid_request_error", code: "not_found",
				message: fmt.Sprintf("Invalid URL (%s %s)", r.Method, truncate(r.URL.Path, 256))})
			return
		}
		if r.Method != rt.method && !(rt.method == http.MethodGet && r.Method == http.MethodHead) {
			w.Header().Set("Allow", rt.method)
			writeError(w, &apiError{status: http.StatusMethodNotAllowed, typ: "invalid_request_error", code: "method_not_allowed",
				message: fmt.Sprintf("Method %s not allowed for %s; use %s", truncate(r.Method, 32), r.URL.Path, rt.method)})
			return
		}
		rt.handler(w, r)
	})
}

// recoverPanic turns a handler panic (a bug) into a logged error and a cut
// connection; http.ErrAbortHandler (the reset fault) passes through.
func (s *Server) recoverPanic(w http.ResponseWriter, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler {
		panic(v)
	}
	s.panics.Add(1)
	s.logger.Error("simulator handler panic", "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	panic(http.ErrAbortHandler)
}

func handleHealth(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(http.StatusOK)
}

func (s *Server) buildModelsBody() []byte {
	type model struct {
		ID          string  `json:"id"`
		Object      string  `json:"object"`
		Created     int64   `json:"created"`
		OwnedBy     string  `json:"owned_by"`
		Root        string  `json:"root"`
		Parent      *string `json:"parent"`
		MaxModelLen int     `json:"max_model_len"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list"}
	for _, m := range s.cfg.Models {
		list.Data = append(list.Data, model{ID: m, Object: "model", Created: s.created, OwnedBy: "llmprobe-sim", Root: s.cfg.Models[0], MaxModelLen: s.cfg.MaxModelLen})
	}
	for _, a := range s.adapters {
		parent := s.cfg.Models[a.base]
		list.Data = append(list.Data, model{ID: a.name, Object: "model", Created: s.created, OwnedBy: "llmprobe-sim", Root: a.name, Parent: &parent, MaxModelLen: s.cfg.MaxModelLen})
	}
	b, _ := json.Marshal(list)
	return append(b, '\n')
}

func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request) {
	w.Header()["Content-Type"] = jsonContentType
	_, _ = w.Write(s.modelsBody)
}

// resolveModel maps the request's model to a served name; empty means the
// first (as vLLM does).
func (s *Server) resolveModel(name string) (int, *apiError) {
	if name == "" {
		return 0, nil
	}
	i, ok := s.models[name]
	if !ok {
		return 0, &apiError{status: http.StatusNotFound, typ: "invalid_request_error", param: "model", code: "model_not_found",
			message: fmt.Sprintf("The model `%s` does not exist.", truncate(name, 256))}
	}
	return i, nil
}

var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// readBody reads the request body into a pooled buffer (return it with
// bodyPool.Put), answering 413 beyond the configured limit.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) (*bytes.Buffer, *apiError) {
	buf := bodyPool.Get().(*bytes.Buffer)
	buf.Reset()
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, s.cfg.MaxRequestBodyBytes))
	if err != nil {
		bodyPool.Put(buf)
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &apiError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error",
				message: fmt.Sprintf("request body larger than %d bytes", s.cfg.MaxRequestBodyBytes)}
		}
		return nil, badRequest("", "reading request body: %v", err)
	}
	return buf, nil
}

func putBody(buf *bytes.Buffer) {
	if buf.Cap() <= 1<<20 {
		bodyPool.Put(buf)
	}
}

// handleTokenize answers vLLM's /tokenize for a prompt or chat messages:
// {"count", "max_model_len", "tokens"}.
func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request) {
	if s.cfg.DisableTokenize {
		writeError(w, &apiError{status: http.StatusNotFound, typ: "invalid_request_error", code: "not_found", message: "/tokenize is disabled on this server"})
		return
	}
	buf, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var req tokenizeRequest
	aerr = decodeJSON(buf.Bytes(), &req)
	putBody(buf)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if _, aerr := s.resolveModel(req.Model); aerr != nil {
		writeError(w, aerr)
		return
	}
	var ids idCollector
	switch {
	case req.Prompt != nil && req.Messages != nil:
		writeError(w, badRequest("", "give either prompt or messages, not both"))
		return
	case req.Prompt != nil:
		ids.ids = make([]int, 0, len(*req.Prompt)/3+1)
		s.tok.emitText(&ids, *req.Prompt)
	case req.Messages != nil:
		if aerr := validateMessages(req.Messages); aerr != nil {
			writeError(w, aerr)
			return
		}
		addGen := req.AddGenerationPrompt == nil || *req.AddGenerationPrompt
		s.tok.emitChat(&ids, req.Messages, addGen)
	default:
		writeError(w, badRequest("prompt", "either prompt or messages is required"))
		return
	}
	if ids.ids == nil {
		ids.ids = []int{}
	}
	b, _ := json.Marshal(struct {
		Count       int   `json:"count"`
		MaxModelLen int   `json:"max_model_len"`
		Tokens      []int `json:"tokens"`
	}{len(ids.ids), s.cfg.MaxModelLen, ids.ids})
	w.Header()["Content-Type"] = jsonContentType
	_, _ = w.Write(append(b, '\n'))
}

// validateMessages checks roles (content was checked while decoding).
func validateMessages(msgs []chatMessage) *apiError {
	for i, m := range msgs {
		if _, ok := roleID(m.Role); !ok {
			return badRequest(fmt.Sprintf("messages[%d].role", i), "messages[%d].role %q is not one of system, user, assistant, tool, developer, function", i, truncate(m.Role, maxHeaderEcho))
		}
	}
	return nil
}

// randomSeed draws a seed from the server's generator.
func (s *Server) randomSeed() uint64 {
	s.rngMu.Lock()
	v := s.rng.Uint64()
	s.rngMu.Unlock()
	return v
}

// drawFault picks a random fault per the configured probabilities.
func (s *Server) drawFault() fault {
	if !s.faults.any {
		return fault{}
	}
	s.rngMu.Lock()
	u := s.rng.Float64()
	s.rngMu.Unlock()
	return s.faults.pick(u)
}
