package tool

// builtinTools is every built-in tool, in the order `list` shows them.
// They are defined in bash.go, files.go (read, write, ls), edit.go,
// search.go (glob, grep) and term.go (term_*). The skill tool (skill.go)
// joins them when the session has skills; external and MCP tools come
// after them in Session.Tools.
func builtinTools() []*Tool {
	return []*Tool{bashTool, readTool, writeTool, editTool, globTool, grepTool, lsTool,
		termStartTool, termSendTool, termReadTool, termScreenTool, termKillTool}
}
