package replay

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/toolrelay/toolrelay/errcode"
	"go.yaml.in/yaml/v4"
)

// EnvVar names the environment variable of the "replay" setting (see
// package adapter).
const EnvVar = "TOOLRELAY_REPLAY"

// Mode says what a [Cassette] does with the requests it sees.
type Mode string

// The modes of a cassette.
const (
	// Record sends every request and records it with its answer.
	Record Mode = "record"
	// Replay answers every request from the cassette, sending nothing.
	Replay Mode = "replay"
	// Auto replays when the cassette's file exists, else records.
	Auto Mode = "auto"
)

// The default bounds of [Options].
const (
	DefaultMaxCassetteBytes = 64 << 20
	DefaultMaxBodyBytes     = 16 << 20
)

// Options bound a [Cassette]. nil is usable.
type Options struct {
	// MaxCassetteBytes bounds the size of a cassette file that is loaded
	// (DefaultMaxCassetteBytes when zero).
	MaxCassetteBytes int64
	// MaxBodyBytes bounds each body a recording keeps, a request's or a
	// response's (DefaultMaxBodyBytes when zero).
	MaxBodyBytes int64
}

// ParseSetting reads the "replay" setting: "record:FILE", "replay:FILE" or
// "auto:FILE", where FILE ends in ".yaml". A setting of another form gives
// an error whose code is InvalidArgument.
func ParseSetting(s string) (Mode, string, error) {
	m, file, ok := strings.Cut(s, ":")
	switch {
	case !ok || file == "":
		return "", "", invalid(errors.New(`not "record:FILE", "replay:FILE" or "auto:FILE"`))
	case Mode(m) != Record && Mode(m) != Replay && Mode(m) != Auto:
		return "", "", invalid(errors.New(`unknown mode: "record", "replay" or "auto"`))
	case !strings.HasSuffix(file, ".yaml"):
		return "", "", invalid(errors.New(`the cassette file's name must end in ".yaml" (a go-vcr cassette)`))
	}
	return Mode(m), file, nil
}

func invalid(err error) error {
	return &errcode.Error{Code: errcode.InvalidArgument, Op: "replay: setting", Err: err}
}

// A Cassette records a backend's HTTP traffic into a file, or replays it
// from one. Its methods are safe for concurrent use.
type Cassette struct {
	mode Mode // Record or Replay
	file string
	opts Options

	mu   sync.Mutex
	c    *cassetteFile
	recs []*recording // Record: in the order the requests were sent
	// Replay: the canonical form of each recorded request, and whether it
	// was played.
	canon  []*canon
	played []bool
	miss   error // the first request that did not replay
	// renamed maps the ids stateless threads had when recorded to those
	// they have in replay.
	renamed map[string]string
	closed  bool
}

// Open opens the cassette a "replay" setting names (see [ParseSetting]).
// In Replay mode (or Auto with an existing file) it loads the file: a file
// that is missing fails with code NotFound, one larger than
// opts.MaxCassetteBytes with ResourceExhausted, one that does not decode
// with InvalidArgument. opts may be nil.
func Open(setting string, opts *Options) (*Cassette, error) {
	mode, file, err := ParseSetting(setting)
	if err != nil {
		return nil, err
	}
	return OpenFile(mode, file, opts)
}

// OpenFile is [Open] with the mode and the file apart.
func OpenFile(mode Mode, file string, opts *Options) (*Cassette, error) {
	c := &Cassette{mode: mode, file: file}
	if opts != nil {
		c.opts = *opts
	}
	if c.opts.MaxCassetteBytes <= 0 {
		c.opts.MaxCassetteBytes = DefaultMaxCassetteBytes
	}
	if c.opts.MaxBodyBytes <= 0 {
		c.opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if mode == Auto {
		c.mode = Replay
		if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
			c.mode = Record
		}
	}
	switch c.mode {
	case Record:
		c.c = &cassetteFile{Version: FormatVersion}
		return c, nil
	case Replay:
	default:
		return nil, invalid(fmt.Errorf("unknown mode %q", mode))
	}
	p, err := load(file, c.opts.MaxCassetteBytes)
	if err != nil {
		return nil, err
	}
	c.c, c.canon = p.c, p.canon
	c.played = make([]bool, len(c.canon))
	return c, nil
}

// Mode returns what the cassette does: Record or Replay (Auto is resolved
// by Open).
func (c *Cassette) Mode() Mode { return c.mode }

// File returns the cassette's file.
func (c *Cassette) File() string { return c.file }

// Wrap returns a transport that records the requests sent through next,
// or replays them from the cassette without sending them (next is then
// not used). next nil means http.DefaultTransport.
func (c *Cassette) Wrap(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	if c.mode == Replay {
		return &player{c: c}
	}
	return &recorder{c: c, next: next}
}

// Unplayed returns, in Replay mode, a line for each recorded request not
// replayed yet ("#3 GET /v1/sessions/s1"); nil when all were.
func (c *Cassette) Unplayed() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for i, p := range c.played {
		if !p {
			out = append(out, fmt.Sprintf("#%d %s %s", i, c.canon[i].Method, c.canon[i].Path))
		}
	}
	return out
}

// Close ends the cassette: in Record mode it writes the file, redacted
// (see [Redact]), with the requests in the order they were sent; a body
// still being read is written as read so far. A recording that went past
// a bound fails with code ResourceExhausted and writes nothing. Close of a
// replaying cassette does nothing. A second Close does nothing.
func (c *Cassette) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.mode != Record {
		c.closed = true
		return nil
	}
	c.closed = true
	op := "replay: record " + c.file
	for _, r := range c.recs {
		r.finish(nil)
		if r.err != nil {
			return &errcode.Error{Code: errcode.ResourceExhausted, Op: op, Err: r.err}
		}
		Redact(r.i)
		r.i.ID = len(c.c.Interactions)
		c.c.Interactions = append(c.c.Interactions, r.i)
	}
	b, err := yaml.Marshal(c.c)
	if err == nil {
		// As go-vcr writes it: a YAML document start, then the cassette.
		err = os.WriteFile(c.file, append([]byte("---\n"), b...), 0o644)
	}
	if err != nil {
		return &errcode.Error{Code: errcode.Internal, Op: op, Err: err}
	}
	return nil
}

// limitedRead reads all of r, failing past max bytes.
func limitedRead(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("a request body larger than the limit of %d bytes (Options.MaxBodyBytes)", max)
	}
	return b, nil
}
