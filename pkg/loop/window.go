package loop

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/powerglide/powerglide/pkg/internal/lazyre"
	"github.com/powerglide/powerglide/pkg/protocol"
)

// The context window. Before each model call the request is estimated
// (tokens.go) against the usable window: the model's window less
// max_tokens and the reserve. Past the soft threshold old tool outputs are
// pruned; past the hard one older turns are summarized; a request still
// over the usable window has its remaining long outputs cut, and if even
// that cannot bring it under, the task fails saying so. No request leaves
// the loop that its own estimate puts over the window.

// Defaults of the thresholds, as shares of the usable window.
const (
	DefaultContextSoft = 0.7
	DefaultContextHard = 0.9
)

// prunedMin is the size under which a tool output is kept even when old.
const prunedMin = 256

// minOutputTokens is the smallest cut of a tool output: a head and a tail
// still worth reading.
const minOutputTokens = 200

// ContextError is a conversation that cannot be made to fit the window.
type ContextError struct{ Reason string }

func (e *ContextError) Error() string { return "context window: " + e.Reason }

// EstimateTokens estimates the tokens of a request at the byte ratio of a
// model without a known tokenizer (see Estimator).
func EstimateTokens(req *protocol.Request) int {
	return (&Estimator{factor: 1}).Request(req)
}

// fullOutputRE finds the file a cut output names.
var fullOutputRE = lazyre.Compile(`the whole output is in (\S+?)[;\]\s]`)

// pruneBefore replaces the output of tool results in msgs[:before] with a
// short marker (naming the file that holds it whole, when one does). It
// returns a new slice; msgs is not changed.
func pruneBefore(msgs []protocol.Message, before int) []protocol.Message {
	if before > len(msgs) {
		before = len(msgs)
	}
	out := make([]protocol.Message, len(msgs))
	copy(out, msgs)
	for i := 0; i < before; i++ {
		m := out[i]
		changed := false
		blocks := make(protocol.Content, len(m.Content))
		for j, b := range m.Content {
			if b.Type == protocol.BlockToolResult && len(b.Output) > prunedMin && !strings.HasPrefix(b.Output, "[pruned") {
				marker := fmt.Sprintf("[pruned: %d bytes of old tool output", len(b.Output))
				if f := fullOutputRE().FindStringSubmatch(b.Output); f != nil {
					marker += "; the whole output is in " + f[1]
				}
				b.Output = marker + "]"
				changed = true
			}
			blocks[j] = b
		}
		if changed {
			out[i] = protocol.Message{Role: m.Role, Content: blocks}
		}
	}
	return out
}

// prunable reports whether pruneBefore(msgs, before) would change anything.
func prunable(msgs []protocol.Message, before int) bool {
	for i := 0; i < min(before, len(msgs)); i++ {
		for _, b := range msgs[i].Content {
			if b.Type == protocol.BlockToolResult && len(b.Output) > prunedMin && !strings.HasPrefix(b.Output, "[pruned") {
				return true
			}
		}
	}
	return false
}

// summaryHeading starts the summary folded into a task's first message.
const summaryHeading = "\n\n## Summary of the earlier work on this task\n\n"

// applySummary keeps the first message (the task) and msgs[keepFrom:],
// and folds the summary of what lies between into the first message, in
// place of an earlier summary (the new one covers it).
func applySummary(msgs []protocol.Message, keepFrom int, summary string) []protocol.Message {
	if len(msgs) == 0 || keepFrom < 1 || keepFrom > len(msgs) {
		return msgs
	}
	task, _, _ := strings.Cut(msgs[0].Content.Text(), summaryHeading)
	text := task + summaryHeading + summary
	out := []protocol.Message{{Role: protocol.RoleUser, Content: protocol.Content{{Type: protocol.BlockText, Text: text}}}}
	return append(out, msgs[keepFrom:]...)
}

// summaryCut picks where the kept recent turns start: an assistant message
// at least keep messages from the end, so no tool result loses its call.
// It returns 0 when there is nothing old enough to summarize.
func summaryCut(msgs []protocol.Message, keep int) int {
	for i := len(msgs) - keep; i >= 2; i-- {
		if msgs[i].Role == protocol.RoleAssistant {
			return i
		}
	}
	return 0
}

// transcript renders messages as plain text for the summarizer.
func transcript(msgs []protocol.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		for _, bl := range m.Content {
			switch bl.Type {
			case protocol.BlockText:
				fmt.Fprintf(&b, "[%s] %s\n", m.Role, bl.Text)
			case protocol.BlockToolCall:
				fmt.Fprintf(&b, "[%s called %s] %s\n", m.Role, bl.Name, bl.Input)
			case protocol.BlockToolResult:
				out := bl.Output
				if len(out) > 2000 {
					out = headTail(out, 1000, 1000, "\n...\n")
				}
				status := "ok"
				if bl.IsError {
					status = "error"
				}
				fmt.Fprintf(&b, "[tool result, %s] %s\n", status, out)
			}
		}
	}
	return b.String()
}

