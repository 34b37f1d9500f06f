package replay

import (
	"encoding/json"
	"net/url"
	"strings"

	"github.com/google/go-cmp/cmp"
)

// Volatile replaces the value of a volatile query parameter or JSON field
// in the canonical form of a request: such values match whatever they are.
const Volatile = "<volatile>"

// A stateless thread's id (metadata.toolrelay_thread "stateless_…" of
// the responses backend's Stateless mode) is made up by the client: it is
// volatile too (see MaskVolatile).

// IsVolatile reports whether a query parameter, header or JSON field
// named name is volatile, its value ignored when requests are matched:
// idempotency_key (any case, - or _), timestamp, or a name ending in _at.
func IsVolatile(name string) bool {
	n := strings.ReplaceAll(strings.ToLower(name), "-", "_")
	return n == "idempotency_key" || n == "timestamp" || strings.HasSuffix(n, "_at")
}

// canon is the canonical form of a request, in which requests are
// compared (see the package doc).
type canon struct {
	Method string
	Path   string
	Query  url.Values `json:",omitempty"`
	Body   any        `json:",omitempty"` // decoded JSON, or the text
}

// thread is the key of the requests whose order replay keeps.
func (c *canon) thread() string { return c.Method + " " + c.Path }

// canonOf returns the canonical form of a recorded (redacted) request.
func canonOf(r *Request) *canon {
	c := &canon{Method: r.Method}
	u, err := url.Parse(r.URL)
	if err != nil {
		c.Path = r.URL
	} else {
		c.Path = u.EscapedPath()
		if q := u.Query(); len(q) > 0 {
			for k := range q {
				if IsVolatile(k) {
					q[k] = []string{Volatile}
				}
			}
			c.Query = q
		}
	}
	if r.Body != "" {
		c.Body = r.Body
		dec := json.NewDecoder(strings.NewReader(r.Body))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) == nil && !dec.More() {
			c.Body = MaskVolatile(v)
		}
	}
	return c
}

// MaskVolatile replaces, in place, the values of the volatile fields of a
// decoded JSON value (maps, slices and values as encoding/json decodes
// into an any) with [Volatile], and returns it: the fields the package
// doc's rule ignores when it matches requests (idempotency keys,
// timestamps, fields ending in _at, a stateless thread's id).
func MaskVolatile(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); IsVolatile(k) || ok && k == "toolrelay_thread" && strings.HasPrefix(s, "stateless_") {
				x[k] = Volatile
			} else {
				x[k] = MaskVolatile(e)
			}
		}
	case []any:
		for i, e := range x {
			x[i] = MaskVolatile(e)
		}
	}
	return v
}

// equal reports whether two canonical forms are the same request.
func equal(a, b *canon) bool { return cmp.Equal(a, b) }

// diff returns the difference of a recorded request and a sent one, as
// go-cmp shows it (-recorded +sent), at most maxDiff bytes.
func diff(recorded, sent *canon) string {
	d := cmp.Diff(recorded, sent)
	if len(d) > maxDiff {
		d = d[:maxDiff] + "\n… (the rest of the difference is not shown)"
	}
	return d
}

// maxDiff bounds the difference an error shows.
const maxDiff = 8 << 10

// nearest returns the index of the recorded request, among candidates,
// nearest to sent: one of the same method and path if any, then the one
// whose difference is the shortest; -1 when there are no candidates.
func nearest(recorded []*canon, candidates []int, sent *canon) int {
	best, bestScore := -1, 0
	for _, i := range candidates {
		score := len(cmp.Diff(recorded[i], sent))
		if recorded[i].thread() != sent.thread() {
			score += 1 << 30
		}
		if best < 0 || score < bestScore {
			best, bestScore = i, score
		}
	}
	return best
}
