package fakes

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/toolrelay/toolrelay/conformance"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/replay"
)

// Tape says where the harnesses of [Taped] keep their cassettes, and
// whether they record them or replay them.
type Tape struct {
	// Dir holds one cassette per scenario and, beside it (.fake.json),
	// what the scenario asked the fake (Received, OnService) while
	// recording. A scenario's files are named after its test's name past
	// a part named Record or Replay ("TestX/Record/Basic" and
	// "TestX/Replay/Basic" share Basic.yaml), "/" written "_".
	Dir string
	// Replay replays the cassettes with the fakes stopped; else the
	// scenarios run on the fakes and their traffic is recorded.
	Replay bool
}

// tapeable is a harness of this package whose backends' transport can be
// wrapped, and whose fake can be stopped.
type tapeable interface {
	conformance.Harness
	conformance.Reopener
	conformance.Inventory
	// tape wraps the transport of the backends made from now on; with
	// replaying set, the harness is not to check its fake at Close.
	tape(wrap func(http.RoundTripper) http.RoundTripper, replaying bool)
	// stop stops the fake.
	stop()
}

// Taped returns harnesses like those of newHarness (OpenAI's or
// Foundry's of this package), whose backends' traffic goes through a
// cassette per scenario (package replay): recorded on the fake, or
// replayed with the fake stopped, so that a scenario that passes in both
// shows that the cassette replays the run as it was recorded. Replaying,
// the cassette fails closed on a request it did not record, and Close
// fails the scenario when a recorded request was never sent.
func Taped(tape Tape, newHarness conformance.HarnessMaker) conformance.HarnessMaker {
	return func(ctx context.Context, t *testing.T) (conformance.Harness, error) {
		h, err := newHarness(ctx, t)
		if err != nil {
			return nil, err
		}
		inner, ok := h.(tapeable)
		if !ok {
			t.Fatalf("fakes.Taped of a %T: not a harness of package fakes", h)
		}
		file := filepath.Join(tape.Dir, scenarioName(t.Name())+".yaml")
		mode := replay.Record
		if tape.Replay {
			mode = replay.Replay
		}
		c, err := replay.OpenFile(mode, file, nil)
		if err != nil {
			return nil, err
		}
		th := &tapedHarness{t: t, inner: inner, c: c, side: strings.TrimSuffix(file, ".yaml") + ".fake.json"}
		if tape.Replay {
			b, err := os.ReadFile(th.side)
			if err != nil {
				return nil, err
			}
			if err := json.Unmarshal(b, &th.log); err != nil {
				return nil, err
			}
		}
		inner.tape(func(rt http.RoundTripper) http.RoundTripper {
			if tape.Replay {
				return c.Wrap(stopped{})
			}
			return c.Wrap(rt)
		}, tape.Replay)
		if s, ok := h.(conformance.ClientItemSender); ok {
			return &tapedSender{th, s}, nil
		}
		return th, nil
	}
}

// scenarioName returns the name of a scenario's cassette from its
// test's name (see Tape.Dir).
func scenarioName(test string) string {
	parts := strings.Split(test, "/")
	for i, p := range parts {
		if p == "Record" || p == "Replay" {
			parts = parts[i+1:]
			break
		}
	}
	return strings.Join(parts, "_")
}

// stopped is the transport under a replaying cassette: it is never used.
type stopped struct{}

func (stopped) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, http.ErrServerClosed
}

// asked is one question a scenario asked the fake, and its answer.
type asked struct {
	Received  []coretest.Received `json:"received,omitempty"`
	OnService map[string]int      `json:"on_service,omitempty"`
}

// tapedHarness is a harness whose backends' traffic goes through a
// cassette.
type tapedHarness struct {
	t     *testing.T
	inner tapeable
	c     *replay.Cassette
	side  string

	mu  sync.Mutex
	log []asked // what the scenario asked the fake, in order
	at  int     // replaying: the next answer of log
}

func (h *tapedHarness) MakeBackend(ctx context.Context, script *coretest.Script, tools *core.Toolbox) (driver.Backend, error) {
	b, err := h.inner.MakeBackend(ctx, script, tools)
	if h.c.Mode() == replay.Replay {
		h.inner.stop()
	}
	return b, err
}

func (h *tapedHarness) Reopen(ctx context.Context, tools *core.Toolbox) (driver.Backend, error) {
	return h.inner.Reopen(ctx, tools)
}

func (h *tapedHarness) Inject(f conformance.Fault) bool { return h.inner.Inject(f) }

// answer returns the recorded answer to the scenario's next question, or
// records the fake's.
func (h *tapedHarness) answer(live func() asked) asked {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.c.Mode() == replay.Record {
		a := live()
		h.log = append(h.log, a)
		return a
	}
	if h.at >= len(h.log) {
		h.t.Errorf("the scenario asked the fake more than the %d times it did when recorded", len(h.log))
		return asked{}
	}
	h.at++
	return h.log[h.at-1]
}

func (h *tapedHarness) Received() []coretest.Received {
	out := h.answer(func() asked { return asked{Received: h.inner.Received()} }).Received
	for i := range out {
		// A stateless thread's id is made up anew by the replayed run.
		out[i].Thread = h.c.Renamed(out[i].Thread)
	}
	return out
}

func (h *tapedHarness) OnService() map[string]int {
	return h.answer(func() asked { return asked{OnService: h.inner.OnService()} }).OnService
}

func (h *tapedHarness) Close() {
	h.inner.Close()
	if err := h.c.Close(); err != nil {
		h.t.Errorf("cassette: %v", err)
	}
	if h.c.Mode() == replay.Record {
		b, err := json.Marshal(h.log)
		if err == nil {
			err = os.WriteFile(h.side, b, 0o644)
		}
		if err != nil {
			h.t.Errorf("writing what the scenario asked the fake: %v", err)
		}
		return
	}
	if left := h.c.Unplayed(); len(left) > 0 && !h.t.Skipped() {
		h.t.Errorf("recorded requests never sent in replay: %v", left)
	}
}

// tapedSender is a tapedHarness over a conformance.ClientItemSender.
type tapedSender struct {
	*tapedHarness
	s conformance.ClientItemSender
}

func (h *tapedSender) ClientItems() []string { return h.s.ClientItems() }