const summarizeSystem = "You compress the history of a coding agent's work so it can continue with less context. " +
	"Write a concise summary: what was done, which files were changed and how, what was learned, what failed, and what remains. " +
	"Keep exact file names, commands and error messages that still matter. Do not call tools."

// headTail keeps about head bytes from the start of s and tail from its
// end around marker, cut on line ends when one is near and never inside a
// UTF-8 sequence.
func headTail(s string, head, tail int, marker string) string {
	if head+tail >= len(s) {
		return s
	}
	h := s[:head]
	if j := strings.LastIndexByte(h, '\n'); j > head*3/4 {
		h = h[:j+1]
	}
	// A rune cut at the end of the head is dropped whole (at most
	// utf8.UTFMax-1 bytes, whatever the bytes before: output may be binary).
	if j := len(h) - 1; j >= 0 {
		for j > 0 && len(h)-j < utf8.UTFMax-1 && !utf8.RuneStart(h[j]) {
			j--
		}
		if !utf8.FullRuneInString(h[j:]) {
			h = h[:j]
		}
	}
	t := s[len(s)-tail:]
	if j := strings.IndexByte(t, '\n'); j >= 0 && j < tail/4 {
		t = t[j+1:]
	}
	for i := 0; i < utf8.UTFMax-1 && len(t) > 0 && !utf8.RuneStart(t[0]); i++ {
		t = t[1:]
	}
	return h + marker + t
}

// cutText keeps about maxTokens of s, its head and tail, with marker (a
// format taking the number of bytes left out) between them. It reports
// whether s was cut.
func (e *Estimator) cutText(s string, maxTokens int, marker string) (string, bool) {
	n := e.Text(s)
	if n <= maxTokens || len(s) == 0 {
		return s, false
	}
	// bytes a token in this text, with a margin for the uneven spread
	keep := int(float64(len(s)) / float64(n) * float64(maxTokens) * 0.9)
	keep = max(keep-len(marker)-16, 64)
	head := keep * 2 / 3
	tail := keep - head
	omitted := len(s) - head - tail
	return headTail(s, head, tail, fmt.Sprintf(marker, omitted)), true
}

// saveOutput writes a whole output to a new file of dir (0600) and
// returns its path.
func saveOutput(dir, tool, text string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	for try := 0; ; try++ {
		var b [4]byte
		_, _ = rand.Read(b[:])
		p := filepath.Join(dir, fmt.Sprintf("%s-%s-%s.txt", time.Now().UTC().Format("20060102T150405"), safeName(tool), hex.EncodeToString(b[:])))
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) && try < 10 {
			continue
		}
		if err != nil {
			return "", err
		}
		_, err = f.WriteString(text)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return p, err
	}
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, s)
}

// usable is the window a request may fill: the model's window less
// max_tokens and the reserve.
func (r *Runner) usable() int { return r.o.ContextWindow - r.o.MaxTokens - r.o.Reserve }

// outputMax is the most tokens one tool output keeps in the conversation.
func (r *Runner) outputMax() int {
	if r.o.ToolOutputMax > 0 {
		return r.o.ToolOutputMax
	}
	return max(r.usable()/4, minOutputTokens)
}

// outputDir is where cut outputs are saved whole.
func (r *Runner) outputDir() string {
	if r.o.OutputDir != "" {
		return r.o.OutputDir
	}
	if r.o.Session != nil {
		return filepath.Join(r.o.Session.Dir, "outputs")
	}
	return filepath.Join(os.TempDir(), "pg-loop-output")
}

// cutOutput cuts a tool output longer than maxTokens to its head and tail
// and saves it whole, naming the file in the cut text. An output that
// already names the file holding it whole is not saved again.
func (r *Runner) cutOutput(tool, out string, maxTokens int) string {
	if n := r.est.Text(out); n <= maxTokens {
		return out
	}
	note := ""
	if f := fullOutputRE().FindStringSubmatch(out + "\n"); f != nil {
		note = "; the whole output is in " + f[1]
	} else if p, err := saveOutput(r.outputDir(), tool, out); err != nil {
		r.log("warn", "save a cut tool output: %v", err)
		note = "; saving the whole output failed"
	} else {
		note = "; the whole output is in " + p + "; read parts of it with the read tool (offset, limit)"
	}
	cut, _ := r.est.cutText(out, maxTokens, "\n\n[... %d bytes cut to fit the context window"+strings.ReplaceAll(note, "%", "%%")+" ...]\n\n")
	return cut
}

