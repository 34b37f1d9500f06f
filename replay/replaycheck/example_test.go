package replaycheck_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/openai/openaitest"
	"github.com/toolrelay/toolrelay/replay/replaycheck"
)

// Check a fake against a cassette recorded on the real service (here,
// on the fake itself): no difference.
func ExampleCheck() {
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "lookup", Arguments: json.RawMessage(`{"id":"7"}`)}}},
		{Text: `answer: {{output "lookup"}}`},
	}}}}
	fake := openaitest.NewServer(script, nil)
	defer fake.Close()
	diffs, err := replaycheck.Check(context.Background(), "../testdata/openai.yaml", strings.TrimSuffix(fake.URL, "/v1"), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range diffs {
		fmt.Println(d)
	}
	fmt.Println(len(diffs), "differences")
	// Output:
	// 0 differences
}
