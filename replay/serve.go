package replay

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/toolrelay/toolrelay/errcode"
)

// ServeHTTP serves a replaying cassette as a standalone fake of the
// service it recorded (cmd/toolrelay-fake -replay), for clients in any
// language: each request is answered as [Cassette.Wrap]'s transport would
// answer it, the body flushed as it is written (a stream reaches the
// client as a stream). A request that does not replay gets 400 with a
// JSON error ({"error": {"type": "replay_mismatch", "message": …}},
// the message holding the nearest recorded request and the difference; 400
// so that no client retries it); a request that failed in transport when
// recorded, or whose stream broke, has its connection cut. A recording
// cassette answers 500.
func (c *Cassette) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if c.mode != Replay {
		http.Error(w, "replay: the cassette records; serve a replaying one", http.StatusInternalServerError)
		return
	}
	req := r.Clone(r.Context())
	req.RequestURI = ""
	resp, err := (&player{c: c}).RoundTrip(req)
	switch {
	case errcode.Of(err) == errcode.FailedPrecondition:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"type": "replay_mismatch", "message": err.Error()}})
		return
	case err != nil:
		panic(http.ErrAbortHandler) // as when recorded: the connection is cut
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	f, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if f != nil {
				f.Flush()
			}
		}
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			if r.Context().Err() != nil {
				return // the client went away
			}
			panic(http.ErrAbortHandler) // the stream broke when recorded
		}
	}
}
