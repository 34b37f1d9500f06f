package web

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
)

// deltas is a backend whose answer is n pieces of text, streamed to the
// run's observer: what a model writing a long answer sends.
type deltas struct {
	*coretest.Backend
	n int
}

const piece = "four"

func (d deltas) Start(ctx context.Context, req *driver.StartRequest) (*driver.Step, error) {
	step, err := d.Backend.Start(driver.WithObserver(ctx, nil), req)
	if err != nil {
		return step, err
	}
	if o := driver.ObserverFrom(ctx); o != nil {
		for range d.n {
			if err := o(driver.Delta{Kind: driver.TextDelta, Item: "m", Text: piece}); err != nil {
				return nil, err
			}
		}
		if err := o(driver.Delta{Kind: driver.TextDone, Item: "m", Text: strings.Repeat(piece, d.n)}); err != nil {
			return nil, err
		}
	}
	step.Text = strings.Repeat(piece, d.n)
	return step, nil
}

const benchDeltas = 1000

func deltaRunner(b *testing.B) *core.Runner {
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{{Text: strings.Repeat(piece, benchDeltas)}}}}}
	script.Turns = script.Turns[:1]
	for range b.N + 10 {
		script.Turns = append(script.Turns, script.Turns[0])
	}
	return core.NewRunner(deltas{coretest.NewBackend(script, nil), benchDeltas}, nil, &core.Options{Logger: quiet})
}

// BenchmarkDelta measures the cost of one piece of the model's text, as
// the reader of Runner.Stream gets it (the baseline, via=Stream) and as a page
// gets it from the handler over HTTP on loopback (via=Handler: the event made
// a chunk, kept for reconnections, written and read as server-sent
// events). Each op is one piece: run b.N/1000 answers of 1,000 pieces.
func BenchmarkDelta(b *testing.B) {
	b.Run("via=Stream", func(b *testing.B) {
		r := deltaRunner(b)
		defer r.Close()
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			if n%benchDeltas == 0 {
				got := 0
				for range r.Stream(b.Context(), "go", nil).Text() {
					got++
				}
				if got != benchDeltas {
					b.Fatalf("%d pieces", got)
				}
			}
			n++
		}
	})
	b.Run("via=Handler", func(b *testing.B) {
		r := deltaRunner(b)
		s := serve(b, r, nil, &effects{}, &Options{ReconnectWindow: -1, MaxMessageBytes: 64 << 20})
		b.ReportAllocs()
		n, chat := 0, 0
		for b.Loop() {
			if n%benchDeltas == 0 {
				chat++
				resp := s.post(b, "ann", userMessage("c"+itoa(chat), "go"))
				got := 0
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					if strings.HasPrefix(sc.Text(), `data: {"type":"text-delta"`) {
						got++
					}
				}
				resp.Body.Close()
				if got != benchDeltas {
					b.Fatalf("%d pieces", got)
				}
			}
			n++
		}
	})
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

// BenchmarkOpenChats holds 1,000 chats open at once on one handler, each
// with a page reading an answer being written (its run waiting in a tool),
// and reports the memory each open chat takes (heap and goroutine stacks,
// after a GC, minus that before, per chat), the pages' side (the HTTP
// client) included. Its baseline, chat=Bare, holds 1,000 streams of a handler
// that only writes the stream's headers and waits: the difference is what
// an open chat costs beyond an open HTTP stream, the handler and the
// runner together. One op opens and finishes the 1,000.
func BenchmarkOpenChats(b *testing.B) {
	const chats = 1000
	b.Run("chat=Bare", func(b *testing.B) {
		release := make(chan struct{})
		started := make(chan struct{}, chats)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			http.NewResponseController(w).Flush()
			started <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		defer srv.Close()
		openChats(b, chats, srv.URL, func(round int) {
			for range chats {
				<-started
			}
		}, func() { close(release); release = make(chan struct{}) })
	})
	b.Run("chat=Handler", func(b *testing.B) {
		script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
			{Calls: []coretest.Call{{Name: "lookup_order", Arguments: []byte(`{"order":"7"}`)}}},
			{Text: "Order 7 is {{result 0}}."},
		}}}}
		s := newTestServer(b, script, &Options{MaxInFlight: chats}, nil)
		s.fx.block = make(chan struct{})
		openChats(b, chats, s.URL, func(round int) { waitInputs(b, s, round*chats) },
			func() { close(s.fx.block); s.fx.block = make(chan struct{}) })
	})
}

// openChats opens n chats at url, b.N times, waits for them all to be
// served (ready), measures, and lets them end (done).
func openChats(b *testing.B, n int, url string, ready func(round int), done func()) {
	tr := &http.Transport{MaxIdleConnsPerHost: n}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	b.ReportAllocs()
	var perChat float64
	round := 0
	for b.Loop() {
		round++
		runtime.GC()
		before := memInUse()
		resps := make([]*http.Response, n)
		for i := range resps {
			req, _ := http.NewRequest(http.MethodPost, url+"/api/chat", strings.NewReader(userMessage("r"+itoa(round)+"-"+itoa(i), "look")))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-User", "u"+itoa(i))
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			resps[i] = resp
		}
		ready(round)
		runtime.GC()
		perChat = float64(memInUse()-before) / float64(n)
		done()
		for _, resp := range resps {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	b.ReportMetric(perChat, "B/open-chat")
}

// memInUse returns the heap in use and the goroutines' stacks.
func memInUse() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse + ms.StackInuse)
}

func waitInputs(b *testing.B, s *testServer, n int) {
	for t0 := time.Now(); s.inputs() < n; time.Sleep(time.Millisecond) {
		if time.Since(t0) > time.Minute {
			b.Fatalf("%d of %d runs started", s.inputs(), n)
		}
	}
}
