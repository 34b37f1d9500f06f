package replay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/openai/openaitest"
	"github.com/toolrelay/toolrelay/replay"
)

// Record a request once, then replay it with the service stopped.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"id":"thing_1"}`)
	}))
	dir, _ := os.MkdirTemp("", "replay")
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "things.yaml")

	get := func(c *replay.Cassette) {
		resp, err := (&http.Client{Transport: c.Wrap(nil)}).Get(srv.URL + "/v1/things/1")
		if err != nil {
			fmt.Println(err)
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(c.Mode(), resp.Status, string(b))
	}
	rec, _ := replay.Open("auto:"+file, nil) // no file yet: records
	get(rec)
	rec.Close()
	srv.Close()

	play, _ := replay.Open("auto:"+file, nil) // the file exists: replays
	get(play)
	// Output:
	// record 200 OK {"id":"thing_1"}
	// replay 200 OK {"id":"thing_1"}
}

// Check a fake against a cassette recorded on the real service (here,
// on the fake itself): no difference.
func ExampleCheck() {
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "lookup", Arguments: json.RawMessage(`{"id":"7"}`)}}},
		{Text: `answer: {{output "lookup"}}`},
	}}}}
	fake := openaitest.NewServer(script, nil)
	defer fake.Close()
	diffs, err := replay.Check(context.Background(), "testdata/openai.yaml", strings.TrimSuffix(fake.URL, "/v1"), nil)
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
