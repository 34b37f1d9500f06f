package core

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// ErrBudgetExceeded is matched (with [errors.Is]) by the error of a run
// stopped on its budget (see [Budget]), and by the error of a turn the
// service ended on a spending limit of its own (an OpenAI session's
// budget_reached, a turn's session_budget_exceeded). Its code is
// ResourceExhausted.
var ErrBudgetExceeded = driver.ErrBudgetExceeded

// Unlimited, in a field of a [Budget] (a limit, or a [Remaining] count),
// means no limit: in RunOptions.Budget it lifts the runner's default
// (Options.Budget) for that field.
const Unlimited = -1

// A Budget bounds what one run may spend: the tokens the service reports
// (its usage, added up over the turn's steps), the calls run, and the
// cost of the tokens at the prices of a table. It is counted over the
// run's turn from its start, across [Runner.Resume] and [Runner.TakeOver]
// and in other processes: the counts are kept in the journal with the
// turn's totals (see [Result]), in a journal that keeps notes (memory,
// SQLite, PostgreSQL).
//
// A run is stopped before its next request once it has spent a limit
// (a token count or the cost reached it), or when running the calls of
// its step would pass MaxToolCalls: no call of the step runs, nothing is
// sent, and the run ends with an error matching [ErrBudgetExceeded]
// (code ResourceExhausted). The service's turn is left waiting, its
// step's usage counted in the journal: [Runner.Resume] with a raised
// budget goes on from there (the step counted once), with the same
// budget it stops again, and [Runner.Cancel] abandons the turn. Token
// counts are those the service reports, after the step that spends them:
// a limit bounds when the run stops, so one step may take the count past
// it.
//
// A zero field sets no limit of its own: in Options.Budget none, in
// RunOptions.Budget the runner's. [Unlimited] sets none in either. Any
// other negative value, and a cost or a price that is not a finite number
// (or a negative price), is refused: see [Budget.Check].
//
// A turn keeps its budget: the runner notes it with the turn's totals,
// and a resume (or a worker taking the run over) holds the turn to it.
// A resume's own RunOptions.Budget overrides it field by field, a zero
// field keeping the turn's, and is the turn's budget from then on.
type Budget struct {
	// MaxInputTokens bounds the input tokens of the turn (Usage.InputTokens).
	MaxInputTokens int64 `json:"max_input_tokens,omitempty"`
	// MaxOutputTokens bounds its output tokens (Usage.OutputTokens).
	MaxOutputTokens int64 `json:"max_output_tokens,omitempty"`
	// MaxTotalTokens bounds its tokens in all (Usage.TotalTokens).
	MaxTotalTokens int64 `json:"max_total_tokens,omitempty"`
	// MaxToolCalls bounds the calls whose results the run sends.
	MaxToolCalls int64 `json:"max_tool_calls,omitempty"`
	// MaxCost bounds the cost of the turn's tokens at Prices, in their
	// currency. With a cost limit, a step of a model Prices has no price
	// for (and no "*" entry) ends the run with a FailedPrecondition error
	// before its next request.
	MaxCost float64 `json:"max_cost,omitempty"`
	// Prices are the prices of tokens by model (driver.Step.Model, as the
	// service reports it), "*" for any other model. The cost of a run
	// (Result.Cost) is counted when it is set, with or without MaxCost.
	// A RunOptions.Budget with Prices replaces the runner's table.
	Prices map[string]Price `json:"prices,omitempty"`
}

// A Price is what a model's tokens cost, per million, in one currency.
type Price struct {
	// Input is the price of a million input tokens.
	Input float64 `json:"input"`
	// Output is the price of a million output tokens.
	Output float64 `json:"output"`
}

// Remaining is what a run's budget has left, on the events of a budgeted
// run (EventStepStarted, EventResultsSubmitted, EventRunFinished) and in
// its Result. A field whose limit is not set is [Unlimited]; the zero
// Remaining (Set false) is that of a run without a budget.
type Remaining struct {
	// Set reports whether the run has a budget.
	Set bool
	// InputTokens, OutputTokens, TotalTokens and ToolCalls are what is
	// left of each limit (0 once it is reached).
	InputTokens, OutputTokens, TotalTokens, ToolCalls int64
	// Cost is what is left of MaxCost.
	Cost float64
}

// limited reports whether b sets a limit.
func (b *Budget) limited() bool {
	return b.MaxInputTokens > 0 || b.MaxOutputTokens > 0 || b.MaxTotalTokens > 0 || b.MaxToolCalls > 0 || b.MaxCost > 0
}