// window keeps the next request inside the model's context window.
func (r *Runner) window(ctx context.Context) error {
	if r.o.ContextWindow <= 0 {
		return nil
	}
	est := r.est.Request(r.request(r.cur.conv))
	if est <= int(float64(r.usable())*r.o.ContextSoft) {
		return nil
	}
	return r.compact(ctx, est, false)
}

// compact brings the conversation under the window: old tool outputs are
// pruned (soft threshold), older turns summarized (hard threshold), then
// the remaining long texts cut, until the estimate fits. forced (the
// provider reported an overflow the estimate missed) compacts to well
// under the last estimate, whatever the thresholds.
func (r *Runner) compact(ctx context.Context, est int, forced bool) error {
	tr := r.cur
	usable := r.usable()
	if r.o.ContextWindow <= 0 {
		usable = est // the window is unknown: only what the overflow says
	}
	target, hard := usable, int(float64(usable)*r.o.ContextHard)
	if forced {
		target = min(target, est*3/4)
		hard = min(hard, target)
	}
	measure := func() int { est = r.est.Request(r.request(tr.conv)); return est }

	// Soft: old tool outputs.
	if before := len(tr.conv) - r.o.KeepMessages; before > 1 && prunable(tr.conv, before) {
		r.prune(before)
		r.log("info", "context window: pruned old tool outputs, about %d tokens now (hard threshold %d, limit %d)", measure(), hard, target)
	}
	if est <= hard && !forced {
		return nil
	}
	// Hard: summarize older turns, unless a summary that did not help was
	// made and nothing much has come since. After an overflow the estimate
	// is not trusted: both steps are taken.
	if cut := summaryCut(tr.conv, r.o.KeepMessages); cut > 0 && (forced || len(tr.conv) >= tr.summaryAgain) {
		if err := r.summarize(ctx, cut, target); err != nil {
			return err
		}
		if measure() > hard {
			tr.summaryAgain = len(tr.conv) + r.o.KeepMessages
			r.log("warn", "context window: the summary left about %d tokens, over the hard threshold %d; no new summary before %d more messages", est, hard, r.o.KeepMessages)
		}
	}
	if est <= target {
		return nil
	}
	// Over the limit still: the recent turns hold too much.
	if before := len(tr.conv) - 1; before > 1 && prunable(tr.conv, before) {
		r.prune(before)
		r.log("info", "context window: pruned every tool output but the last turn's, about %d tokens now (limit %d)", measure(), target)
	}
	for maxTok := r.outputMax() / 2; est > target && maxTok >= minOutputTokens; maxTok /= 2 {
		if r.cutRecent(maxTok) {
			r.log("info", "context window: cut the recent long texts to %d tokens each, about %d tokens now (limit %d)", maxTok, measure(), target)
		}
	}
	if est > target {
		// The last resort, whatever an earlier summary did.
		if cut := summaryCut(tr.conv, 2); cut > 0 {
			if err := r.summarize(ctx, cut, target); err != nil {
				return err
			}
			measure()
		}
	}
	if est > target && forced {
		return &ContextError{Reason: fmt.Sprintf("the model found the request too long and compacting brought it only to about %d tokens (aimed at %d): nothing more to compact", est, target)}
	}
	if est > target {
		base := r.est.Request(r.request(tr.conv[:1]))
		return &ContextError{Reason: fmt.Sprintf("the conversation does not fit: about %d tokens after compaction, the limit is %d (window %d less max_tokens %d and reserve %d); the system prompt, tools and task alone take about %d",
			est, target, r.o.ContextWindow, r.o.MaxTokens, r.o.Reserve, base)}
	}
	return nil
}

// prune prunes the tool outputs of the messages before before, and
// remembers it.
func (r *Runner) prune(before int) {
	tr := r.cur
	tr.conv = pruneBefore(tr.conv, before)
	r.remember(MemoryRecord{Type: MemPrune, Task: tr.task.ID, Before: before})
}

