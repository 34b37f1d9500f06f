package core

import (
	"context"
	"encoding/json"

	"github.com/toolrelay/toolrelay/core/driver"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// totalsNote names the journal note that keeps what the runs of a turn
// did so far (see totals), on the thread its next step comes on.
const totalsNote = "totals"

// totals is what a turn's runs did so far: after each step's results are
// sent, the runner notes them on the thread, so that a later run of the
// turn ([Runner.Resume], [Runner.TakeOver], in this process or another)
// counts from the turn's start: its steps (and their numbers), its calls,
// its usage. A note lost (a journal without notes, a write that failed
// or did not reach the disk) only makes the counts start later.
type totals struct {
	Steps int       `json:"steps,omitempty"`
	Usage Usage     `json:"usage,omitzero"`
	Calls []callRef `json:"calls,omitempty"`
	// Cost is the cost of Usage at the run's prices (see [Budget]); Held
	// the calls of a step whose usage is counted but whose results were
	// not sent: the run stopped on its budget before running them (see
	// spend.held). Notes written before budgets have neither.
	Cost float64   `json:"cost,omitempty"`
	Held []callRef `json:"held,omitempty"`
	// Budget is the turn's budget (see spend.b), for a resume that
	// is given none of its own; notes written before it have none.
	Budget *Budget `json:"budget,omitempty"`
}

// A callRef names a call whose result was sent, to read it back from the
// journal.
type callRef struct {
	Thread string          `json:"thread,omitempty"`
	Turn   string          `json:"turn,omitempty"`
	ID     string          `json:"id"`
	Name   string          `json:"name,omitempty"`
	Kind   driver.CallKind `json:"kind,omitempty"`
}

// noteTotals records res's totals on thread, the one the turn's next step
// comes on, with the run's budget (sp's), after a step's results were
// sent, or with the calls of a step held (counted, not run: see
// spend.held). A failure costs only the counts of a later run, so it is
// logged.
func (r *Runner) noteTotals(ctx context.Context, thread string, res *Result, sp *spend, held []Call) {
	n, ok := r.opts.Journal.(journaldriver.Notes)
	if !ok || thread == "" {
		return
	}
	t := totals{Steps: res.Steps, Usage: res.Usage, Calls: make([]callRef, len(res.Calls)), Cost: res.Cost, Budget: sp.toNote()}
	for i, tr := range res.Calls {
		t.Calls[i] = refOf(&tr.Call)
	}
	for i := range held {
		t.Held = append(t.Held, refOf(&held[i]))
	}
	b, _ := json.Marshal(t)
	r.setTotals(ctx, n, thread, string(b))
	sp.noted = t.Budget
}

func refOf(c *Call) callRef {
	return callRef{Thread: c.Thread, Turn: c.Turn, ID: c.ID, Name: c.Name, Kind: c.Kind}
}

// clearTotals forgets the totals noted on thread: its turn is over (it
// has its answer, or was canceled), and the next run on it starts a new
// one.
func (r *Runner) clearTotals(ctx context.Context, thread string) {
	if n, ok := r.opts.Journal.(journaldriver.Notes); ok && thread != "" {
		r.setTotals(ctx, n, thread, "")
	}
}

func (r *Runner) setTotals(ctx context.Context, n journaldriver.Notes, thread, value string) {
	if err := n.SetNote(context.WithoutCancel(ctx), r.b.Name(), thread, totalsNote, value); err != nil {
		r.opts.Logger.WarnContext(ctx, "toolrelay: could not record the run's totals", "thread", thread, errorAttr(err))
	}
}

// loadTotals sets res's totals to those noted on thread by the earlier
// runs of its turn, if any: their steps and usage, and the results they
// sent, read back from the journal (without their arguments; a result
// the journal no longer holds is left out), their calls' count and
// cost, and the turn's budget; the calls of a step they held go to sp's
// held. It returns the keys of the calls counted, nil when nothing was
// noted, and the budget noted, nil if none.
func (r *Runner) loadTotals(ctx context.Context, thread string, res *Result, sp *spend) (map[journaldriver.Key]bool, *Budget) {
	n, ok := r.opts.Journal.(journaldriver.Notes)
	if !ok {
		return nil, nil
	}
	v, found, err := n.Note(ctx, r.b.Name(), thread, totalsNote)
	if err != nil || !found || v == "" {
		return nil, nil
	}
	var t totals
	if err := json.Unmarshal([]byte(v), &t); err != nil {
		r.opts.Logger.WarnContext(ctx, "toolrelay: the run's totals in the journal are damaged", "thread", thread, errorAttr(err))
		return nil, nil
	}
	if t.Budget != nil && t.Budget.Check() != nil {
		t.Budget = nil // not one a runner wrote: the runner's own instead
	}
	res.Steps, res.Usage, res.Cost, res.ToolCalls = t.Steps, t.Usage, t.Cost, len(t.Calls)
	if len(t.Held) > 0 {
		sp.held = make(map[journaldriver.Key]bool, len(t.Held))
		for _, c := range t.Held {
			call := Call{Thread: c.Thread, Turn: c.Turn, ID: c.ID, Name: c.Name, Kind: c.Kind}
			sp.held[r.key(&call)] = true
		}
	}
	counted := make(map[journaldriver.Key]bool, len(t.Calls))
	for _, c := range t.Calls {
		call := Call{Thread: c.Thread, Turn: c.Turn, ID: c.ID, Name: c.Name, Kind: c.Kind}
		key := r.key(&call)
		counted[key] = true
		e, ok, err := r.opts.Journal.Get(ctx, key)
		if err != nil || !ok || e.Result == nil {
			continue
		}
		tr := toResult(&call, e.Result, e.IdempotencyKey)
		tr.Resend = e.State == journaldriver.Submitted
		res.Calls = append(res.Calls, tr)
	}
	return counted, t.Budget
}

// allCounted reports whether counted holds every call of calls.
func (r *Runner) allCounted(calls []Call, counted map[journaldriver.Key]bool) bool {
	for i := range calls {
		if !counted[r.key(&calls[i])] {
			return false
		}
	}
	return len(counted) > 0
}
