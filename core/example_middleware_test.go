package core_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"time"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
)

type userKey struct{}

// ExampleMiddleware wraps every call with three middlewares, the first
// outermost: one that times each call (where a tracer would start a
// span), one that bounds how many calls run at once (a limit), and one
// that refuses tools the user may not call (a permission check): the
// refused call's handler never runs, and the model reads why.
func ExampleMiddleware() {
	timing := func(next core.CallFunc) core.CallFunc {
		return func(ctx context.Context, call *core.Call) (core.CallResult, error) {
			start := time.Now()
			res, err := next(ctx, call)
			_ = time.Since(start) // record it: a log line, a metric, a span
			fmt.Printf("%s: %s\n", call.Name, res.Outcome)
			return res, err
		}
	}
	slots := make(chan struct{}, 4)
	limit := func(next core.CallFunc) core.CallFunc {
		return func(ctx context.Context, call *core.Call) (core.CallResult, error) {
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
				return next(ctx, call)
			case <-ctx.Done():
				return core.CallResult{}, ctx.Err()
			}
		}
	}
	allowed := map[string]map[string]bool{"ada": {"get_balance": true}}
	permission := func(next core.CallFunc) core.CallFunc {
		return func(ctx context.Context, call *core.Call) (core.CallResult, error) {
			user, _ := ctx.Value(userKey{}).(string)
			if !allowed[user][call.Name] {
				return core.Failure(core.Denied, fmt.Sprintf("%s may not call %s", user, call.Name)), nil
			}
			return next(ctx, call)
		}
	}

	balance, _ := core.NewTool("get_balance", "Get the balance.", func(context.Context, struct{}) (string, error) { return "42 EUR", nil }, nil)
	transfer, _ := core.NewTool("transfer", "Transfer money.", func(context.Context, struct{ To string }) (string, error) {
		panic("not reached: the permission check refuses it")
	}, nil)
	tools, _ := core.NewToolbox(balance, transfer)
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "get_balance", Arguments: json.RawMessage(`{}`)}}},
		{Calls: []coretest.Call{{Name: "transfer", Arguments: json.RawMessage(`{"To":"bob"}`)}}},
		{Text: `{{output "get_balance"}}; {{result 0}}`},
	}}}}
	runner := core.NewRunner(coretest.NewBackend(script, nil), tools, &core.Options{
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Middleware: []core.Middleware{timing, limit, permission},
	})
	defer runner.Close()

	ctx := context.WithValue(context.Background(), userKey{}, "ada")
	res, err := runner.Run(ctx, "Pay Bob my balance.", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Text)
	// Output:
	// get_balance: ok
	// transfer: denied
	// 42 EUR; ada may not call transfer
}