// zero reports whether b sets nothing, not even Unlimited.
func (b *Budget) zero() bool {
	return b.MaxInputTokens == 0 && b.MaxOutputTokens == 0 && b.MaxTotalTokens == 0 && b.MaxToolCalls == 0 && b.MaxCost == 0 && b.Prices == nil
}

// same reports whether a and b set the same limits and prices.
func (b *Budget) same(o *Budget) bool {
	return b.MaxInputTokens == o.MaxInputTokens && b.MaxOutputTokens == o.MaxOutputTokens && b.MaxTotalTokens == o.MaxTotalTokens &&
		b.MaxToolCalls == o.MaxToolCalls && b.MaxCost == o.MaxCost && maps.Equal(b.Prices, o.Prices)
}

// Check returns an error whose code is InvalidArgument when b holds a
// value no budget may: a limit below zero other than [Unlimited], a cost
// limit that is not a finite number (NaN, an infinity), or a price that
// is negative or not a finite number. Every runner refuses a run whose
// budget, or whose runner's default budget, fails it, before it sends
// anything; so does package adapter, for the budget of its settings and
// of its Options. A budget may not lift a limit by any value but
// Unlimited: in a quota computed as allowed − used, a negative value is
// exactly that of a user over it.
func (b Budget) Check() error {
	if err := b.check(); err != nil {
		return &errcode.Error{Code: errcode.InvalidArgument, Op: "core: budget", Err: err}
	}
	return nil
}

func (b *Budget) check() error {
	for _, f := range [...]struct {
		name string
		v    int64
	}{{"MaxInputTokens", b.MaxInputTokens}, {"MaxOutputTokens", b.MaxOutputTokens}, {"MaxTotalTokens", b.MaxTotalTokens}, {"MaxToolCalls", b.MaxToolCalls}} {
		if f.v < 0 && f.v != Unlimited {
			return fmt.Errorf("%s is %d: a limit is positive, 0 (none of its own) or Unlimited (-1)", f.name, f.v)
		}
	}
	switch c := b.MaxCost; {
	case math.IsNaN(c) || math.IsInf(c, 0):
		return fmt.Errorf("MaxCost is %v: a cost limit is a finite number", c)
	case c < 0 && c != Unlimited:
		return fmt.Errorf("MaxCost is %v: a cost limit is positive, 0 (none of its own) or Unlimited (-1)", c)
	}
	badPrice := func(v float64) bool { return v < 0 || math.IsNaN(v) || math.IsInf(v, 0) }
	for _, p := range b.Prices {
		if !badPrice(p.Input) && !badPrice(p.Output) {
			continue
		}
		for _, model := range slices.Sorted(maps.Keys(b.Prices)) { // the first by name, whatever the map's order
			p := b.Prices[model]
			for _, v := range [...]float64{p.Input, p.Output} {
				if badPrice(v) {
					return fmt.Errorf("the price of %q is %v: a price is a finite number, 0 or more", model, v)
				}
			}
		}
	}
	return nil
}

// Over returns b with the fields it leaves zero taken from def (a
// runner's default): the budget of a run whose options set b. Prices are
// def's when b has none. [Unlimited] stays as it is, meaning no limit
// (every rule reads a limit of 0 or less as none), so that the budget
// still says what it lifts when it is laid over another in turn (a
// resume's options over the turn's budget). b and def are expected to
// pass [Budget.Check]; Over does not check them.
func (b Budget) Over(def Budget) Budget {
	pick := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	pick(&b.MaxInputTokens, def.MaxInputTokens)
	pick(&b.MaxOutputTokens, def.MaxOutputTokens)
	pick(&b.MaxTotalTokens, def.MaxTotalTokens)
	pick(&b.MaxToolCalls, def.MaxToolCalls)
	if b.MaxCost == 0 {
		b.MaxCost = def.MaxCost
	}
	if b.Prices == nil {
		b.Prices = def.Prices
	}
	return b
}

// Charge adds step's usage to s (what a run spent, which a loop other
// than core's Runner keeps: see [driver.Spent]), and its cost at b's
// prices (Prices[step.Model], else Prices["*"]). A step of a model
// without a price under a cost limit sets s.Unpriced.
func (b *Budget) Charge(s *driver.Spent, step *driver.Step) {
	s.Usage.Add(step.Usage)
	if b.Prices == nil {
		return
	}
	p, ok := b.Prices[step.Model]
	if !ok {
		p, ok = b.Prices["*"]
	}
	if !ok {
		if b.MaxCost > 0 && s.Unpriced == "" && step.Usage != (Usage{}) {
			s.Unpriced = step.Model
		}
		return
	}
	s.Cost += (float64(step.Usage.InputTokens)*p.Input + float64(step.Usage.OutputTokens)*p.Output) / 1e6
}

