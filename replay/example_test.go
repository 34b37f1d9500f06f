package replay_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

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
