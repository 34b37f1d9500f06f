package core

import (
	"context"
	"encoding/json"
	"strconv"

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
//
// The note is written after every step, so it must not grow with the
// turn: it lists the last calls sent, fewer than totalsPage of them, and
// each totalsPage calls before them go to a page of their own (a note of
// its own, written once), which names the page before it. Notes written
// before pages list every call. A call of the same thread and turn as the
// call before it in its list leaves them out (see callRef.Same), so that
// a step writes little more than its calls' ids.
type totals struct {
	Steps int       `json:"steps,omitempty"`
	Usage Usage     `json:"usage,omitzero"`
	Calls []callRef `json:"calls,omitempty"`
	// Paged counts the calls the pages hold, Page names the last page.
	Paged int      `json:"paged,omitempty"`
	Page  *pageRef `json:"page,omitempty"`
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

// totalsPage is how many calls a page of a turn's totals holds. The note
// is encoded after every step: with 32, the list a step encodes held 16
// calls on average, 7% of a step's CPU time on Foundry's in-memory path
// (issue 48, item 1); 8 keeps it at 4, and a page is written every 8 calls.
const totalsPage = 8

// maxPages bounds the pages a resume reads (a turn of 2 million calls), so
// that a damaged journal whose pages name each other in a ring cannot
// hold it.
const maxPages = 1 << 16

// A page holds calls a turn sent, before those of the page after it.
type page struct {
	Calls []callRef `json:"calls"`
	Prev  *pageRef  `json:"prev,omitempty"`
}

// A pageRef names the note of a page.
type pageRef struct {
	Thread string `json:"thread"`
	Name   string `json:"name"`
}

// A callRef names a call whose result was sent, to read it back from the
// journal. Same, in a list, says that its thread and turn are those of
// the call before it, left out (see ledger.sent and expand); notes
// written before it name them for every call.
type callRef struct {
	Thread string          `json:"thread,omitempty"`
	Turn   string          `json:"turn,omitempty"`
	Same   bool            `json:"same,omitempty"`
	ID     string          `json:"id"`
	Name   string          `json:"name,omitempty"`
	Kind   driver.CallKind `json:"kind,omitempty"`
}

// expand puts back, in place, the thread and turn of the calls of refs
// that left them out as those of the call before (Same), and returns refs.
// A first call marked Same (a damaged note) keeps an empty thread and turn.
func expand(refs []callRef) []callRef {
	for i := range refs {
		if refs[i].Same {
			if i > 0 {
				refs[i].Thread, refs[i].Turn = refs[i-1].Thread, refs[i-1].Turn
			}
			refs[i].Same = false
		}
	}
	return refs
}

func refOf(c *Call) callRef {
	return callRef{Thread: c.Thread, Turn: c.Turn, ID: c.ID, Name: c.Name, Kind: c.Kind}
}

func (c *callRef) call() Call {
	return Call{Thread: c.Thread, Turn: c.Turn, ID: c.ID, Name: c.Name, Kind: c.Kind}
}

// ledger is what a run notes of the calls its turn sent (see totals).
type ledger struct {
	calls []callRef // the last ones, in no page, as noted (see callRef.Same)
	paged int       // how many the pages hold
	last  *pageRef  // the last page, nil if none
	pages int       // how many pages there are
	// thread and turn are those of the last call of calls.
	thread, turn string
}

// sent adds the calls of results sent to the turn's ledger, each of the
// same thread and turn as the call before it in calls marked so, without
// them.
func (l *ledger) sent(calls ...callRef) {
	for _, c := range calls {
		thread, turn := c.Thread, c.Turn
		if len(l.calls) > 0 && thread == l.thread && turn == l.turn {
			c.Thread, c.Turn, c.Same = "", "", true
		}
		l.calls, l.thread, l.turn = append(l.calls, c), thread, turn
	}
}

// noteTotals records the turn's totals on thread, the one its next step
// comes on, with the run's budget, after a step's results were sent, or
// with the calls of a step held (counted, not run: see spend.held). A
// failure costs only the counts of a later run, so it is logged.
func (ru *run) noteTotals(ctx context.Context, thread string, held []Call) {
	r, res, l := ru.r, ru.res, &ru.led
	n, ok := r.opts.Journal.(journaldriver.Notes)
	if !ok || thread == "" {
		return
	}
	if len(l.calls) >= totalsPage {
		ref := pageRef{Thread: thread, Name: totalsNote + "." + strconv.Itoa(l.pages)}
		b, _ := json.Marshal(page{Calls: l.calls, Prev: l.last})
		if r.setNote(ctx, n, ref.Thread, ref.Name, string(b)) == nil {
			l.last, l.paged, l.pages, l.calls = &ref, l.paged+len(l.calls), l.pages+1, nil
		}
	}
	t := totals{Steps: res.Steps, Usage: res.Usage, Calls: l.calls, Paged: l.paged, Page: l.last, Cost: res.Cost, Budget: ru.sp.toNote()}
	for i := range held {
		t.Held = append(t.Held, refOf(&held[i]))
	}
	b, _ := json.Marshal(t)
	r.setNote(ctx, n, thread, totalsNote, string(b))
	ru.sp.noted = t.Budget
	ru.noted = true
}

// clearTotals forgets the totals noted on thread, and their pages: its
// turn is over (it has its answer, or was canceled), and the next run on
// it starts a new one.
func (r *Runner) clearTotals(ctx context.Context, thread string) {
	n, ok := r.opts.Journal.(journaldriver.Notes)
	if !ok || thread == "" {
		return
	}
	if t, ok := r.readTotals(ctx, n, thread); ok {
		r.pages(ctx, n, t.Page, func(ref pageRef, _ *page) {
			r.setNote(ctx, n, ref.Thread, ref.Name, "")
		})
	}
	r.setNote(ctx, n, thread, totalsNote, "")
}

// setNote sets a note of the totals, logging a failure.
func (r *Runner) setNote(ctx context.Context, n journaldriver.Notes, thread, name, value string) error {
	err := n.SetNote(context.WithoutCancel(ctx), r.b.Name(), thread, name, value)
	if err != nil {
		r.opts.Logger.WarnContext(ctx, "toolrelay: could not record the run's totals", "thread", thread, errorAttr(err))
	}
	return err
}

// readTotals reads the totals noted on thread, if any.
func (r *Runner) readTotals(ctx context.Context, n journaldriver.Notes, thread string) (*totals, bool) {
	v, found, err := n.Note(ctx, r.b.Name(), thread, totalsNote)
	if err != nil || !found || v == "" {
		return nil, false
	}
	var t totals
	if err := json.Unmarshal([]byte(v), &t); err != nil {
		r.opts.Logger.WarnContext(ctx, "toolrelay: the run's totals in the journal are damaged", "thread", thread, errorAttr(err))
		return nil, false
	}
	return &t, true
}

// pages calls each with the pages of a turn's totals, from the last (at
// ref) to the first, reading at most maxPages. A page that cannot be
// read ends them: the calls before it are not counted.
func (r *Runner) pages(ctx context.Context, n journaldriver.Notes, ref *pageRef, each func(pageRef, *page)) {
	for i := 0; ref != nil && i < maxPages; i++ {
		v, found, err := n.Note(ctx, r.b.Name(), ref.Thread, ref.Name)
		var p page
		if err == nil && found {
			err = json.Unmarshal([]byte(v), &p)
		}
		if err != nil || !found {
			r.opts.Logger.WarnContext(ctx, "toolrelay: a page of the run's totals in the journal is missing or damaged", "thread", ref.Thread, "note", ref.Name, errorAttr(err))
			return
		}
		each(*ref, &p)
		ref = p.Prev
	}
}

// loadTotals sets the run's totals to those noted on thread by the earlier
// runs of its turn, if any: their steps and usage, and the results they
// sent, read back from the journal (without their arguments; a result
// the journal no longer holds is left out), their calls' count and
// cost, and the turn's budget; the calls of a step they held go to the
// run's spend. It returns the keys of the calls counted, nil when nothing
// was noted, and the budget noted, nil if none.
func (ru *run) loadTotals(ctx context.Context, thread string) (map[journaldriver.Key]bool, *Budget) {
	r, res := ru.r, ru.res
	n, ok := r.opts.Journal.(journaldriver.Notes)
	if !ok {
		return nil, nil
	}
	t, ok := r.readTotals(ctx, n, thread)
	if !ok {
		return nil, nil
	}
	if t.Budget != nil && t.Budget.Check() != nil {
		t.Budget = nil // not one a runner wrote: the runner's own instead
	}
	res.Steps, res.Usage, res.Cost = t.Steps, t.Usage, t.Cost
	if len(t.Held) > 0 {
		ru.sp.held = make(map[journaldriver.Key]bool, len(t.Held))
		for _, c := range t.Held {
			call := c.call()
			ru.sp.held[r.key(&call)] = true
		}
	}
	var paged [][]callRef // the pages' calls, last page first
	r.pages(ctx, n, t.Page, func(_ pageRef, p *page) { paged = append(paged, expand(p.Calls)) })
	expand(t.Calls)
	ru.led = ledger{last: t.Page, pages: len(paged)}
	for _, p := range paged {
		ru.led.paged += len(p)
	}
	if len(paged) > 0 && ru.led.paged != t.Paged {
		// A page is missing: the calls the turn sent before the ones
		// read are not counted (the counts start later).
		paged, ru.led = nil, ledger{}
	}
	ru.led.sent(t.Calls...)
	counted := make(map[journaldriver.Key]bool, t.Paged+len(t.Calls))
	add := func(refs []callRef) {
		for i := range refs {
			call := refs[i].call()
			key := r.key(&call)
			counted[key] = true
			res.ToolCalls++
			e, ok, err := r.opts.Journal.Get(ctx, key)
			if err != nil || !ok || e.Result == nil {
				continue
			}
			tr := toResult(&call, e.Result, e.IdempotencyKey)
			tr.Resend = e.State == journaldriver.Submitted
			res.Calls = append(res.Calls, tr)
		}
	}
	for i := len(paged) - 1; i >= 0; i-- {
		add(paged[i])
	}
	add(t.Calls)
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
