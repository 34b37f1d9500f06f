// Command chat is an interactive terminal chat with an agent that has the
// weather bot's three functions: it reads a line, streams the answer as the
// agent writes it, and shows each call as it runs and ends. The thread
// carries on from line to line; Ctrl-D (end of input) ends the chat, and
// Ctrl-C ends it at once, at the prompt or during an answer.
//
// With no configuration it runs on the embedded fake Agents API
// (fake-openai), whose scripted model answers the first question (try
// "What's the weather like in my favorite city?") by calling the three
// functions, and the second with thanks, a few runes at a time:
//
//	go run ./examples/chat
//
// Any backend is chosen by configuration alone, with the streaming
// transport unless one is configured:
//
//	TOOLRELAY_BACKEND=fake-foundry go run ./examples/chat
//	TOOLRELAY_BACKEND=fake-responses go run ./examples/chat
//	TOOLRELAY_BACKEND=openai OPENAI_API_KEY=… go run ./examples/chat
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/foundry"
	_ "github.com/toolrelay/toolrelay/foundry/foundrytest" // fake-foundry, fake-responses, foundry, responses
	_ "github.com/toolrelay/toolrelay/openai/openaitest"   // fake-openai, openai
	"github.com/toolrelay/toolrelay/responses"
)

// script is what the fake model does: chain the three calls to answer the
// first question, thank for the second, and write a few runes at a time.
var script = &coretest.Script{DeltaSize: 4, DeltaPauseMS: 15, Turns: []coretest.Turn{
	{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "getUserFavoriteCity"}}},
		{Calls: []coretest.Call{
			{Name: "getCityNickname", Arguments: json.RawMessage(`{"location": "{{output \"getUserFavoriteCity\"}}"}`)},
			{Name: "getCurrentWeatherAtLocation", Arguments: json.RawMessage(`{"location": "{{output \"getUserFavoriteCity\"}}"}`)},
		}},
		{Text: `Your favorite city, {{output "getUserFavoriteCity"}}, is also known as {{output "getCityNickname"}}. The current weather there is {{output "getCurrentWeatherAtLocation"}}.`},
	}},
	{Steps: []coretest.Step{{Text: "You're welcome! Ask me about the weather anytime."}}},
}}

const instructions = "You are a weather bot. Use the provided functions to answer questions, " +
	"and friendly nicknames for cities whenever possible."

func getUserFavoriteCity(context.Context, struct{}) (string, error) { return "Seattle, WA", nil }

type locationArgs struct {
	Location string `json:"location" jsonschema:"The city and state, e.g. San Francisco, CA"`
}

func getCityNickname(_ context.Context, in locationArgs) (string, error) {
	if in.Location == "Seattle, WA" {
		return "The Emerald City", nil
	}
	return "", core.ModelErrorf("no nickname is known for %s", in.Location)
}

func getCurrentWeatherAtLocation(_ context.Context, in locationArgs) (string, error) {
	if in.Location == "Seattle, WA" {
		return "70f and sunny", nil
	}
	return "", core.ModelErrorf("no weather is known for %s", in.Location)
}

func newTools() (*core.Toolbox, error) {
	city, err := core.NewTool("getUserFavoriteCity", "Gets the user's favorite city.", getUserFavoriteCity, nil)
	if err != nil {
		return nil, err
	}
	nickname, err := core.NewTool("getCityNickname", "Gets the nickname of a city, e.g. 'LA' for 'Los Angeles, CA'.", getCityNickname, nil)
	if err != nil {
		return nil, err
	}
	weather, err := core.NewTool("getCurrentWeatherAtLocation", "Gets the current weather at a provided location.", getCurrentWeatherAtLocation, nil)
	if err != nil {
		return nil, err
	}
	return core.NewToolbox(city, nickname, weather)
}

// settings asks the backends that can stream either way to stream, unless
// the environment chooses.
func settings() []any {
	s := []any{coretest.FakeSettings{Script: script}}
	if os.Getenv("TOOLRELAY_FOUNDRY_TRANSPORT") == "" {
		s = append(s, foundry.Settings{Delivery: string(foundry.Streaming)})
	}
	if os.Getenv("TOOLRELAY_RESPONSES_TRANSPORT") == "" {
		s = append(s, responses.Settings{Delivery: string(responses.Streaming)})
	}
	return s
}

// run chats: a line from in, the answer to out, until in ends or ctx is
// done (Ctrl-C), at the prompt or during an answer.
func run(ctx context.Context, in io.Reader, out io.Writer) error {
	tools, err := newTools()
	if err != nil {
		return err
	}
	const defaultBackend = "fake-openai"
	runner, err := adapter.Open(ctx, tools, &adapter.Options{
		DefaultBackend:  defaultBackend,
		BackendSettings: settings(),
		Settings:        adapter.Settings{Instructions: instructions},
		// The chat shows each run's error itself.
		Runner: core.Options{Logger: slog.New(slog.DiscardHandler)},
	})
	if err != nil {
		return err
	}
	defer runner.Close()
	fmt.Fprintf(out, "Chatting on %s. Ctrl-D or Ctrl-C ends.\n> ", backendName(defaultBackend))
	// Lines are read in their own goroutine, so that Ctrl-C ends the chat
	// while it waits at the prompt.
	lines := make(chan string)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
		readErr <- sc.Err()
		close(lines)
	}()
	thread := ""
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(out)
			return runner.Close()
		case line, ok := <-lines:
			if !ok {
				fmt.Fprintln(out)
				if err := <-readErr; err != nil {
					return err
				}
				return runner.Close()
			}
			if line = strings.TrimSpace(line); line != "" {
				thread = turn(ctx, runner, thread, line, out)
			}
			if ctx.Err() == nil {
				fmt.Fprint(out, "> ")
			}
		}
	}
}

// backendName returns the name of the backend the configuration selects,
// or def when it names none: the name the program opened it by (a fake's
// backend is named after the service it fakes).
func backendName(def string) string {
	if s, err := adapter.Load(nil); err == nil && s.Backend != "" {
		return s.Backend
	}
	return def
}

// turn streams the answer to line on thread and returns the thread.
func turn(ctx context.Context, r *core.Runner, thread, line string, out io.Writer) string {
	st := r.Stream(ctx, line, &core.RunOptions{Thread: thread})
	for ev := range st.Events() {
		switch ev.Kind {
		case core.EventTextDelta:
			fmt.Fprint(out, ev.Text)
		case core.EventTextDone:
			fmt.Fprintln(out)
		case core.EventCallStarted:
			fmt.Fprintf(out, "  ⚙ %s %s\n", ev.Call.Name, compact(ev.Call.Arguments))
		case core.EventCallFinished:
			fmt.Fprintf(out, "  ✓ %s: %s in %v\n", ev.Call.Name, ev.Outcome, ev.Duration.Round(time.Microsecond))
		}
	}
	res, err := st.Result()
	if err != nil {
		fmt.Fprintf(out, "error: %v\n", err)
	}
	if res != nil && res.Thread != "" {
		return res.Thread
	}
	return thread
}

// compact returns arguments on one line.
func compact(args json.RawMessage) string {
	var v any
	if json.Unmarshal(args, &v) != nil {
		return string(args)
	}
	if s, ok := v.(string); ok { // arguments sent as a JSON string
		return compact(json.RawMessage(s))
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdin, os.Stdout); err != nil {
		log.Fatal(err)
	}
}