// Exceeded returns why a run that spent s must stop before running the
// next calls of its step, nil if b lets it go on: a limit s reached (an
// error matching [ErrBudgetExceeded], code ResourceExhausted), calls that
// would pass MaxToolCalls (the same), or a model without a price under a
// cost limit (FailedPrecondition).
func (b *Budget) Exceeded(s driver.Spent, next int) error {
	if !b.limited() {
		return nil
	}
	if s.Unpriced != "" {
		return &errcode.Error{Code: errcode.FailedPrecondition, Op: "core: run", Err: fmt.Errorf("the budget's cost limit has no price for the model %q (set Budget.Prices[%q] or Prices[\"*\"])", s.Unpriced, s.Unpriced)}
	}
	reached := func(name string, limit, used int64) error {
		if limit > 0 && used >= limit {
			return fmt.Errorf("%w: %s %d of %d", ErrBudgetExceeded, name, used, limit)
		}
		return nil
	}
	err := reached("input tokens", b.MaxInputTokens, s.Usage.InputTokens)
	if err == nil {
		err = reached("output tokens", b.MaxOutputTokens, s.Usage.OutputTokens)
	}
	if err == nil {
		err = reached("total tokens", b.MaxTotalTokens, s.Usage.TotalTokens)
	}
	if err == nil && b.MaxToolCalls > 0 && int64(s.ToolCalls+next) > b.MaxToolCalls {
		err = fmt.Errorf("%w: tool calls %d and %d more of %d", ErrBudgetExceeded, s.ToolCalls, next, b.MaxToolCalls)
	}
	if err == nil && b.MaxCost > 0 && s.Cost >= b.MaxCost {
		err = fmt.Errorf("%w: cost %s of %s", ErrBudgetExceeded, costText(s.Cost), costText(b.MaxCost))
	}
	if err == nil {
		return nil
	}
	return &errcode.Error{Code: errcode.ResourceExhausted, Op: "core: run", Err: err}
}

// Remaining returns what b has left once s is spent: the zero Remaining
// when b sets no limit.
func (b *Budget) Remaining(s driver.Spent) Remaining {
	if !b.limited() {
		return Remaining{}
	}
	left := func(limit, used int64) int64 {
		if limit <= 0 {
			return Unlimited
		}
		return max(limit-used, 0)
	}
	rem := Remaining{Set: true,
		InputTokens:  left(b.MaxInputTokens, s.Usage.InputTokens),
		OutputTokens: left(b.MaxOutputTokens, s.Usage.OutputTokens),
		TotalTokens:  left(b.MaxTotalTokens, s.Usage.TotalTokens),
		ToolCalls:    left(b.MaxToolCalls, int64(s.ToolCalls)),
		Cost:         Unlimited,
	}
	if b.MaxCost > 0 {
		rem.Cost = max(b.MaxCost-s.Cost, 0)
	}
	return rem
}

// spend is a run's budget and what its turn's earlier runs left to it.
type spend struct {
	// b is the run's budget: its options' over the one noted with the
	// turn's totals (a resume), or over the runner's (Options.Budget).
	b Budget
	// noted is the budget noted with the turn's totals, nil if none.
	noted *Budget
	// held are the calls of a step whose usage an earlier run of the turn
	// counted before it stopped on its budget, without running them (see
	// overBudget): given again, the step is not counted twice.
	held map[journaldriver.Key]bool
	// spent is what the turn spent so far, its earlier runs' included:
	// the one count of its usage, cost and calls, which the run's Result
	// reports (see run.end).
	spent driver.Spent
	// cap, for the run of an agent tool's child, is what it may spend of
	// its parent's budget from base, what its turn had spent when it
	// started (see NewAgentTool); nil for other runs.
	cap  *Remaining
	base driver.Spent
}

// set sets the run's budget: b (its options') over the one noted for
// its turn (noted, nil if none; a run that starts a turn has none) or,
// without one, over def (the runner's).
func (sp *spend) set(b Budget, noted, def *Budget) {
	if noted != nil {
		def = noted
	}
	sp.b, sp.noted = b.Over(*def), noted
}

// toNote returns the budget to note with the turn's totals, nil if the
// run has none.
func (sp *spend) toNote() *Budget {
	if sp.b.zero() {
		return nil
	}
	return &sp.b
}

