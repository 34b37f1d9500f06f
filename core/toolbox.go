package core

import (
	"fmt"
	"slices"
	"sync"
)

// A Toolbox holds the tools a runner may call, by name. It is safe for
// concurrent use; tools may be added while runs are in progress.
type Toolbox struct {
	mu     sync.RWMutex
	tools  []*Tool
	byName map[string]*Tool
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
	tb.mu.Lock()
	defer tb.mu.Unlock()
	seen := make(map[string]bool, len(tools))
	for _, t := range tools {
		if t == nil {
			return fmt.Errorf("core: nil tool")
		}
		if tb.byName[t.name] != nil || seen[t.name] {
			return fmt.Errorf("core: duplicate tool name %q", t.name)
		}
		seen[t.name] = true
	}
	if tb.byName == nil {
		tb.byName = make(map[string]*Tool, len(tools))
	}
	for _, t := range tools {
		tb.byName[t.name] = t
		tb.tools = append(tb.tools, t)
	}
	return nil
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

// Names returns the tools' names in the order they were added.
func (tb *Toolbox) Names() []string {
	tools := tb.Tools()
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.name
	}
	return names
}
