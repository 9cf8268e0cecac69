package pgtool

import (
	"fmt"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/mcpserver"
)

// MCPCmd serves the tools over MCP on stdio.
type MCPCmd struct{}

// Run serves until the client closes stdin.
func (m *MCPCmd) Run(rt *cli.Runtime, c *CLI) error {
	s, err := c.session(rt, "pg-tool mcp", true)
	if err != nil {
		return err
	}
	err = mcpserver.Serve(rt.Ctx, s, rt.IO.In, rt.IO.Out, cli.VersionString(), rt.IO.Err)
	if cerr := s.Close(); err == nil && cerr != nil {
		fmt.Fprintf(rt.IO.Err, "pg-tool: warning: %v\n", cerr)
	}
	return err
}

// Help is the detailed help of the command (--help and the man page).
func (MCPCmd) Help() string {
	return `Serves the tool set pg-tool serve offers (built-in, external, MCP and term_* tools) to an MCP client over stdio: newline-delimited JSON-RPC on stdin and stdout, diagnostics on stderr. The flags apply as for serve: --root confines the file tools, --sandbox confines every command, --verify vetoes edits, --preset readonly, --allow and --deny choose the tools. A result's text is what pg-loop shows a model (the error first, then the output, and where a cut output was saved in full); a failed call is an MCP tool error (isError); _meta holds powerglide/truncated, powerglide/full_output, powerglide/untrusted, powerglide/sandbox and powerglide/duration_ms. The tools are listed once, at the start: the MCP servers given with --mcp are started (or connected) then, and one that fails is reported on stderr and its tools are left out. bash's working directory persists across calls; the session ends when the client closes stdin.

  $ claude mcp add powerglide -- pg-tool --root ~/src/app mcp
  $ claude mcp add pg-readonly -- pg-tool --preset readonly mcp
  $ npx @modelcontextprotocol/inspector --cli --method tools/list -- pg-tool --verify 'go build ./...' mcp

pg-tool's flags go after --: the MCP Inspector has a --verify of its own.

In codex, ~/.codex/config.toml:

  [mcp_servers.powerglide]
  command = "pg-tool"
  args = ["--root", "/home/me/src/app", "mcp"]`
}