// unnoted reports whether the turn's totals do not note the run's
// budget yet: a resume or a takeover of the turn would not find it.
func (sp *spend) unnoted() bool {
	b := sp.toNote()
	return b != nil && (sp.noted == nil || !sp.noted.same(b))
}

// add adds step's usage, and its cost at the budget's prices, to what
// the turn spent, unless an earlier run of the turn counted it (held:
// allHeld says sp.held holds each of its calls).
func (sp *spend) add(step *driver.Step, allHeld bool) {
	if sp.held != nil && len(step.Calls) > 0 && allHeld {
		sp.held = nil
		return
	}
	sp.b.Charge(&sp.spent, step)
}

// remaining returns what the budget has left, once calls more calls (those
// of the step being sent) are counted.
func (sp *spend) remaining(calls int) Remaining {
	s := sp.spent
	s.ToolCalls += calls
	return sp.b.Remaining(s)
}

// childCap returns what an agent tool's child may spend, started in a
// step of calls calls (counted): what the budget has left and, in a run
// that is itself an agent's child, what its cap leaves once its spend
// from base is counted, the tighter of the two in each field. A
// grandchild so stays within what each budget above it has left.
func (sp *spend) childCap(calls int) Remaining {
	rem := sp.remaining(calls)
	if sp.cap == nil {
		return rem
	}
	s := sp.spent
	s.ToolCalls += calls
	return rem.Min(sp.cap.Less(spentSince(s, sp.base)))
}

// spentSince returns what was spent from base to s.
func spentSince(s, base driver.Spent) driver.Spent {
	return driver.Spent{
		Usage: driver.Usage{
			InputTokens:  s.Usage.InputTokens - base.Usage.InputTokens,
			OutputTokens: s.Usage.OutputTokens - base.Usage.OutputTokens,
			TotalTokens:  s.Usage.TotalTokens - base.Usage.TotalTokens,
		},
		ToolCalls: s.ToolCalls - base.ToolCalls,
		Cost:      s.Cost - base.Cost,
	}
}

// Less returns what rem leaves once s more is spent: each count that is
// a limit less what s spent of it (0 once reached); a count below zero
// ([Unlimited]) stays so, and the zero Remaining (no budget) stays zero.
// A run given rem by its parent (an agent tool's child, see
// [NewAgentTool]) has rem.Less(its spend) left of it.
func (rem Remaining) Less(s driver.Spent) Remaining {
	if !rem.Set {
		return rem
	}
	return Remaining{Set: true,
		InputTokens:  capLeft(rem.InputTokens, s.Usage.InputTokens),
		OutputTokens: capLeft(rem.OutputTokens, s.Usage.OutputTokens),
		TotalTokens:  capLeft(rem.TotalTokens, s.Usage.TotalTokens),
		ToolCalls:    capLeft(rem.ToolCalls, int64(s.ToolCalls)),
		Cost:         capLeft(rem.Cost, s.Cost),
	}
}

// capLeft returns what a count of a [Remaining] leaves once used more is
// spent: 0 once reached, Unlimited for a count below zero (no limit).
func capLeft[T int64 | float64](count, used T) T {
	if count < 0 {
		return Unlimited
	}
	return max(count-used, 0)
}

// Min returns, of rem and o, the lower count in each field, a count below
// zero ([Unlimited]) or a Remaining not Set being no limit: what a run
// under both has left.
func (rem Remaining) Min(o Remaining) Remaining {
	switch {
	case !rem.Set:
		return o
	case !o.Set:
		return rem
	}
	return Remaining{Set: true,
		InputTokens:  lower(rem.InputTokens, o.InputTokens),
		OutputTokens: lower(rem.OutputTokens, o.OutputTokens),
		TotalTokens:  lower(rem.TotalTokens, o.TotalTokens),
		ToolCalls:    lower(rem.ToolCalls, o.ToolCalls),
		Cost:         lower(rem.Cost, o.Cost),
	}
}

// lower returns the lower of the counts x and y of two Remainings, a
// count below zero being no limit.
func lower[T int64 | float64](x, y T) T {
	if x < 0 || (y >= 0 && y < x) {
		return y
	}
	return x
}

// exceeded returns why the run must stop before running the n calls of
// its next step, if it must (see [Budget.Exceeded]).
func (sp *spend) exceeded(n int) error {
	if err := sp.b.Exceeded(sp.spent, n); err != nil || sp.cap == nil {
		return err
	}
	return sp.cap.exceeded(sp.spent, sp.base, n)
}

func costText(c float64) string {
	return fmt.Sprintf("%.6g", math.Round(c*1e6)/1e6)
}
