package core

import (
	"fmt"
	"slices"
	"sync"
)

// A Toolbox holds the tools a runner may call, by name. It is safe for
// concurrent use; tools may be added, removed and replaced while runs are
// in progress: a call is looked up when the runner takes it, so a step's
// calls see the toolbox as it is when the step arrives, and backends that
// offer the tools to the service offer the new set from the next request
// they send (see [Toolbox.Version]).
type Toolbox struct {
	mu      sync.RWMutex
	tools   []*Tool
	byName  map[string]*Tool
	version uint64
}

// NewToolbox returns a toolbox holding tools. It returns an error if two
// tools share a name.
func NewToolbox(tools ...*Tool) (*Toolbox, error) {
	tb := &Toolbox{}
	if err := tb.Add(tools...); err != nil {
		return nil, err
	}
	return tb, nil
}

// Add adds tools to the toolbox. It refuses (adding none of them) a nil
// tool or a name already present.
func (tb *Toolbox) Add(tools ...*Tool) error {
	return tb.Replace(nil, tools...)
}

// Replace removes the tools named remove and adds tools, as one change:
// a reader sees the toolbox before or after it, never between. It refuses
// (changing nothing) a nil tool, or a name that is present after the
// removal or repeated in tools. Names in remove that the toolbox does not
// hold are ignored.
func (tb *Toolbox) Replace(remove []string, tools ...*Tool) error {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	gone := make(map[string]bool, len(remove))
	for _, n := range remove {
		if tb.byName[n] != nil {
			gone[n] = true
		}
	}
	seen := make(map[string]bool, len(tools))
	for _, t := range tools {
		if t == nil {
			return fmt.Errorf("core: nil tool")
		}
		if (tb.byName[t.name] != nil && !gone[t.name]) || seen[t.name] {
			return fmt.Errorf("core: duplicate tool name %q", t.name)
		}
		seen[t.name] = true
	}
	if len(gone) == 0 && len(tools) == 0 {
		return nil
	}
	if tb.byName == nil {
		tb.byName = make(map[string]*Tool, len(tools))
	}
	if len(gone) > 0 {
		tb.tools = slices.DeleteFunc(slices.Clone(tb.tools), func(t *Tool) bool { return gone[t.name] })
		for n := range gone {
			delete(tb.byName, n)
		}
	}
	for _, t := range tools {
		tb.byName[t.name] = t
		tb.tools = append(tb.tools, t)
	}
	tb.version++
	return nil
}

// Version counts the changes made to the toolbox: it grows with every
// Add or Replace that changed it. A backend that offers the tools to the
// service compares it with the version it offered, to offer them again
// after a change.
func (tb *Toolbox) Version() uint64 {
	if tb == nil {
		return 0
	}
	tb.mu.RLock()
	defer tb.mu.RUnlock()
	return tb.version
}

// Lookup returns the tool with the given name, or nil.
func (tb *Toolbox) Lookup(name string) *Tool {
	if tb == nil {
		return nil
	}
	tb.mu.RLock()
	defer tb.mu.RUnlock()
	return tb.byName[name]
}

// Tools returns the tools in the order they were added.
func (tb *Toolbox) Tools() []*Tool {
	if tb == nil {
		return nil
	}
	tb.mu.RLock()
	defer tb.mu.RUnlock()
	return slices.Clone(tb.tools)
}

// Snapshot returns the tools, in the order they were added, and the
// version they are of, read together.
func (tb *Toolbox) Snapshot() ([]*Tool, uint64) {
	if tb == nil {
		return nil, 0
	}
	tb.mu.RLock()
	defer tb.mu.RUnlock()
	return slices.Clone(tb.tools), tb.version
}

// Names returns the tools' names in the order they were added.
func (tb *Toolbox) Names() []string {
	tools := tb.Tools()
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.name
	}
	return names
}
