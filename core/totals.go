package core

import (
	"context"
	"encoding/json"
	"log/slog"

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
	// ChildCalls counts the calls of the children of the turn's agent
	// calls (see NewAgentTool), which its spend counts beside its own.
	ChildCalls int `json:"child_calls,omitempty"`
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

// turnNotes are the notes of a journal that keeps them, for the turns
// of a runner's backend, where the turns' totals go (see totals).
type turnNotes struct {
	n       journaldriver.Notes
	backend string
	log     *slog.Logger
}

// notes returns the notes of the runner's journal for its turns' totals;
// ok is false when the journal keeps none.
func (r *Runner) notes() (n turnNotes, ok bool) {
	jn, ok := r.opts.Journal.(journaldriver.Notes)
	if !ok {
		return turnNotes{}, false
	}
	return turnNotes{n: jn, backend: r.b.Name(), log: r.opts.Logger}, true
}

// clearTotals forgets the totals noted on thread, and their pages: its
// turn is over (it has its answer, or was canceled), and the next run on
// it starts a new one. A journal that keeps no notes has none.
func (r *Runner) clearTotals(ctx context.Context, thread string) {
	n, ok := r.notes()
	if !ok || thread == "" {
		return
	}
	if t, ok := n.read(ctx, thread); ok {
		n.pages(ctx, t.Page, func(ref pageRef, _ *page) {
			n.set(ctx, ref.Thread, ref.Name, "")
		})
	}
	n.set(ctx, thread, totalsNote, "")
}

// set sets a note of the totals, logging a failure.
func (n turnNotes) set(ctx context.Context, thread, name, value string) error {
	err := n.n.SetNote(context.WithoutCancel(ctx), n.backend, thread, name, value)
	if err != nil {
		n.log.WarnContext(ctx, "toolrelay: could not record the run's totals", "thread", thread, errorAttr(err))
	}
	return err
}

// read reads the totals noted on thread, if any.
func (n turnNotes) read(ctx context.Context, thread string) (*totals, bool) {
	v, found, err := n.n.Note(ctx, n.backend, thread, totalsNote)
	if err != nil || !found || v == "" {
		return nil, false
	}
	var t totals
	if err := json.Unmarshal([]byte(v), &t); err != nil {
		n.log.WarnContext(ctx, "toolrelay: the run's totals in the journal are damaged", "thread", thread, errorAttr(err))
		return nil, false
	}
	return &t, true
}

// pages calls each with the pages of a turn's totals, from the last (at
// ref) to the first, reading at most maxPages. A page that cannot be
// read ends them: the calls before it are not counted.
func (n turnNotes) pages(ctx context.Context, ref *pageRef, each func(pageRef, *page)) {
	for i := 0; ref != nil && i < maxPages; i++ {
		v, found, err := n.n.Note(ctx, n.backend, ref.Thread, ref.Name)
		var p page
		if err == nil && found {
			err = json.Unmarshal([]byte(v), &p)
		}
		if err != nil || !found {
			n.log.WarnContext(ctx, "toolrelay: a page of the run's totals in the journal is missing or damaged", "thread", ref.Thread, "note", ref.Name, errorAttr(err))
			return
		}
		each(*ref, &p)
		ref = p.Prev
	}
}
