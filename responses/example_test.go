package responses_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
	"github.com/toolrelay/toolrelay/responses"
)

// Example runs the tool loop over the plain Responses API, here a fake of
// it on loopback: the model, the instructions and the tools go with every
// request, and the thread is the latest response's id.
func Example() {
	srv := foundrytest.NewServer(coretest.Simple("get_horoscope", `{"sign": "Aquarius"}`, `Your horoscope for {{output "get_horoscope"}}`), &foundrytest.Options{Plain: true, Token: "sk-test"})
	defer srv.Close()

	horoscope, err := core.NewTool("get_horoscope", "Get today's horoscope for an astrological sign.",
		func(_ context.Context, in struct {
			Sign string `json:"sign"`
		}) (string, error) {
			return in.Sign + ": Next Tuesday you will befriend a baby otter.", nil
		}, nil)
	if err != nil {
		log.Fatal(err)
	}
	tools, err := core.NewToolbox(horoscope)
	if err != nil {
		log.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	ctx := context.Background()
	b, err := responses.Open(ctx, tools, &responses.Options{
		BaseURL:    srv.OpenAIBaseURL(), // by default https://api.openai.com/v1/
		APIKey:     "sk-test",           // by default OPENAI_API_KEY
		Model:      "gpt-4.1-mini",
		HTTPClient: srv.Client(),
		Logger:     quiet,
	})
	if err != nil {
		log.Fatal(err)
	}
	runner := core.NewRunner(b, tools, &core.Options{Logger: quiet})
	defer runner.Close()

	res, err := runner.Run(ctx, "What is my horoscope? I am an Aquarius.", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(b.Name()+":", res.Text)
	// Output:
	// responses: Your horoscope for Aquarius: Next Tuesday you will befriend a baby otter.
}