// cutRecent cuts every text of the conversation but the task (tool
// outputs, the model's text, feedback) longer than maxTok tokens, and
// remembers each changed message. Thinking is never changed: providers
// check its signature.
func (r *Runner) cutRecent(maxTok int) bool {
	tr := r.cur
	any := false
	for i := 1; i < len(tr.conv); i++ {
		m := tr.conv[i]
		var blocks protocol.Content
		for j, b := range m.Content {
			switch b.Type {
			case protocol.BlockToolResult:
				if out := r.cutOutput("output", b.Output, maxTok); out != b.Output {
					b.Output = out
				} else {
					continue
				}
			case protocol.BlockText:
				if txt := r.cutOutput(m.Role, b.Text, maxTok); txt != b.Text {
					b.Text = txt
				} else {
					continue
				}
			default:
				continue
			}
			if blocks == nil {
				blocks = append(protocol.Content(nil), m.Content...)
			}
			blocks[j] = b
		}
		if blocks != nil {
			nm := protocol.Message{Role: m.Role, Content: blocks}
			tr.conv[i] = nm
			r.remember(MemoryRecord{Type: MemReplace, Task: tr.task.ID, Index: i, Message: &nm})
			any = true
		}
	}
	return any
}

// summarize replaces tr.conv[1:cut] by a summary the model writes. Its
// request is kept inside limit: the transcript is cut in the middle when
// it would not fit.
func (r *Runner) summarize(ctx context.Context, cut, limit int) error {
	tr := r.cur
	room := limit - r.est.Request(&protocol.Request{System: summarizeSystem}) - 64
	task, _ := r.est.cutText(tr.conv[0].Content.Text(), room/4, "\n[... %d bytes of the task left out ...]\n")
	room -= r.est.Text(task)
	// The transcript is sized by bytes: tokenizing all of it would cost
	// more than the rest of the compaction.
	text := transcript(tr.conv[1:cut])
	if n := int(float64(len(text)) / bytesPerToken * r.est.Factor()); n > room {
		keep := max(int(float64(room)*bytesPerToken/r.est.Factor())-64, 256)
		text = headTail(text, keep/3, keep-keep/3, fmt.Sprintf("\n[... %d bytes of the transcript left out ...]\n", len(text)-keep))
	}
	req := &protocol.Request{Model: r.o.Model, System: summarizeSystem, MaxTokens: r.o.MaxTokens,
		Messages: []protocol.Message{r.userMessage("The task:\n" + task + "\n\nThe work so far:\n" + text + "\nSummarize it.")}}
	if err := r.o.Budget.Check(r.usage, r.est.Request(req), r.o.MaxTokens); err != nil {
		return err
	}
	start, waited := time.Now(), r.times.wait
	end, err := r.call(ctx, req, nil)
	r.times.model += time.Since(start) - (r.times.wait - waited)
	if err != nil {
		return fmt.Errorf("summarize the conversation: %w", err)
	}
	u := end.Usage
	r.spend(u)
	tr.usage = tr.usage.Add(u)
	summary := strings.TrimSpace(end.Message.Content.Text())
	if r.o.ContextWindow > 0 {
		// A summary longer than a tool output may be is cut like one.
		summary = r.cutOutput("summary", summary, r.outputMax())
	}
	tr.conv = applySummary(tr.conv, cut, summary)
	r.remember(MemoryRecord{Type: MemSummary, Task: tr.task.ID, KeepFrom: cut, Summary: summary, Usage: &u})
	r.log("info", "context window: summarized %d messages, about %d tokens now", cut-1, r.est.Request(r.request(tr.conv)))
	return nil
}

// windowFailure turns a failed compaction into the loop's input: a
// summarizing call past the budget ends the run, a conversation that
// cannot fit fails its task.
func (r *Runner) windowFailure(err error) (Input, string) {
	var le *LimitError
	var ce *ContextError
	switch {
	case r.cur.ctx.Err() != nil:
		return r.taskCtxErr()
	case errors.As(err, &le):
		return r.limit(le, true)
	case errors.As(err, &ce):
		r.log("error", "%v", ce)
		return r.taskFail(ce.Error(), false)
	}
	return r.modelFailure(err)
}

// callModel makes a model call of the task, timed, and calibrates the
// estimate with the input tokens the provider counted. A call whose model
// coprocess died (killed, out of memory) is made once more, on a fresh
// one: a model call is safe to repeat. A second death ends the run.
func (r *Runner) callModel(ctx context.Context, req *protocol.Request) (*protocol.EndEvent, error) {
	start, waited := time.Now(), r.times.wait
	end, err := r.call(ctx, req, r.onModelEvent)
	if de := (*DiedError)(nil); errors.As(err, &de) && ctx.Err() == nil {
		r.log("warn", "%v during a call: making the call again on a fresh one", err)
		end, err = r.call(ctx, req, r.onModelEvent)
	}
	r.times.model += time.Since(start) - (r.times.wait - waited)
	if err == nil && !end.Usage.Estimated { // an estimate would only calibrate the estimator by itself
		u := end.Usage
		r.est.Calibrate(req, u.InputTokens+u.CacheReadTokens+u.CacheWriteTokens)
	}
	return end, err
}
