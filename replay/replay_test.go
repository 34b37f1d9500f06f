package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/replay"
)

// service is a small service: POST /v1/things answers its body back with
// an id; GET /v1/events streams events, the second one only after a POST
// /v1/input arrives (as the OpenAI sessions' events stream does).
func service(t *testing.T) *httptest.Server {
	t.Helper()
	input := make(chan string, 1)
	var mu sync.Mutex
	n := 0
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/things", func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Name string }
		json.NewDecoder(r.Body).Decode(&in)
		mu.Lock()
		n++
		id := n
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Set-Cookie", "session=cookie-secret-value")
		fmt.Fprintf(w, `{"id":"thing_%d","created_at":1700000000,"name":%q}`, id, in.Name)
	})
	mux.HandleFunc("GET /v1/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"type\":\"ready\"}\n\n")
		w.(http.Flusher).Flush()
		select {
		case s := <-input:
			fmt.Fprintf(w, "data: {\"type\":\"input\",\"text\":%q}\n\n", s)
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("POST /v1/input", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		input <- string(b)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /v1/broken", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		fmt.Fprint(w, "only part")
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// exchange is what a client does with the service, returning what it saw.
func exchange(ctx context.Context, c *http.Client, base string) ([]string, error) {
	var seen []string
	do := func(method, path, body string, hdr ...string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer sk-live-secret-token-123456")
		req.Header.Set("Idempotency-Key", fmt.Sprint(len(seen), "-", os.Getpid()))
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		return c.Do(req)
	}
	for _, body := range []string{`{"name":"a","api_key":"key-secret-abc"}`, `{"name":"b","idempotency_key":"` + fmt.Sprint(os.Getpid()) + `"}`} {
		resp, err := do("POST", "/v1/things", body)
		if err != nil {
			return seen, err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		seen = append(seen, resp.Status+" "+string(b))
	}
	stream, err := do("GET", "/v1/events", "")
	if err != nil {
		return seen, err
	}
	buf := make([]byte, 64)
	var got strings.Builder
	for !strings.Contains(got.String(), "ready") {
		n, err := stream.Body.Read(buf)
		got.Write(buf[:n])
		if err != nil && (err != io.EOF || !strings.Contains(got.String(), "ready")) {
			return seen, err
		}
	}
	resp, err := do("POST", "/v1/input", `hello`)
	if err != nil {
		return seen, err
	}
	resp.Body.Close()
	seen = append(seen, resp.Status)
	rest, _ := io.ReadAll(stream.Body)
	stream.Body.Close()
	seen = append(seen, got.String()+string(rest))
	if broken, err := do("GET", "/v1/broken", ""); err == nil {
		b, err := io.ReadAll(broken.Body)
		broken.Body.Close()
		seen = append(seen, fmt.Sprintf("%s %q %v", broken.Status, b, err != nil))
	}
	return seen, nil
}

func record(t *testing.T, file string) (string, []string) {
	t.Helper()
	srv := service(t)
	c, err := replay.Open("record:"+file, nil)
	if err != nil {
		t.Fatal(err)
	}
	live, err := exchange(t.Context(), &http.Client{Transport: c.Wrap(srv.Client().Transport)}, srv.URL)
	if err != nil {
		t.Fatalf("recording: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	srv.Close()
	return srv.URL, live
}

func TestRecordThenReplay(t *testing.T) {
	file := filepath.Join(t.TempDir(), "things.yaml")
	base, live := record(t, file)
	c, err := replay.Open("auto:"+file, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Mode() != replay.Replay {
		t.Fatalf("auto with a file: mode %s, want replay", c.Mode())
	}
	// The service is stopped: nothing may reach the network.
	replayed, err := exchange(t.Context(), &http.Client{Transport: c.Wrap(failing{t})}, base)
	if err != nil {
		t.Fatalf("replaying: %v", err)
	}
	if diff := cmp.Diff(live, replayed); diff != "" {
		t.Errorf("replayed run differs (-live +replayed):\n%s", diff)
	}
	if left := c.Unplayed(); len(left) != 0 {
		t.Errorf("unplayed: %v", left)
	}
}

// failing is a transport that fails the test if used.
type failing struct{ t *testing.T }

func (f failing) RoundTrip(r *http.Request) (*http.Response, error) {
	f.t.Errorf("replay sent %s %s to the network", r.Method, r.URL)
	return nil, errors.New("no network")
}

func TestCassetteHoldsNoSecret(t *testing.T) {
	file := filepath.Join(t.TempDir(), "things.yaml")
	record(t, file)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"sk-live-secret-token-123456", "key-secret-abc", "cookie-secret-value"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("the cassette holds %q", secret)
		}
	}
	for _, kept := range []string{"thing_1", "created_at\":1700000000", "hello"} {
		if !strings.Contains(string(b), kept) {
			t.Errorf("the cassette lost %q", kept)
		}
	}
}

func TestReplayFailsClosed(t *testing.T) {
	file := filepath.Join(t.TempDir(), "things.yaml")
	base, _ := record(t, file)
	tests := []struct {
		name      string
		send      [][2]string // path, body of POSTs in order
		wantParts []string
	}{
		{
			name:      "a changed body",
			send:      [][2]string{{"/v1/things", `{"name":"c"}`}},
			wantParts: []string{"POST /v1/things is not recorded", "nearest recorded request not replayed yet is #0 POST /v1/things", `-`, `"a"`, `+`, `"c"`},
		},
		{
			name:      "out of order",
			send:      [][2]string{{"/v1/things", `{"name":"b","idempotency_key":"other"}`}},
			wantParts: []string{"sent out of order: it was recorded as #1, after #0", `"a"`, `"b"`},
		},
		{
			name:      "an unknown path",
			send:      [][2]string{{"/v1/nothing", `{}`}},
			wantParts: []string{"POST /v1/nothing is not recorded", "-recorded +sent"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := replay.Open("replay:"+file, nil)
			if err != nil {
				t.Fatal(err)
			}
			hc := &http.Client{Transport: c.Wrap(failing{t})}
			var last error
			for _, s := range tt.send {
				resp, err := hc.Post(base+s[0], "application/json", strings.NewReader(s[1]))
				if err == nil {
					resp.Body.Close()
				}
				last = err
			}
			if errcode.Of(last) != errcode.FailedPrecondition {
				t.Fatalf("error %v, want code FailedPrecondition", last)
			}
			for _, p := range tt.wantParts {
				if !strings.Contains(last.Error(), p) {
					t.Errorf("error does not say %q:\n%v", p, last)
				}
			}
		})
	}
}

func TestTamperedCassette(t *testing.T) {
	file := filepath.Join(t.TempDir(), "things.yaml")
	base, _ := record(t, file)
	b, _ := os.ReadFile(file)
	tampered := strings.Replace(string(b), `"name":"a"`, `"name":"z"`, 1)
	if tampered == string(b) {
		t.Fatal("nothing to tamper")
	}
	os.WriteFile(file, []byte(tampered), 0o644)
	c, err := replay.Open("replay:"+file, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = exchange(t.Context(), &http.Client{Transport: c.Wrap(failing{t})}, base)
	if errcode.Of(err) != errcode.FailedPrecondition {
		t.Fatalf("error %v, want code FailedPrecondition", err)
	}
	want := `Body: map[string]any{`
	for _, p := range []string{want, `-`, `"z"`, `+`, `"a"`, "#0 POST /v1/things"} {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error does not say %q:\n%v", p, err)
		}
	}
}

func TestBounds(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	os.WriteFile(big, []byte(strings.Repeat("#", 2048)), 0o644)
	tests := []struct {
		name    string
		setting string
		opts    *replay.Options
		want    errcode.Code
	}{
		{"no mode", "things.yaml", nil, errcode.InvalidArgument},
		{"unknown mode", "play:things.yaml", nil, errcode.InvalidArgument},
		{"not yaml", "replay:things.json", nil, errcode.InvalidArgument},
		{"missing file", "replay:" + filepath.Join(dir, "none.yaml"), nil, errcode.NotFound},
		{"too large", "replay:" + big, &replay.Options{MaxCassetteBytes: 1024}, errcode.ResourceExhausted},
		{"not a cassette", "replay:" + big, nil, errcode.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := replay.Open(tt.setting, tt.opts)
			if got := errcode.Of(err); got != tt.want {
				t.Errorf("Open(%q): %v, want code %v", tt.setting, err, tt.want)
			}
		})
	}
	t.Run("body too large", func(t *testing.T) {
		srv := service(t)
		c, err := replay.Open("record:"+filepath.Join(dir, "body.yaml"), &replay.Options{MaxBodyBytes: 16})
		if err != nil {
			t.Fatal(err)
		}
		hc := &http.Client{Transport: c.Wrap(srv.Client().Transport)}
		_, err = hc.Post(srv.URL+"/v1/things", "application/json", strings.NewReader(strings.Repeat("x", 17)))
		if errcode.Of(err) != errcode.ResourceExhausted {
			t.Errorf("request body past the bound: %v, want ResourceExhausted", err)
		}
		resp, err := hc.Post(srv.URL+"/v1/things", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
		if err := c.Close(); errcode.Of(err) != errcode.ResourceExhausted {
			t.Errorf("Close after a response body past the bound: %v, want ResourceExhausted", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "body.yaml")); err == nil {
			t.Errorf("a failed recording wrote its cassette")
		}
	})
}
