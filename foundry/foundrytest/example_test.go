package foundrytest_test

import (
	"context"
	"fmt"
	"log"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
)

// Example plays the service's curl flow against the fake with the
// openai-go client: a conversation created with the user's message, a
// response that asks for a function call, and the call's output sent back.
func Example() {
	script := coretest.Simple("get_horoscope", `{"sign": "Aquarius"}`, `Your horoscope for {{output "get_horoscope"}}`)
	srv := foundrytest.NewServer(script, nil)
	defer srv.Close()
	srv.AddAgent("my-agent", "gpt-4.1-mini")

	client := openai.NewClient(
		option.WithBaseURL(srv.OpenAIBaseURL()),
		option.WithAPIKey("token"), // any bearer token
		option.WithHTTPClient(srv.Client()),
	)
	agent := option.WithJSONSet("agent_reference", map[string]any{"type": "agent_reference", "name": "my-agent"})
	ctx := context.Background()

	conv, err := client.Conversations.New(ctx, conversations.ConversationNewParams{
		Items: []responses.ResponseInputItemUnionParam{
			responses.ResponseInputItemParamOfMessage("What is my horoscope? I am an Aquarius.", responses.EasyInputMessageRoleUser),
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	inConv := responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)}
	r, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Conversation: inConv,
		Input:        responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{}},
	}, agent)
	if err != nil {
		log.Fatal(err)
	}
	call := r.Output[0].AsFunctionCall()
	fmt.Println(call.Name, call.Arguments)

	out := responses.ResponseInputItemParamOfFunctionCallOutput("Aquarius: Next Tuesday you will befriend a baby otter.")
	out.OfFunctionCallOutput.CallID = openai.String(call.CallID)
	r, err = client.Responses.New(ctx, responses.ResponseNewParams{
		Conversation: inConv,
		Input:        responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}},
	}, agent)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("Agent response:", r.OutputText())
	fmt.Println(srv.Received()[1].Results[0].Output)
	// Output:
	// get_horoscope {"sign":"Aquarius"}
	// Agent response: Your horoscope for Aquarius: Next Tuesday you will befriend a baby otter.
	// Aquarius: Next Tuesday you will befriend a baby otter.
}
