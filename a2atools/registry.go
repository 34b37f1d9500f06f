package a2atools

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/a2aproject/a2a-go/a2a"
)

// registry keeps the tasks of a server (it is a2a-go's task store) and
// what a2a-go does not: each task's owner and each context's thread and
// current task. It keeps at most max tasks, forgetting the oldest that
// ended (and their contexts, once their last task is forgotten).
type registry struct {
	max int

	mu       sync.Mutex
	tasks    map[a2a.TaskID]*taskRec
	order    []a2a.TaskID // tasks, oldest first
	contexts map[string]*contextRec
}

// taskRec is what the registry keeps of a task.
type taskRec struct {
	owner   string
	context string
	saved   []byte // the task as a2a-go last saved it, in JSON
	state   a2a.TaskState
	run     *running // the run of the task going on, if any
}

// contextRec is what the registry keeps of an A2A context: its owner, the
// runner's thread (empty until the first run names it), its task.
type contextRec struct {
	owner  string
	thread string
	task   a2a.TaskID
	tasks  int // tasks kept
}

// running is a task's run going on, which tasks/cancel stops.
type running struct {
	stop     context.CancelFunc
	done     chan struct{} // closed when the run returned
	canceled bool          // set (under the registry's lock) by a cancel
	ended    chan struct{} // closed when the cancel returned
	wrote    bool          // set, before ended is closed, once the cancel wrote the task's end
}

func newRegistry(max int) *registry {
	return &registry{max: max, tasks: map[a2a.TaskID]*taskRec{}, contexts: map[string]*contextRec{}}
}

// errTooMany is the error of a new task while the registry holds max
// tasks going on.
var errTooMany = fmt.Errorf("too many tasks going on: try again later: %w", a2a.ErrInvalidRequest)

// owns reports whether task id is who's.
func (g *registry) owns(who string, id a2a.TaskID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := g.tasks[id]
	return ok && t.owner == who
}

// admit checks that who may start a task on context id ("" for a new
// context): a context of another identity does not exist, and one whose
// task is going on or awaits input takes no new task.
func (g *registry) admit(who, id string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if id != "" {
		c, ok := g.contexts[id]
		if ok && c.owner != who {
			return fmt.Errorf("context %q belongs to another caller: %w", id, a2a.ErrInvalidParams)
		}
		if ok && c.task != "" {
			if t := g.tasks[c.task]; t != nil && !t.state.Terminal() {
				return fmt.Errorf("context %q has task %q going on (%s): send the message with its taskId, or cancel it: %w", id, c.task, t.state, a2a.ErrInvalidParams)
			}
		}
	}
	if len(g.tasks) >= g.max && !g.evictLocked() {
		return errTooMany
	}
	return nil
}

// start records task, new, of who, and returns its context's thread (""
// for a new one). It fails when the context has another task going on (a
// race lost to another message). The task is kept as it is until a2a-go
// saves it, so that tasks/get and tasks/cancel find it at once.
func (g *registry) start(who string, task *a2a.Task) (string, error) {
	id, ctxID := task.ID, task.ContextID
	saved, err := json.Marshal(task)
	if err != nil {
		return "", err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.contexts[ctxID]
	switch {
	case !ok:
		c = &contextRec{owner: who}
		g.contexts[ctxID] = c
	case c.owner != who:
		return "", fmt.Errorf("context %q belongs to another caller: %w", ctxID, a2a.ErrInvalidParams)
	case c.task != "" && g.tasks[c.task] != nil && !g.tasks[c.task].state.Terminal():
		return "", fmt.Errorf("context %q has task %q going on: %w", ctxID, c.task, a2a.ErrInvalidParams)
	}
	if len(g.tasks) >= g.max && !g.evictLocked() {
		return "", errTooMany
	}
	t, ok := g.tasks[id]
	if !ok {
		t = &taskRec{state: task.Status.State, saved: saved}
		g.tasks[id] = t
		g.order = append(g.order, id)
	}
	t.owner, t.context = who, ctxID
	c.task = id
	c.tasks++
	return c.thread, nil
}

// running reports whether task id has a run going on.
func (g *registry) running(id a2a.TaskID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.tasks[id]
	return t != nil && t.run != nil
}

// thread returns the thread of task id's context.
func (g *registry) thread(id a2a.TaskID) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t := g.tasks[id]; t != nil {
		if c := g.contexts[t.context]; c != nil {
			return c.thread
		}
	}
	return ""
}

// setThread records the thread of task id's context.
func (g *registry) setThread(id a2a.TaskID, thread string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t := g.tasks[id]; t != nil {
		if c := g.contexts[t.context]; c != nil {
			c.thread = thread
		}
	}
}

// begin records the run of task id going on, which stop stops. It
// returns false if the task is unknown.
func (g *registry) begin(id a2a.TaskID, stop context.CancelFunc) *running {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.tasks[id]
	if t == nil {
		return nil
	}
	t.run = &running{stop: stop, done: make(chan struct{}), ended: make(chan struct{})}
	return t.run
}

// end records that run, of task id, returned, and whether a cancel
// stopped it.
func (g *registry) end(id a2a.TaskID, run *running) (canceled bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t := g.tasks[id]; t != nil && t.run == run {
		t.run = nil
	}
	close(run.done)
	return run.canceled
}

// stop stops the run of task id going on, if any, and returns it (nil
// for none), to wait for.
func (g *registry) stop(id a2a.TaskID) *running {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.tasks[id]
	if t == nil || t.run == nil || t.run.canceled {
		return nil
	}
	t.run.canceled = true
	t.run.stop()
	return t.run
}

// evictLocked forgets the oldest task that ended, and its context once
// it has no other task kept; false if every task kept is going on.
func (g *registry) evictLocked() bool {
	for i, id := range g.order {
		t := g.tasks[id]
		if t != nil && !t.state.Terminal() {
			continue
		}
		g.order = append(g.order[:i:i], g.order[i+1:]...)
		if t != nil {
			delete(g.tasks, id)
			if c := g.contexts[t.context]; c != nil {
				if c.tasks--; c.tasks <= 0 {
					delete(g.contexts, t.context)
				}
			}
		}
		return true
	}
	return false
}

// Save implements a2asrv.TaskStore.
func (g *registry) Save(_ context.Context, task *a2a.Task) error {
	b, err := json.Marshal(task)
	if err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := g.tasks[task.ID]
	if !ok {
		// A task a2a-go saves before its executor starts: no owner
		// yet, so no caller sees it until start records one.
		if len(g.tasks) >= g.max && !g.evictLocked() {
			return errTooMany
		}
		t = &taskRec{context: task.ContextID}
		g.tasks[task.ID] = t
		g.order = append(g.order, task.ID)
	}
	t.saved, t.state = b, task.Status.State
	return nil
}

// Get implements a2asrv.TaskStore.
func (g *registry) Get(_ context.Context, id a2a.TaskID) (*a2a.Task, error) {
	g.mu.Lock()
	t := g.tasks[id]
	var b []byte
	if t != nil {
		b = t.saved
	}
	g.mu.Unlock()
	if b == nil {
		return nil, a2a.ErrTaskNotFound
	}
	var task a2a.Task
	if err := json.Unmarshal(b, &task); err != nil {
		return nil, err
	}
	return &task, nil
}
