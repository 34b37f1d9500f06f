package replay_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolrelay/toolrelay/replay"
)

// TestServeHTTP serves a recorded cassette as a standalone fake: the
// client's exchange, the stream that waits on a later request included,
// gets what it got from the service; a request not recorded gets 400 with
// the difference.
func TestServeHTTP(t *testing.T) {
	file := filepath.Join(t.TempDir(), "things.yaml")
	_, live := record(t, file)
	c, err := replay.Open("replay:"+file, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	defer srv.Close()
	got, err := exchange(t.Context(), srv.Client(), srv.URL)
	if err != nil {
		t.Fatalf("exchange with the served cassette: %v", err)
	}
	// The broken body is cut, as it was: the client sees an error there too.
	if len(got) != len(live) || strings.Join(got[:4], "\n") != strings.Join(live[:4], "\n") {
		t.Errorf("served %q, recorded %q", got, live)
	}
	resp, err := srv.Client().Post(srv.URL+"/v1/things", "application/json", strings.NewReader(`{"name":"z"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Error struct{ Type, Message string }
	}
	b, _ := io.ReadAll(resp.Body)
	json.Unmarshal(b, &body)
	if resp.StatusCode != http.StatusBadRequest || body.Error.Type != "replay_mismatch" || !strings.Contains(body.Error.Message, "is not recorded") {
		t.Errorf("a request not recorded: %d %s", resp.StatusCode, b)
	}
}
