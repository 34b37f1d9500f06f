package journal

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/journal/driver"
	"github.com/toolrelay/toolrelay/journal/internal/jurl"
)

// A Store is a journal that holds resources (a file, connections):
// Close releases them.
type Store interface {
	driver.Journal
	io.Closer
}

// An Opener opens the journal a URL names, for one scheme. u is rawURL
// parsed; errors must not show the URL's secrets (a password, a token):
// name it through the redaction Open uses, or not at all.
type Opener func(ctx context.Context, u *url.URL, rawURL string) (Store, error)

var (
	regMu   sync.RWMutex
	openers = map[string]Opener{}
)

// builtin names the package that registers each built-in scheme, for the
// error that says which import a program lacks.
var builtin = map[string]string{
	"sqlite":     "github.com/toolrelay/toolrelay/journal/sqlitejournal",
	"postgres":   "github.com/toolrelay/toolrelay/journal/pgjournal",
	"postgresql": "github.com/toolrelay/toolrelay/journal/pgjournal",
}

// Register makes the journals of a URL scheme available to [Open]. A
// journal package calls it from an init function, so that a program links
// the stores it imports, as with database/sql's drivers. It panics if the
// scheme is empty, "memory" or already registered, or if open is nil.
func Register(scheme string, open Opener) {
	regMu.Lock()
	defer regMu.Unlock()
	if scheme == "" || scheme == "memory" || open == nil {
		panic("journal: Register with an empty or reserved scheme, or a nil opener")
	}
	if _, dup := openers[scheme]; dup {
		panic(fmt.Sprintf("journal: scheme %q registered twice", scheme))
	}
	openers[scheme] = open
}

// Schemes returns the registered URL schemes, sorted.
func Schemes() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	names := make([]string, 0, len(openers))
	for n := range openers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Open opens the journal that rawURL names (see the package doc for the
// forms it takes): the memory journal, or a journal of a registered
// scheme. It fails with a *[errcode.Error] of code InvalidArgument if
// rawURL is malformed or of an unknown scheme; with code Unimplemented,
// naming the import to add, if its scheme is a built-in one the program
// does not link; and otherwise as the store's own Open does. The caller
// must Close the store.
func Open(ctx context.Context, rawURL string) (Store, error) {
	if rawURL == "" || rawURL == "memory" || rawURL == "memory:" {
		return memory{driver.NewMemory()}, nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, jurl.Bad(rawURL, "%s (want %s)", jurl.ParseError(err), forms())
	}
	scheme := strings.ToLower(u.Scheme)
	regMu.RLock()
	open := openers[scheme]
	regMu.RUnlock()
	switch {
	case open != nil:
		return open(ctx, u, rawURL)
	case scheme == "" && strings.Contains(rawURL, "="):
		return nil, jurl.Bad(rawURL, "no scheme: PostgreSQL key=value settings are not a journal URL; write them as postgres://user@host:5432/db?… (want %s)", forms())
	case scheme == "":
		return nil, jurl.Bad(rawURL, "no scheme (want %s)", forms())
	case builtin[scheme] != "":
		e := jurl.Bad(rawURL, "scheme %q is not linked into this program: import _ %q (or github.com/toolrelay/toolrelay/all)", scheme, builtin[scheme]).(*errcode.Error)
		e.Code = errcode.Unimplemented
		return nil, e
	}
	return nil, jurl.Bad(rawURL, "unknown scheme %q (want %s)", u.Scheme, forms())
}

// forms lists the URL forms Open accepts in this program.
func forms() string {
	f := []string{"memory"}
	for _, s := range Schemes() {
		f = append(f, s+":…")
	}
	return strings.Join(f, ", ")
}

// memory is the memory journal as a Store.
type memory struct{ *driver.Memory }

func (memory) Close() error { return nil }
