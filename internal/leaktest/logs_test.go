package leaktest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3/option"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
	"github.com/toolrelay/toolrelay/openai"
	"github.com/toolrelay/toolrelay/openai/openaitest"
)

// The secrets TestLogLevels plants, each where a program's code or
// settings put one.
const (
	secHandlerKV     = "PLANTED-handler-keyvalue"  // a handler's error: host=db password=…
	secHandlerURL    = "PLANTED-handler-url"       // a handler's error: postgres://u:…@db
	secHandlerHeader = "PLANTED-handler-header"    // a handler's error: Authorization: Bearer …
	secPanic         = "PLANTED-panic-value"       // a handler panics with password=…
	secMiddleware    = "PLANTED-middleware"        // a middleware's error: api_key: …
	secJournalError  = "PLANTED-journal-error-url" // a journal's error names its URL
	secAPIKeyHeader  = "PLANTED-api-key-header"    // the API key, in Authorization
	secExtraHeader   = "PLANTED-extra-header"      // a header a program adds
)

var plantedInLogs = []string{secHandlerKV, secHandlerURL, secHandlerHeader, secPanic, secMiddleware, secJournalError, secAPIKeyHeader, secExtraHeader}

// lines collects the JSON lines of a logger.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// records returns the lines, decoded.
func (l *lines) records(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		m["line"] = line
		out = append(out, m)
	}
	return out
}

// runsFail is a journal whose run records cannot be written: its error
// names the database's URL, password included, as a careless driver's
// would.
type runsFail struct{ *journaldriver.Memory }

func (runsFail) PutRun(context.Context, journaldriver.Run) error {
	return errors.New("cannot write to postgres://app:" + secJournalError + "@db.internal:5432/app: connection reset")
}

