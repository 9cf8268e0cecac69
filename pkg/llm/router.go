package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// Backoff is the retry delay policy: exponential from Base, capped at Max,
// with jitter (a delay falls between half and all of its exponential
// value). A server's retry-after wins when it asks for a delay, up to
// MaxRetryAfter.
type Backoff struct {
	Base          time.Duration
	Max           time.Duration
	MaxRetryAfter time.Duration
	// Sleep waits d or until ctx ends; tests replace it.
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter returns a number in [0,1); tests replace it.
	Jitter func() float64
}

// DefaultBackoff: 0.5s, 1s, 2s, 4s ... up to 30s.
func DefaultBackoff() Backoff {
	return Backoff{Base: 500 * time.Millisecond, Max: 30 * time.Second, MaxRetryAfter: 5 * time.Minute}
}

// Delay is the wait before retry number n (0 for the first retry).
func (b Backoff) Delay(n int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		if b.MaxRetryAfter > 0 && retryAfter > b.MaxRetryAfter {
			return b.MaxRetryAfter
		}
		return retryAfter
	}
	d := b.Base
	for i := 0; i < n && d < b.Max; i++ {
		d *= 2
	}
	if b.Max > 0 && d > b.Max {
		d = b.Max
	}
	j := rand.Float64
	if b.Jitter != nil {
		j = b.Jitter
	}
	return d/2 + time.Duration(j()*float64(d/2))
}

