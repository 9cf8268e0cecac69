package tool

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/powerglide/powerglide/pkg/internal/lazyre"
	"github.com/powerglide/powerglide/pkg/secrets"
	"github.com/powerglide/powerglide/pkg/termtext"
)

// MCP servers over HTTP: "name=https://host/path" (http:// only on
// loopback) speaks the streamable HTTP transport, and falls back to the
// legacy HTTP+SSE transport when the server rejects the streamable POST
// with 400, 404 or 405, as the MCP specification's backwards compatibility
// section has clients do. Headers (--mcp-header, the config key
// mcp_headers) go with every request; their values, and the variables
// they name, are registered as secrets, so no result shows them.

// MCPHeader is one HTTP header sent to an MCP server. Value may name
// environment variables as ${NAME}; they are read when the session starts.
type MCPHeader struct {
	Server string
	Key    string
	Value  string
}

// ParseMCPHeader reads a --mcp-header spec, "server:Key=Value".
func ParseMCPHeader(spec string) (MCPHeader, error) {
	server, kv, ok := strings.Cut(spec, ":")
	key, value, ok2 := strings.Cut(kv, "=")
	h := MCPHeader{Server: strings.TrimSpace(server), Key: strings.TrimSpace(key), Value: value}
	if !ok || !ok2 || h.Server == "" || h.Key == "" {
		return MCPHeader{}, fmt.Errorf("bad MCP header %q: want server:Key=Value, e.g. gh:Authorization=Bearer ${GITHUB_TOKEN}", clipSpec(spec))
	}
	return h, nil
}

// clipSpec shows the start of a header spec in an error, never its value.
func clipSpec(spec string) string {
	if i := strings.Index(spec, "="); i >= 0 {
		return spec[:i+1] + "..."
	}
	return spec
}

func isURL(target string) bool {
	t := strings.ToLower(target)
	return strings.HasPrefix(t, "https://") || strings.HasPrefix(t, "http://")
}

// httpEndpoint is an MCP server reached over HTTP.
type httpEndpoint struct {
	name    string
	url     string
	shown   string // the URL without its query, for messages
	query   string // the raw query, kept out of messages
	scheme  string // where the headers may go
	host    string
	headers http.Header // values expanded
	unset   error       // a header names a variable that is not set
	status  atomic.Int32
	client  *http.Client
}

func newHTTPEndpoint(name, raw string) (*httpEndpoint, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("bad MCP server URL for %s: want https://host/path (http:// on loopback only)", name)
	}
	shown := u.Scheme + "://" + u.Host + u.Path
	if u.User != nil {
		return nil, fmt.Errorf("MCP server %s (%s): credentials in the URL are refused; send them with --mcp-header %s:Authorization=VALUE", name, shown, name)
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
	case "http":
		if !loopback(u.Hostname()) {
			return nil, fmt.Errorf("MCP server %s (%s): plain http:// is allowed on loopback only (127.0.0.1, [::1], localhost); use https://", name, shown)
		}
	default:
		return nil, fmt.Errorf("bad MCP server URL for %s: scheme %q (want https, or http on loopback)", name, u.Scheme)
	}
	// A key in the query (?api_key=...) is a secret like a header.
	for k, vs := range u.Query() {
		if secrets.IsSecretName(k) {
			for _, v := range vs {
				secrets.Register(secrets.Secret{Name: "mcp." + name + "." + k, Value: v})
			}
		}
	}
	e := &httpEndpoint{name: name, url: raw, shown: shown, query: u.RawQuery, scheme: u.Scheme, host: u.Host, headers: http.Header{}}
	e.client = &http.Client{Transport: e}
	return e, nil
}

func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

var envRefRe = lazyre.Compile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// setHeaders attaches headers to their HTTP servers, expanding ${NAME}
// from the session's environment, and registers every value as a secret.
func (m *mcpManager) setHeaders(headers []MCPHeader) error {
	env := m.s.opts.Env
	if env == nil {
		env = os.Environ()
	}
	lookup := func(name string) (string, bool) {
		for i := len(env) - 1; i >= 0; i-- {
			if k, v, ok := strings.Cut(env[i], "="); ok && k == name {
				return v, true
			}
		}
		return "", false
	}
	for _, h := range headers {
		srv := m.servers[h.Server]
		if srv == nil {
			return fmt.Errorf("MCP header for %q: no MCP server of that name (servers: %s)", h.Server, strings.Join(m.order, ", "))
		}
		if srv.http == nil {
			return fmt.Errorf("MCP header for %q: that server runs a command (%s); headers are for servers reached over HTTP", h.Server, srv.cmdline)
		}
		if !validHeaderName(h.Key) {
			return fmt.Errorf("MCP header for %q: %q is no valid header name", h.Server, h.Key)
		}
		var missing []string
		value := envRefRe().ReplaceAllStringFunc(h.Value, func(ref string) string {
			name := ref[2 : len(ref)-1]
			v, ok := lookup(name)
			if !ok || v == "" {
				missing = append(missing, name)
				return ""
			}
			secrets.Register(secrets.Secret{Name: name, Value: v})
			return v
		})
		if len(missing) > 0 {
			srv.http.unset = errors.Join(srv.http.unset, fmt.Errorf("header %s names the environment variable %s, which is not set", h.Key, strings.Join(missing, ", ")))
			continue
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			return fmt.Errorf("MCP header %s for %q: the value holds a line break or NUL", h.Key, h.Server)
		}
		secrets.Register(secrets.Secret{Name: "mcp_headers." + h.Server + "." + h.Key, Value: value})
		srv.http.headers.Set(h.Key, value)
	}
	return nil
}

