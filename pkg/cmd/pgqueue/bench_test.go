package pgqueue

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/protocol"
)

// BenchmarkCLICycle runs claim+complete through the command line in-process
// (no process start), at 1,000 live tasks, without fsync.
func BenchmarkCLICycle(b *testing.B) {
	home := b.TempDir()
	env := []string{"HOME=" + home, "POWERGLIDE_HOME=" + home, "POWERGLIDE_TEAM=p", "POWERGLIDE_QUEUE_SYNC=false"}
	var in strings.Builder
	for i := 0; i < 1000+b.N; i++ {
		fmt.Fprintf(&in, `{"title":"task %d","prompt":"do it well","labels":{"a":"b"}}`+"\n", i)
	}
	var out, errb bytes.Buffer
	cli.Run(context.Background(), Spec(), []string{"add", "-"}, cli.Test(strings.NewReader(in.String()), &out, &errb, env...))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out.Reset()
		cli.Run(context.Background(), Spec(), []string{"claim", "--worker", "w"}, cli.Test(nil, &out, &errb, env...))
		var t protocol.Task
		json.Unmarshal(out.Bytes(), &t)
		cli.Run(context.Background(), Spec(), []string{"complete", t.ID, "--token", fmt.Sprint(t.Claim.Token)}, cli.Test(nil, &out, &errb, env...))
	}
}