func (b Backoff) sleep(ctx context.Context, d time.Duration) error {
	if b.Sleep != nil {
		return b.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// ProviderSpec is one entry of the config key `providers`.
type ProviderSpec struct {
	Kind      string `json:"kind"` // anthropic, openai, openai-compatible
	BaseURL   string `json:"base_url,omitempty"`
	APIKeyEnv string `json:"api_key_env,omitempty"` // variable holding the key; empty: no key
}

// builtinProviders are the names that work without configuration.
var builtinProviders = map[string]ProviderSpec{
	"anthropic":  {Kind: "anthropic", APIKeyEnv: "ANTHROPIC_API_KEY"},
	"openai":     {Kind: "openai", APIKeyEnv: "OPENAI_API_KEY"},
	"ollama":     {Kind: "openai-compatible", BaseURL: "http://localhost:11434/v1"},
	"llamacpp":   {Kind: "openai-compatible", BaseURL: "http://localhost:8080/v1"},
	"vllm":       {Kind: "openai-compatible", BaseURL: "http://localhost:8000/v1"},
	"openrouter": {Kind: "openai-compatible", BaseURL: "https://openrouter.ai/api/v1", APIKeyEnv: "OPENROUTER_API_KEY"},
}

// Options configure a Router.
type Options struct {
	Retries        int           // retries per model before falling back
	Timeout        time.Duration // the whole call, all attempts and models
	AttemptTimeout time.Duration // one attempt
	MaxTokens      int           // default max_tokens
	// MaxResponseBytes bounds what one response may hold (0: the default,
	// MaxResponseBytes).
	MaxResponseBytes int
	Backoff          Backoff

	AnthropicKey, AnthropicBaseURL string
	OpenAIKey, OpenAIBaseURL       string
	// Providers is the config key `providers`: name -> ProviderSpec.
	Providers json.RawMessage
	Models    *Models
	// Getenv reads the variables named by api_key_env.
	Getenv func(string) string
	// HTTPClient is shared by every provider, so connections stay warm
	// across calls; nil builds one.
	HTTPClient *http.Client
}

// Router turns a request into a call: it resolves the model chain to
// providers, retries, falls back and prices the usage.
type Router struct {
	opts      Options
	specs     map[string]ProviderSpec
	mu        sync.Mutex
	providers map[string]Provider
	onWait    func()
}

// OnWait has f called whenever a call has emitted what the provider's
// stream has brought so far and is about to wait for more: a sink that
// buffers events writes them out then (pg-llm serve), so the events of
// one read leave in one write, and none waits on the network. Set it
// before the first call.
func (r *Router) OnWait(f func()) { r.onWait = f }

// NewRouter checks the options and builds a router.
func NewRouter(opts Options) (*Router, error) {
	r := &Router{opts: opts, specs: map[string]ProviderSpec{}, providers: map[string]Provider{}}
	for k, v := range builtinProviders {
		r.specs[k] = v
	}
	if len(opts.Providers) > 0 && string(opts.Providers) != "null" {
		var named map[string]ProviderSpec
		dec := json.NewDecoder(strings.NewReader(string(opts.Providers)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&named); err != nil {
			return nil, fmt.Errorf("config key providers: %w", err)
		}
		for name, s := range named {
			switch s.Kind {
			case "anthropic", "openai", "openai-compatible":
			default:
				return nil, fmt.Errorf("config key providers.%s.kind: %q is not anthropic, openai or openai-compatible", name, s.Kind)
			}
			if name == "replay" || strings.ContainsAny(name, "/,") {
				return nil, fmt.Errorf("config key providers: %q cannot name a provider", name)
			}
			r.specs[name] = s
		}
	}
	if r.opts.Models == nil {
		r.opts.Models, _ = NewModels(nil)
	}
	if r.opts.Getenv == nil {
		r.opts.Getenv = func(string) string { return "" }
	}
	if r.opts.HTTPClient == nil {
		r.opts.HTTPClient = NewHTTPClient()
	}
	if r.opts.Backoff.Base == 0 {
		b := DefaultBackoff()
		b.Sleep, b.Jitter = r.opts.Backoff.Sleep, r.opts.Backoff.Jitter
		r.opts.Backoff = b
	}
	return r, nil
}

// NewHTTPClient returns a client whose connections are kept warm and never
// time out as a whole (streams run long; the router's contexts bound them).
func NewHTTPClient() *http.Client {
	t := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		// A request carries the whole conversation, hundreds of KB late in
		// a session: written through the default 4 KB buffer, that is a
		// system call per 4 KB.
		WriteBufferSize: 64 << 10,
		ReadBufferSize:  64 << 10,
	}
	return &http.Client{Transport: t}
}

// Models is the router's model table.
func (r *Router) Models() *Models { return r.opts.Models }

// ProviderNames lists the providers a model id may name.
func (r *Router) ProviderNames() []string {
	out := []string{"replay"}
	for k := range r.specs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func notProviderModel(id string) *Error {
	return &Error{Kind: protocol.KindBadRequest, Model: id,
		Message: fmt.Sprintf("model %q is not provider/model (e.g. anthropic/claude-sonnet-4-5, openai/gpt-4o, ollama/qwen3:8b, replay/session.jsonl)", id)}
}

func (r *Router) unknownProvider(name, id string) *Error {
	return &Error{Kind: protocol.KindBadRequest, Model: id,
		Message: fmt.Sprintf("unknown provider %q in model %q (known: %s; add others under the config key providers)", name, id, strings.Join(r.ProviderNames(), ", "))}
}

// errNoModel is the failure of a call with an empty model chain.
var errNoModel = &Error{Kind: protocol.KindBadRequest, Message: "no model: set --model, the request's model or the config key model"}

// CheckChain checks a model chain before any call is made: it is not
// empty, every id is provider/model with a known provider, and every replay
// file opens. Such mistakes are bad input, for the caller to report before
// it starts (pg-llm exits 2), not failures of a call. A missing API key is
// not checked here: that is the call's auth failure.
func (r *Router) CheckChain(chain string) error {
	ids := Chain(chain)
	if len(ids) == 0 {
		return errNoModel
	}
	for _, id := range ids {
		name, _, ok := SplitModel(id)
		switch {
		case !ok:
			return notProviderModel(id)
		case name == "replay":
			if _, _, err := r.Resolve(id); err != nil { // opens the file once; calls reuse it
				return err
			}
		default:
			if _, ok := r.specs[name]; !ok {
				return r.unknownProvider(name, id)
			}
		}
	}
	return nil
}

// Resolve returns the provider of a model id and the model name it takes.
func (r *Router) Resolve(id string) (Provider, string, error) {
	name, model, ok := SplitModel(id)
	if !ok {
		return nil, "", notProviderModel(id)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	key := name
	if name == "replay" {
		key = "replay/" + model
	}
	if p, ok := r.providers[key]; ok {
		return p, model, nil
	}
	var p Provider
	if name == "replay" {
		rp, err := OpenReplay(model)
		if err != nil {
			return nil, "", &Error{Kind: protocol.KindBadRequest, Model: id, Message: err.Error(), Err: err}
		}
		p = rp
	} else {
		spec, ok := r.specs[name]
		if !ok {
			return nil, "", r.unknownProvider(name, id)
		}
		var err error
		if p, err = r.build(name, spec); err != nil {
			return nil, "", err
		}
	}
	r.providers[key] = p
	return p, model, nil
}

func (r *Router) build(name string, s ProviderSpec) (Provider, error) {
	key, base := "", s.BaseURL
	switch name {
	case "anthropic":
		key = r.opts.AnthropicKey
		if base == "" {
			base = r.opts.AnthropicBaseURL
		}
	case "openai":
		key = r.opts.OpenAIKey
		if base == "" {
			base = r.opts.OpenAIBaseURL
		}
	default:
		if s.APIKeyEnv != "" {
			key = r.opts.Getenv(s.APIKeyEnv)
		}
	}
	if key == "" && s.APIKeyEnv != "" {
		hint := "set " + s.APIKeyEnv
		switch name {
		case "anthropic":
			hint += " (or anthropic_api_key in the config file)"
		case "openai":
			hint += " (or openai_api_key in the config file)"
		}
		return nil, &Error{Kind: protocol.KindAuth, Model: name,
			Message: fmt.Sprintf("no API key for provider %s: %s", name, hint)}
	}
	switch s.Kind {
	case "anthropic":
		return NewAnthropic(name, key, base, r.opts.HTTPClient), nil
	case "openai":
		return NewOpenAI(name, key, base, false, r.opts.HTTPClient), nil
	default:
		if base == "" {
			return nil, &Error{Kind: protocol.KindBadRequest, Model: name, Message: fmt.Sprintf("provider %s has no base_url", name)}
		}
		return NewOpenAI(name, key, base, true, r.opts.HTTPClient), nil
	}
}

// Call runs a request through the chain in req.Model, sending every event
// to sink, and returns the end event. A failure has been reported as an
// error event when Call returns it; it is an *Error, or the context's error
// when the caller cancelled. An *Error whose cause is
// context.DeadlineExceeded is the overall timeout.
func (r *Router) Call(ctx context.Context, req *protocol.Request, sink func(any)) (*protocol.EndEvent, error) {
	chain := Chain(req.Model)
	em := NewEmitter(req.ID, sink)
	em.wait = r.onWait
	if len(chain) == 0 {
		e := *errNoModel
		em.Emit(e.Event(req.ID))
		return nil, &e
	}
	if r.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.opts.Timeout)
		defer cancel()
	}
	req = withDefaults(req, r.opts.MaxTokens)
	// total is what the models of the chain that failed were charged
	// (attempts cut after the provider counted the input): the call's
	// usage, in its end or its error, includes it.
	var total protocol.Usage
	for i, id := range chain {
		end, err := r.callModel(ctx, id, req, em, total)
		if err == nil {
			return end, nil
		}
		var e *Error
		if !errors.As(err, &e) {
			return nil, err // cancelled by the caller
		}
		if e.Model == "" {
			e.Model = id
		}
		total = total.Add(e.Usage)
		e.Usage = total
		if (e.Retryable && !e.noRetry || e.nextModel) && !em.Content() && i+1 < len(chain) && ctx.Err() == nil {
			em.Emit(&protocol.FallbackEvent{Type: protocol.EventFallback, ID: req.ID, From: id, To: chain[i+1], Reason: e.Kind + ": " + e.Message})
			continue
		}
		em.Emit(e.Event(req.ID))
		return nil, e
	}
	panic("unreachable")
}

var errAttemptTimeout = errors.New("attempt timed out")

// callModel runs the attempts of one model. carried is what the chain's
// earlier models were charged; the end's usage adds it to this model's. An
// attempt whose stream broke after the provider counted its input is
// charged that input: a successful end's usage includes it, and an *Error
// carries it in Usage (priced at this model's prices when known).
func (r *Router) callModel(ctx context.Context, id string, req *protocol.Request, em *Emitter, carried protocol.Usage) (*protocol.EndEvent, error) {
	p, model, err := r.Resolve(id)
	if err != nil {
		if e, ok := err.(*Error); ok {
			e.Model = id
		}
		return nil, err
	}
	info, priced := r.opts.Models.Lookup(id)
	em.Model = id
	if priced && info.MaxOutput > 0 && req.MaxTokens > info.MaxOutput {
		// A default max_tokens above what this model of the chain can
		// write would be a bad request; ask for the most it can.
		clamped := *req
		clamped.MaxTokens = info.MaxOutput
		if clamped.Thinking != nil && clamped.Thinking.BudgetTokens >= clamped.MaxTokens {
			clamped.Thinking = &protocol.Thinking{BudgetTokens: clamped.MaxTokens / 2}
		}
		req = &clamped
	}
	var broken protocol.Usage // what this model's failed attempts were charged
	charge := func(err error) error {
		var e *Error
		if errors.As(err, &e) && broken != (protocol.Usage{}) {
			if priced {
				broken.CostUSD = info.Cost(broken)
			}
			e.Usage = broken
		}
		return err
	}
	for attempt := 0; ; attempt++ {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if r.opts.AttemptTimeout > 0 {
			actx, cancel = context.WithTimeoutCause(ctx, r.opts.AttemptTimeout, errAttemptTimeout)
		}
		em.max, em.held = r.opts.MaxResponseBytes, 0 // a bound for each response
		em.waiting()
		end, err := p.Stream(actx, model, req, em)
		attemptDone := actx.Err() != nil
		cancel()
		if err != nil {
			if u := em.takeBroken(); u.Check() == nil {
				broken = broken.Add(u)
			}
		}
		if err == nil {
			if uerr := end.Usage.Check(); uerr != nil {
				e := badUsage(uerr)
				e.Model = id
				return nil, charge(e)
			}
			end.Usage = broken.Add(end.Usage)
			if priced {
				end.Usage.CostUSD = info.Cost(end.Usage)
			}
			end.Usage = carried.Add(end.Usage)
			end.Type, end.ID, end.Model = protocol.EventEnd, req.ID, id
			em.Emit(&protocol.UsageEvent{Type: protocol.EventUsage, ID: req.ID, Model: id, Usage: end.Usage})
			em.Emit(end)
			return end, nil
		}
		if cerr := ctx.Err(); cerr != nil {
			if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
				return nil, charge(&Error{Kind: protocol.KindTimeout, Model: id, Err: context.DeadlineExceeded,
					Message: fmt.Sprintf("model call timed out after %s (--timeout)", r.opts.Timeout)})
			}
			return nil, context.Cause(ctx)
		}
		e := classifyTransport(err)
		if attemptDone && e.Kind == protocol.KindTimeout {
			e = &Error{Kind: protocol.KindTimeout, Retryable: true, Err: errAttemptTimeout,
				Message: fmt.Sprintf("attempt timed out after %s (--attempt-timeout)", r.opts.AttemptTimeout)}
		}
		e.Model = id
		if !e.Retryable || e.noRetry || em.Content() || attempt >= r.opts.Retries {
			return nil, charge(e)
		}
		delay := r.opts.Backoff.Delay(attempt, e.RetryAfter)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < delay {
			return nil, charge(e) // the wait would outlast the call: give up on this model now
		}
		em.Emit(&protocol.RetryEvent{Type: protocol.EventRetry, ID: req.ID, Model: id, Attempt: attempt + 1,
			DelayMS: delay.Milliseconds(), Reason: e.Kind + ": " + e.Message})
		em.waiting()
		if err := r.opts.Backoff.sleep(ctx, delay); err != nil {
			if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
				return nil, charge(&Error{Kind: protocol.KindTimeout, Model: id, Err: context.DeadlineExceeded,
					Message: fmt.Sprintf("model call timed out after %s (--timeout)", r.opts.Timeout)})
			}
			return nil, err
		}
	}
}