// validHeaderName: an HTTP token (RFC 9110).
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		if c > 126 || c <= 32 || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, c) {
			return false
		}
	}
	return true
}

// RoundTrip sends a request with the server's headers (protocol headers
// the SDK set stay as they are) and notes the status of each POST, which
// decides the fallback to SSE. The headers go to the server's own scheme
// and host only, never to another one a redirect or an SSE endpoint event
// points to.
func (e *httpEndpoint) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(e.headers) > 0 && strings.EqualFold(req.URL.Scheme, e.scheme) && strings.EqualFold(req.URL.Host, e.host) {
		req = req.Clone(req.Context())
		for k, v := range e.headers {
			if req.Header.Get(k) == "" {
				req.Header[k] = v
			}
		}
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil && req.Method == http.MethodPost {
		e.status.Store(int32(resp.StatusCode))
	}
	return resp, err
}

// connect opens a session: streamable HTTP, else legacy SSE when the
// server's answer to the streamable POST says it does not speak it.
func (e *httpEndpoint) connect(ctx context.Context, s *Session) (*mcp.ClientSession, error) {
	if e.unset != nil {
		return nil, fmt.Errorf("mcp server %s (%s) not connected: %w", e.name, e.shown, e.unset)
	}
	e.status.Store(0)
	// No standalone GET stream: pg-tool needs no message the server
	// starts, and a server or proxy that closes an idle stream would
	// otherwise break the session between calls. A call whose stream
	// breaks is resumed twice at most (the SDK's default, five, has a
	// call wait some 20 s on a server that is gone).
	cs, err := mcpClient().Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.url, HTTPClient: e.client, DisableStandaloneSSE: true, MaxRetries: 2}, nil)
	if err == nil {
		return cs, nil
	}
	switch st := e.status.Load(); {
	case st == http.StatusBadRequest || st == http.StatusNotFound || st == http.StatusMethodNotAllowed:
		cs, sseErr := mcpClient().Connect(ctx, &detached{&mcp.SSEClientTransport{Endpoint: e.url, HTTPClient: e.client}}, nil)
		if sseErr == nil {
			return cs, nil
		}
		return nil, fmt.Errorf("mcp server %s (%s) not connected: streamable HTTP: %s (HTTP %d); legacy SSE: %s", e.name, e.shown, e.scrub(err), st, e.scrub(sseErr))
	case st == http.StatusUnauthorized || st == http.StatusForbidden:
		return nil, fmt.Errorf("mcp server %s (%s) not connected: HTTP %d %s: check its headers (--mcp-header %s:Authorization=..., config mcp_headers)", e.name, e.shown, st, http.StatusText(int(st)), e.name)
	}
	return nil, fmt.Errorf("mcp server %s (%s) not connected: %s", e.name, e.shown, e.scrub(err))
}

// scrub is the first line of err with the URL's query left out: the
// transport's errors quote the whole URL, and a query may hold a key
// whose name does not say so (?sig=, ?code=).
func (e *httpEndpoint) scrub(err error) string {
	msg := termtext.FirstLine(err.Error())
	if e.query == "" {
		return msg
	}
	return strings.ReplaceAll(msg, "?"+e.query, "?…")
}

// detached connects a transport whose connection lives in the context it
// was connected with (the SSE transport's stream) so that the connection
// outlives the connect's deadline; it ends when the connection closes.
type detached struct{ mcp.Transport }

func (d *detached) Connect(ctx context.Context) (mcp.Connection, error) {
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	type result struct {
		conn mcp.Connection
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := d.Transport.Connect(life)
		ch <- result{c, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			cancel()
			return nil, r.err
		}
		return &cancelOnClose{Connection: r.conn, cancel: cancel}, nil
	case <-ctx.Done():
		cancel()
		return nil, ctx.Err()
	}
}

type cancelOnClose struct {
	mcp.Connection
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.Connection.Close()
	c.cancel()
	return err
}
