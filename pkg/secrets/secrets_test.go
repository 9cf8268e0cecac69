package secrets

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

const (
	fakeAnthropic = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
	fakeOpenAI    = "sk-proj-ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210"
	fakeGitHub    = "ghp_0123456789abcdefghijABCDEFGHIJ0123456789"
	fakeAWS       = "AKIAIOSFODNN7EXAMPLE"
)

func TestIsSecretName(t *testing.T) {
	for name, want := range map[string]bool{
		"ANTHROPIC_API_KEY": true, "OPENAI_API_KEY": true, "GITHUB_TOKEN": true, "DB_PASSWORD": true,
		"my_secret": true, "AWS_SECRET_ACCESS_KEY": true, "AWS_SESSION_TOKEN": true, "HF_HOME_X": true,
		"ANTHROPIC_AUTH_TOKEN": true, "OPENAI_ORG": true,
		"ANTHROPIC_BASE_URL": false, "AWS_REGION": false, "PATH": false, "HOME": false, "POWERGLIDE_HOME": false,
		"TERM": false, "LANG": false, "SSH_AUTH_SOCK": false,
		"POWERGLIDE_BUDGET_TOKENS": false, "MAX_TOKENS": false, "MAX_TOKENS_KEY": true,
	} {
		if got := IsSecretName(name); got != want {
			t.Errorf("IsSecretName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestScrubEnv(t *testing.T) {
	env := []string{"PATH=/bin", "ANTHROPIC_API_KEY=x", "GITHUB_TOKEN=y", "HOME=/h", "NPM_TOKEN=z"}
	got := strings.Join(ScrubEnv(env, "NPM_TOKEN"), " ")
	if got != "PATH=/bin HOME=/h NPM_TOKEN=z" {
		t.Fatalf("ScrubEnv = %q", got)
	}
}

func TestRedactValues(t *testing.T) {
	r := New(FromEnv([]string{"ANTHROPIC_API_KEY=plain-value-123", "SHORT_KEY=abc", "PATH=/usr/bin", `WEIRD_SECRET=a"b\c<d>e&f`, "LIMIT_TOKEN=1000000000"})...)
	cases := []struct{ in, want string }{
		{"key=plain-value-123", "key=[redacted:ANTHROPIC_API_KEY]"},
		{"twice plain-value-123plain-value-123", "twice [redacted:ANTHROPIC_API_KEY][redacted:ANTHROPIC_API_KEY]"},
		{"abc is short and /usr/bin is no secret", "abc is short and /usr/bin is no secret"},
		{"a number 1000000000 is never redacted", "a number 1000000000 is never redacted"},
		{`raw a"b\c<d>e&f`, "raw [redacted:WEIRD_SECRET]"},
		{"nothing here", "nothing here"},
	}
	for _, c := range cases {
		if got := r.String(c.in); got != c.want {
			t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// A value inside a JSON line is escaped: a quote or a backslash in it
// changes its bytes. Both escapings (with and without HTML) are found,
// and the result stays valid JSON.
func TestRedactInsideJSON(t *testing.T) {
	secret := `p@ss"w\rd<&>` + "\t1234"
	r := New(Secret{Name: "DB_PASSWORD", Value: secret})
	for _, html := range []bool{false, true} {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(html)
		enc.Encode(map[string]string{"output": "the password is " + secret + " ok", "key": fakeAnthropic})
		out := r.Bytes(b.Bytes())
		if !json.Valid(out) {
			t.Fatalf("html=%v: not JSON after redaction: %s", html, out)
		}
		var m map[string]string
		json.Unmarshal(out, &m)
		if m["output"] != "the password is [redacted:DB_PASSWORD] ok" || m["key"] != "[redacted:anthropic-key]" {
			t.Fatalf("html=%v: got %q", html, m)
		}
	}
}

func TestRedactShapes(t *testing.T) {
	var r *Redactor // nil: shapes only
	cases := []struct{ in, want string }{
		{"k=" + fakeAnthropic + "\n", "k=[redacted:anthropic-key]\n"},
		{`"` + fakeOpenAI + `"`, `"[redacted:openai-key]"`},
		{"token " + fakeGitHub + ".", "token [redacted:github-token]."},
		{"github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "[redacted:github-token]"},
		{"id " + fakeAWS + " x", "id [redacted:aws-access-key] x"},
		{"Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc", "Authorization: Bearer [redacted:bearer-token]"},
		{`{"text":"sk-ant-api03-abcdefghijklmnopqrstuvwxyz\nnext"}`, `{"text":"[redacted:anthropic-key]\nnext"}`},
		// Not keys: inside a word, too short, too long for AWS.
		{"task-queue-abcdefghijklmnopqrstuvwxyz", "task-queue-abcdefghijklmnopqrstuvwxyz"},
		{"sk-short", "sk-short"},
		{"AKIAIOSFODNN7EXAMPLEX1", "AKIAIOSFODNN7EXAMPLEX1"},
		{"a bearer of news", "a bearer of news"},
	}
	for _, c := range cases {
		if got := r.String(c.in); got != c.want {
			t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// A known value that is also shaped like a key is redacted by its name.
func TestValueNameBeatsShape(t *testing.T) {
	r := New(Secret{Name: "ANTHROPIC_API_KEY", Value: fakeAnthropic}, Secret{Name: "BEARER_TOKEN", Value: "abcdefghijklmnopqrstuvwxyz"})
	in := "k=" + fakeAnthropic + " Authorization: Bearer abcdefghijklmnopqrstuvwxyz"
	want := "k=[redacted:ANTHROPIC_API_KEY] Authorization: Bearer [redacted:BEARER_TOKEN]"
	for i := 0; i < 20; i++ {
		if got := r.String(in); got != want {
			t.Fatalf("got %q", got)
		}
	}
}

func TestBytesNoCopyWhenClean(t *testing.T) {
	r := New(Secret{Name: "X_KEY", Value: "abcdefghijk"})
	in := []byte(`{"type":"text","text":"hello world"}`)
	if out := r.Bytes(in); &out[0] != &in[0] {
		t.Fatal("clean input was copied")
	}
}

// A secret split across writes of a stream is still redacted whole, and
// nothing of it passes before it is complete.
func TestWriterSplit(t *testing.T) {
	value := "zz-top-secret-value-42"
	r := New(Secret{Name: "MY_TOKEN", Value: value})
	text := "before " + value + " middle " + fakeAnthropic + " end Bearer abcdefghijklmnopqrstuvwxyz0123\n"
	want := "before [redacted:MY_TOKEN] middle [redacted:anthropic-key] end Bearer [redacted:bearer-token]\n"
	for size := 1; size <= len(text); size++ {
		var out bytes.Buffer
		w := r.NewWriter(&out)
		for i := 0; i < len(text); i += size {
			w.Write([]byte(text[i:min(i+size, len(text))]))
			if strings.Contains(out.String(), "zz-top") || strings.Contains(out.String(), "api03") {
				t.Fatalf("size %d: a part of a secret passed: %q", size, out.String())
			}
		}
		w.Flush()
		if out.String() != want {
			t.Fatalf("size %d: got %q", size, out.String())
		}
	}
}

func TestWriterPassesPlainText(t *testing.T) {
	var out bytes.Buffer
	w := New().NewWriter(&out)
	w.Write([]byte("$ ls\nfile.txt\n$ "))
	if out.String() != "$ ls\nfile.txt\n$ " || w.Held() != 0 {
		t.Fatalf("out %q, held %d", out.String(), w.Held())
	}
}

func TestRegister(t *testing.T) {
	Register(Secret{Name: "anthropic_api_key", Value: "from-the-config-file-1"})
	if got := RedactString("x from-the-config-file-1"); got != "x [redacted:anthropic_api_key]" {
		t.Fatalf("got %q", got)
	}
}
