package replay_test

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrelay/toolrelay/replay"
	"gopkg.in/dnaeon/go-vcr.v4/pkg/cassette"
	"gopkg.in/dnaeon/go-vcr.v4/pkg/recorder"
)

// TestGoVCRReadsCassettes checks that go-vcr's own loader reads a
// cassette this package wrote, request for request.
func TestGoVCRReadsCassettes(t *testing.T) {
	file := filepath.Join(t.TempDir(), "things.yaml")
	record(t, file)
	c, err := cassette.Load(strings.TrimSuffix(file, ".yaml"))
	if err != nil {
		t.Fatalf("go-vcr's cassette.Load: %v", err)
	}
	var got []string
	for _, i := range c.Interactions {
		got = append(got, i.Request.Method+" "+i.Request.URL[strings.Index(i.Request.URL, "/v1"):])
	}
	want := []string{"POST /v1/things", "POST /v1/things", "GET /v1/events", "POST /v1/input", "GET /v1/broken"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("go-vcr read (-want +got):\n%s", diff)
	}
}

// TestReplaysGoVCRCassettes checks that a cassette go-vcr's recorder
// wrote replays here.
func TestReplaysGoVCRCassettes(t *testing.T) {
	srv := service(t)
	name := filepath.Join(t.TempDir(), "govcr")
	rec, err := recorder.New(name, recorder.WithMode(recorder.ModeRecordOnly), recorder.WithRealTransport(srv.Client().Transport))
	if err != nil {
		t.Fatal(err)
	}
	post := func(hc *http.Client) string {
		resp, err := hc.Post(srv.URL+"/v1/things", "application/json", strings.NewReader(`{"name":"a"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	live := post(rec.GetDefaultClient())
	if err := rec.Stop(); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	c, err := replay.Open("replay:"+name+".yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := post(&http.Client{Transport: c.Wrap(failing{t})}); got != live {
		t.Errorf("replayed %q, recorded %q", got, live)
	}
}
