// Command benchfeed makes and feeds a fake team for scripts/bench-dash.sh:
//
//	benchfeed team HOME TEAM N          write a team of N workers and 4N tasks
//	benchfeed feed HOME TEAM N RATE DUR WHO
//	    append RATE loop events a second for DUR to the logs (WHO is
//	    "one": all to worker 1's log, or "all": round-robin over the N
//	    workers) and rewrite every worker's heartbeat once a second
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/powerglide/powerglide/pkg/atomicfile"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "benchfeed: error:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 4 {
		return fmt.Errorf("usage: benchfeed team|feed HOME TEAM N [RATE DUR WHO]")
	}
	d, err := teamdir.New(args[1], args[2])
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(args[3])
	if err != nil {
		return err
	}
	switch args[0] {
	case "team":
		return team(d, n)
	case "feed":
		if len(args) != 7 {
			return fmt.Errorf("usage: benchfeed feed HOME TEAM N RATE DUR one|all")
		}
		rate, err := strconv.Atoi(args[4])
		if err != nil {
			return err
		}
		dur, err := time.ParseDuration(args[5])
		if err != nil {
			return err
		}
		return feed(d, n, rate, dur, args[6] == "all")
	}
	return fmt.Errorf("unknown mode %q", args[0])
}

func worker(i int, now time.Time) *protocol.Worker {
	return &protocol.Worker{Worker: strconv.Itoa(i), State: []string{"thinking", "executing", "observing", "verify"}[i%4],
		Task: fmt.Sprintf("t-%03d", 4*(i-1)+1), Step: i, HeartbeatAt: now, ProgressAt: now, StartedAt: now.Add(-time.Hour),
		Usage: protocol.Usage{InputTokens: 1000 * i, OutputTokens: 100 * i, CostUSD: 0.01 * float64(i)}, Velocity: 1}
}

func team(d teamdir.Dir, n int) error {
	if err := d.Ensure(); err != nil {
		return err
	}
	now := time.Now().UTC()
	var tasks []protocol.Task
	for i := 0; i < 4*n; i++ {
		st := []string{"claimed", "pending", "done", "failed"}[i%4]
		tasks = append(tasks, protocol.Task{ID: fmt.Sprintf("t-%03d", i), Title: fmt.Sprintf("benchmark task %d with a realistic title", i),
			Status: st, DependsOn: []string{}, Labels: map[string]string{}, CreatedAt: now, UpdatedAt: now})
	}
	b, _ := json.MarshalIndent(map[string]any{"tasks": tasks}, "", "  ")
	if err := atomicfile.WriteFile(d.Queue(), b, 0o644); err != nil {
		return err
	}
	for i := 1; i <= n; i++ {
		if err := d.WriteWorker(worker(i, now)); err != nil {
			return err
		}
	}
	return nil
}

func line(i int) []byte {
	ts := time.Now().UTC().Format(time.RFC3339Nano)
	var s string
	switch i % 4 {
	case 0:
		s = fmt.Sprintf(`{"type":"tool_call","ts":%q,"step":%d,"call":{"id":"c%d","name":"bash","input":{"command":"go test ./pkg/... -run TestNumber%d"}}}`, ts, i, i, i)
	case 1:
		s = fmt.Sprintf(`{"type":"tool_result","ts":%q,"step":%d,"result":{"type":"result","id":"c%d","name":"bash","ok":true,"output":"ok  pkg/a 0.1s\nok  pkg/b 0.2s","error":null,"truncated":false,"duration_ms":310}}`, ts, i, i)
	case 2:
		s = fmt.Sprintf(`{"type":"assistant","ts":%q,"step":%d,"thinking":"Checking the edge case of an empty queue next.","text":"Tests pass.","usage":{"input_tokens":1200,"output_tokens":80},"total":{"input_tokens":%d,"output_tokens":%d}}`, ts, i, 1200*i, 80*i)
	default:
		s = fmt.Sprintf(`{"type":"state","ts":%q,"step":%d,"from":"thinking","to":"tool_call"}`, ts, i)
	}
	return append([]byte(s), '\n')
}

func feed(d teamdir.Dir, n, rate int, dur time.Duration, all bool) error {
	logs := make([]*os.File, n+1)
	for i := 1; i <= n; i++ {
		f, err := os.OpenFile(d.Log(strconv.Itoa(i)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		logs[i] = f
	}
	// Lines go out in batches every 10ms, as a busy worker writes them.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	lastBeat := time.Time{}
	sent := 0
	for now := range tick.C {
		if now.Sub(start) >= dur {
			return nil
		}
		want := int(float64(rate) * now.Sub(start).Seconds())
		for ; sent < want; sent++ {
			w := 1
			if all {
				w = 1 + sent%n
			}
			if _, err := logs[w].Write(line(sent)); err != nil {
				return err
			}
		}
		if now.Sub(lastBeat) >= time.Second {
			lastBeat = now
			for i := 1; i <= n; i++ {
				if err := d.WriteWorker(worker(i, now.UTC())); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