// TestLogLevels plants secrets in handlers' errors (key/value settings, a
// URL's password, an Authorization header), a panic's value, a
// middleware's and a Verify hook's errors, a journal's error naming its
// URL, and the request headers (the API key, and one the program adds),
// runs the openai backend on its fake with the default logger (slog's,
// as a program that sets none gets) at every level, and scans every line:
// no secret is shown. At Info and above a failed call's line holds no
// internal error text (only its outcome), unless LogCallErrors asks for
// it; at Debug the text is there, redacted. A pause for approval is an
// Info line that holds no error.
func TestLogLevels(t *testing.T) {
	for _, tc := range []struct {
		level      slog.Level
		callErrors bool
	}{
		{slog.LevelDebug, false}, {slog.LevelInfo, false}, {slog.LevelWarn, false}, {slog.LevelError, false}, {slog.LevelInfo, true},
	} {
		name := tc.level.String()
		if tc.callErrors {
			name += "+LogCallErrors"
		}
		t.Run(name, func(t *testing.T) {
			clearEnv(t)
			var out lines
			prev := slog.Default()
			slog.SetDefault(slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: tc.level})))
			t.Cleanup(func() { slog.SetDefault(prev) })

			tools, script := leakyTools(t)
			srv := openaitest.NewServer(script, &openaitest.Options{APIKey: secAPIKeyHeader})
			t.Cleanup(srv.Close)
			b, err := openai.Open(t.Context(), tools, &openai.Options{APIKey: secAPIKeyHeader, BaseURL: srv.URL,
				RequestOptions: []option.RequestOption{option.WithHeader("X-Program-Secret", secExtraHeader)}})
			if err != nil {
				t.Fatal(err)
			}
			j := runsFail{journaldriver.NewMemory()}
			mw := func(next core.CallFunc) core.CallFunc {
				return func(ctx context.Context, call *core.Call) (core.CallResult, error) {
					if call.Name == "guarded" {
						return core.Failure(core.Denied, "not allowed"), errors.New(`policy service said {"api_key": "` + secMiddleware + `"}`)
					}
					return next(ctx, call)
				}
			}
			r := core.NewRunner(b, tools, &core.Options{Journal: j, Middleware: []core.Middleware{mw}, LogCallErrors: tc.callErrors})
			defer r.Close()
			res, err := r.Run(t.Context(), "go", nil)
			if !errors.Is(err, core.ErrAwaitingApproval) {
				t.Fatalf("Run = %v, want a pause for the refund", err)
			}
			if err := r.Decide(t.Context(), res.Thread, res.Pending[0].Key.Call, core.Decision{Approved: true}); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Resume(t.Context(), res.Thread, nil); err != nil {
				t.Fatal(err)
			}

			recs := out.records(t)
			var failedCalls, withError, journalErrors, pauses int
			for _, m := range recs {
				line := m["line"].(string)
				for _, s := range plantedInLogs {
					if strings.Contains(line, s) {
						t.Errorf("a secret is shown (%s): %s", s, line)
					}
				}
				switch {
				case m["msg"] == "toolrelay: run_finished" && strings.Contains(line, "await"):
					pauses++
					if m["level"] != "INFO" || m["error"] != nil || m["awaiting_approval"] != true {
						t.Errorf("the pause is logged as %s with error %v, want INFO, awaiting_approval and no error: %s", m["level"], m["error"], line)
					}
				case m["msg"] == "toolrelay: could not record the run":
					journalErrors++
				case m["msg"] == "toolrelay: call_finished" && m["outcome"] != "ok":
					failedCalls++
					if m["error"] != nil {
						withError++
					}
				}
			}
			want := 0
			if tc.level <= slog.LevelInfo {
				want = 4 // leaky, leaky_url, header, panicky; guarded's is denied, Info
			}
			if tc.level <= slog.LevelInfo && failedCalls < want {
				t.Errorf("%d failed calls logged, want %d:\n%s", failedCalls, want, out.buf.String())
			}
			if tc.level <= slog.LevelInfo && pauses != 1 {
				t.Errorf("%d pauses logged, want 1:\n%s", pauses, out.buf.String())
			}
			if tc.level <= slog.LevelWarn && journalErrors == 0 {
				t.Errorf("the journal's failure is not logged:\n%s", out.buf.String())
			}
			switch {
			case tc.level == slog.LevelDebug || tc.callErrors:
				if withError != failedCalls || !strings.Contains(out.buf.String(), "xxxxx") {
					t.Errorf("%d of %d failed calls logged with their (redacted) error, want all:\n%s", withError, failedCalls, out.buf.String())
				}
			case withError != 0:
				t.Errorf("%d failed calls logged with their internal error at %v, want none:\n%s", withError, tc.level, out.buf.String())
			}
		})
	}
}

// leakyTools returns tools whose handlers fail with secrets in their
// errors, a refund that needs approval, and the script that calls them
// all in one step.
func leakyTools(t *testing.T) (*core.Toolbox, *coretest.Script) {
	t.Helper()
	fail := func(name string, err error) *core.Tool {
		tool, terr := core.NewTool(name, "", func(context.Context, struct{}) (string, error) { return "", err }, nil)
		if terr != nil {
			t.Fatal(terr)
		}
		return tool
	}
	panicky, err := core.NewTool("panicky", "", func(context.Context, struct{}) (string, error) {
		panic("config: password=" + secPanic)
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	refund, err := core.NewTool("refund", "", func(context.Context, struct{}) (string, error) { return "refunded", nil },
		&core.ToolOptions{Approval: core.ApprovalAlways("refunds need a person")})
	if err != nil {
		t.Fatal(err)
	}
	tools, err := core.NewToolbox(
		fail("leaky", fmt.Errorf("connect host=db.internal password=%s user=app: refused", secHandlerKV)),
		fail("leaky_url", fmt.Errorf("open postgres://app:%s@db.internal/app: refused", secHandlerURL)),
		fail("header", fmt.Errorf("upstream refused Authorization: Bearer %s", secHandlerHeader)),
		fail("guarded", nil),
		panicky, refund)
	if err != nil {
		t.Fatal(err)
	}
	var calls []coretest.Call
	for _, n := range []string{"leaky", "leaky_url", "header", "guarded", "panicky", "refund"} {
		calls = append(calls, coretest.Call{Name: n, Arguments: []byte(`{}`)})
	}
	return tools, &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{{Calls: calls}, {Text: "done"}}}}}
}
