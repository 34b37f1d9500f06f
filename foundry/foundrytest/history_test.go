package foundrytest_test

import (
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolrelay/toolrelay/foundry/foundrytest"
)

// TestHistoryResend: the Responses function-calling loop that resends the
// whole history without previous_response_id (what the JavaScript SDK's
// ResponsesToolRunner does), stored or not: the function_call items of the
// input are the caller's record of the model's calls. The response echoes
// the request's store and tools; a response not stored cannot be read or
// continued.
func TestHistoryResend(t *testing.T) {
	for _, store := range []bool{true, false} {
		t.Run(map[bool]string{true: "store", false: "no-store"}[store], func(t *testing.T) {
			_, client := newServer(t, horoscope(), &foundrytest.Options{Plain: true})
			tool := responses.ToolParamOfFunction("get_horoscope", map[string]any{"type": "object", "properties": map[string]any{"sign": map[string]any{"type": "string"}}}, false)
			history := []responses.ResponseInputItemUnionParam{responses.ResponseInputItemParamOfMessage("What is my horoscope? I am an Aquarius.", responses.EasyInputMessageRoleUser)}
			params := func() responses.ResponseNewParams {
				return responses.ResponseNewParams{Model: "gpt-4.1-mini", Input: inputItems(history...), Tools: []responses.ToolUnionParam{tool}, Store: openai.Bool(store)}
			}
			first, err := client.Responses.New(t.Context(), params())
			if err != nil {
				t.Fatal(err)
			}
			var echo struct{ Store bool }
			json.Unmarshal([]byte(first.RawJSON()), &echo)
			if echo.Store != store || len(first.Tools) != 1 || first.Tools[0].Name != "get_horoscope" {
				t.Errorf("response store %v, tools %s; want the request's", echo.Store, first.JSON.Tools.Raw())
			}
			calls := functionCalls(first)
			if len(calls) != 1 {
				t.Fatalf("calls %v, want one", calls)
			}
			// The caller's record: the model's output, then the result.
			for _, o := range first.Output {
				var p responses.ResponseInputItemUnionParam
				if err := json.Unmarshal([]byte(o.RawJSON()), &p); err != nil {
					t.Fatal(err)
				}
				history = append(history, p)
			}
			history = append(history, outputItem(calls[0].CallID, "Next Tuesday you will befriend a baby otter."))
			second, err := client.Responses.New(t.Context(), params())
			if err != nil {
				t.Fatalf("the resent history: %v", err)
			}
			if want := "Your horoscope for Aquarius: Next Tuesday you will befriend a baby otter."; second.OutputText() != want {
				t.Errorf("answer %q, want %q", second.OutputText(), want)
			}
			_, err = client.Responses.Get(t.Context(), first.ID, responses.ResponseGetParams{})
			if stored := err == nil; stored != store {
				t.Errorf("Get of the first response: %v; want it found only when stored", err)
			}
		})
	}
}

// TestStreamUsage: a streamed response reports its usage when it is done,
// not when it is created (response.created and response.in_progress have
// usage null).
func TestStreamUsage(t *testing.T) {
	_, client := newServer(t, horoscope(), &foundrytest.Options{Plain: true})
	stream := client.Responses.NewStreaming(t.Context(), responses.ResponseNewParams{Model: "gpt-4.1-mini",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What is my horoscope? I am an Aquarius.")}})
	var seen []string
	for stream.Next() {
		ev := stream.Current()
		var m struct {
			Response struct {
				Usage json.RawMessage `json:"usage"`
			} `json:"response"`
		}
		json.Unmarshal([]byte(ev.RawJSON()), &m)
		switch ev.Type {
		case "response.created", "response.in_progress":
			if string(m.Response.Usage) != "null" {
				t.Errorf("%s: usage %s, want null", ev.Type, m.Response.Usage)
			}
		case "response.completed":
			if string(m.Response.Usage) == "null" || len(m.Response.Usage) == 0 {
				t.Errorf("response.completed without usage")
			}
		}
		seen = append(seen, ev.Type)
	}
	if err := stream.Err(); err != nil || len(seen) == 0 || seen[len(seen)-1] != "response.completed" {
		t.Fatalf("stream: %v, events %v", err, seen)
	}
}
