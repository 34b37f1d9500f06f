package replay

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolrelay/toolrelay/errcode"
	"go.yaml.in/yaml/v4"
)

// parsed is a loaded cassette: what its file holds, and the canonical form
// of each recorded request. It is shared by every Cassette opened on the
// same file, and never changed.
type parsed struct {
	c     *cassetteFile
	canon []*canon
}

// cacheKey names one version of a cassette file: a file rewritten (its
// modification time or size changed) is parsed again.
type cacheKey struct {
	path string
	mod  time.Time
	size int64
}

// maxCached bounds the number of parsed cassettes kept.
const maxCached = 32

// cache keeps the cassettes parsed lately, so that a test that opens the
// same cassette many times parses it once.
var cache struct {
	mu    sync.Mutex
	m     map[cacheKey]*parsed
	order []cacheKey // oldest first: the first is evicted past maxCached
}

// parses counts the cassette files parsed (for tests).
var parses atomic.Int64

// load returns the parsed cassette in file, from the cache when the file
// has not changed since it was parsed. A file that is missing fails with
// code NotFound, one larger than max bytes with ResourceExhausted, one
// that does not decode with InvalidArgument.
func load(file string, max int64) (*parsed, error) {
	op := "replay: cassette " + file
	f, err := os.Open(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &errcode.Error{Code: errcode.NotFound, Op: op, Err: errors.New("no such file: record it first (record:FILE or auto:FILE)")}
	}
	if err != nil {
		return nil, &errcode.Error{Code: errcode.InvalidArgument, Op: op, Err: err}
	}
	defer f.Close()
	st, err := f.Stat()
	switch {
	case err != nil:
		return nil, &errcode.Error{Code: errcode.InvalidArgument, Op: op, Err: err}
	case !st.Mode().IsRegular():
		return nil, &errcode.Error{Code: errcode.InvalidArgument, Op: op, Err: errors.New("not a regular file")}
	case st.Size() > max:
		return nil, &errcode.Error{Code: errcode.ResourceExhausted, Op: op, Err: fmt.Errorf("%d bytes, more than the limit of %d (Options.MaxCassetteBytes)", st.Size(), max)}
	}
	path, err := filepath.Abs(file)
	if err != nil {
		path = file
	}
	key := cacheKey{path: path, mod: st.ModTime(), size: st.Size()}
	cache.mu.Lock()
	p := cache.m[key]
	cache.mu.Unlock()
	if p != nil {
		return p, nil
	}

	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, &errcode.Error{Code: errcode.InvalidArgument, Op: op, Err: err}
	}
	if int64(len(b)) > max {
		return nil, &errcode.Error{Code: errcode.ResourceExhausted, Op: op, Err: fmt.Errorf("more than the limit of %d bytes (Options.MaxCassetteBytes)", max)}
	}
	parses.Add(1)
	p = &parsed{c: new(cassetteFile)}
	if err := yaml.Unmarshal(b, p.c); err != nil {
		return nil, &errcode.Error{Code: errcode.InvalidArgument, Op: op, Err: fmt.Errorf("not a go-vcr cassette: %w", err)}
	}
	if p.c.Version != FormatVersion {
		return nil, &errcode.Error{Code: errcode.InvalidArgument, Op: op, Err: fmt.Errorf("not a go-vcr cassette of format version %d", FormatVersion)}
	}
	for _, i := range p.c.Interactions {
		if i == nil {
			return nil, &errcode.Error{Code: errcode.InvalidArgument, Op: op, Err: errors.New("not a go-vcr cassette: an empty interaction")}
		}
		p.canon = append(p.canon, canonOf(&i.Request))
	}

	cache.mu.Lock()
	defer cache.mu.Unlock()
	if q := cache.m[key]; q != nil {
		return q, nil // parsed meanwhile by another Open
	}
	if cache.m == nil {
		cache.m = map[cacheKey]*parsed{}
	}
	if len(cache.order) >= maxCached {
		delete(cache.m, cache.order[0])
		cache.order = cache.order[1:]
	}
	cache.m[key] = p
	cache.order = append(cache.order, key)
	return p, nil
}

// ReadFile returns the interactions of the cassette in file, in the order
// they were recorded, as [OpenFile] reads it: a file parsed before and
// not changed since is not parsed again, and the interactions are the
// ones parsed then, shared with every reader of the file: the caller must
// not modify them. Errors have the codes of OpenFile's.
func ReadFile(file string) ([]*Interaction, error) {
	p, err := load(file, DefaultMaxCassetteBytes)
	if err != nil {
		return nil, err
	}
	return slices.Clip(p.c.Interactions), nil
}
