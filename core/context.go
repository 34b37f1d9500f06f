package core

import "context"

type callKey struct{}

// CallFromContext returns the call a handler is running for: its thread,
// turn, id and arguments. A handler with side effects can use them, for
// instance as an idempotency key of its own.
func CallFromContext(ctx context.Context) (Call, bool) {
	c, ok := ctx.Value(callKey{}).(*Call)
	if !ok {
		return Call{}, false
	}
	return *c, true
}

func withCall(ctx context.Context, c *Call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}
