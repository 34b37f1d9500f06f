// Command toolrelay-journal shows what a toolrelay journal holds, for the
// people who run workers on it, and prunes it:
//
//	toolrelay-journal -journal sqlite:///var/lib/app/journal.db runs
//	toolrelay-journal -journal "$DATABASE_URL" runs -state running
//	toolrelay-journal -journal "$DATABASE_URL" orphans
//	toolrelay-journal -journal "$DATABASE_URL" calls -state in_doubt
//	toolrelay-journal -journal "$DATABASE_URL" show -backend openai sess_123
//	toolrelay-journal -journal "$DATABASE_URL" prune -older 720h
//
// runs lists the run records (backend, thread, state, owner, lease, last
// change), oldest first, -state awaiting_approval the runs waiting for a
// person; orphans lists the running runs whose worker's lease expired (a
// worker died and none took them over yet); calls lists the calls
// (backend, thread, call, state, owner, lease, outcome), least recently
// changed first, by -backend, -thread and -state (started, in_doubt —
// started, its worker's lease over —, awaiting_approval — a paused run's
// calls that await a person's decision —, succeeded, failed, submitted);
// show prints one thread's run record, its calls and its approvals
// (pending and decided, with who decided); prune deletes what finished
// before -older ago, but never what a run still running or awaiting
// approval needs (see driver.Journal.Prune). The journal URL may also come from TOOLRELAY_JOURNAL.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"text/tabwriter"
	"time"

	_ "github.com/toolrelay/toolrelay/all" // every journal store
	"github.com/toolrelay/toolrelay/internal/redact"
	"github.com/toolrelay/toolrelay/journal"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(os.Stdout, usage)
	case err != nil:
		fmt.Fprintln(os.Stderr, "toolrelay-journal:", err)
		os.Exit(2)
	}
}

// usage is what -h prints, and what a wrong command line is answered with.
const usage = `usage: toolrelay-journal [-journal URL] COMMAND [flags]

The journal's URL is -journal or TOOLRELAY_JOURNAL: sqlite:///path/file.db or
postgres://user@host/db.

Commands:
  runs    [-backend B] [-state S] [-limit N]
          the run records, oldest first; -state running, awaiting_approval,
          finished, failed or continued
  orphans [-backend B]
          the running runs whose worker's lease expired
  calls   [-backend B] [-thread T] [-state S] [-limit N]
          the calls, least recently changed first; -state started, in_doubt,
          awaiting_approval, succeeded, failed or submitted
  show    -backend B THREAD
          one thread's run record, calls and approvals
  prune   -older DURATION
          delete what finished longer ago than DURATION (such as 720h)
`

func run(ctx context.Context, args []string, w io.Writer) error {
	fs := flag.NewFlagSet("toolrelay-journal", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	url := fs.String("journal", os.Getenv("TOOLRELAY_JOURNAL"), "the journal's URL (sqlite://… or postgres://…)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%s\n%s", redact.Text(err.Error()), usage)
	}
	if *url == "" || fs.NArg() == 0 {
		return errors.New(usage)
	}
	if !commands[fs.Arg(0)] {
		return fmt.Errorf("unknown command %s\n%s", shown(fs.Arg(0)), usage)
	}
	store, err := journal.Open(ctx, *url)
	if err != nil {
		return err
	}
	defer store.Close()
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	sub := flag.NewFlagSet(cmd, flag.ContinueOnError)
	sub.SetOutput(io.Discard)
	backend := sub.String("backend", "", "only this backend's runs or calls")
	thread := sub.String("thread", "", "only this thread's calls")
	state := sub.String("state", "", "only runs (running, awaiting_approval, finished, failed, continued) or calls (started, in_doubt, succeeded, failed, submitted) in this state")
	limit := sub.Int("limit", 1000, "at most this many runs or calls")
	older := sub.Duration("older", 0, "prune what finished longer ago than this")
	if err := sub.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%s: %s\n%s", cmd, redact.Text(err.Error()), usage)
	}
	if cmd != "show" && sub.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %s\n%s", cmd, shown(sub.Arg(0)), usage)
	}
	runs, _ := store.(journaldriver.Runs)
	switch cmd {
	case "runs", "orphans":
		if runs == nil {
			return fmt.Errorf("the journal (%T) keeps no run records", store)
		}
		if *state != "" && !runStates[journaldriver.RunState(*state)] {
			return fmt.Errorf("runs: unknown state %s (want running, awaiting_approval, finished, failed or continued)", shown(*state))
		}
		list, err := runs.ListRuns(ctx, *backend, journaldriver.RunState(*state), *limit)
		if err != nil {
			return err
		}
		if cmd == "orphans" {
			list = orphans(list, time.Now())
		}
		printRuns(w, list)
		return nil
	case "calls":
		f := journaldriver.EntryFilter{Backend: *backend, Thread: *thread}
		switch *state {
		case "":
		case "in_doubt":
			f.InDoubt = true
		case string(journaldriver.RunAwaiting):
			return awaiting(ctx, w, store, f, *limit)
		default:
			st, ok := entryStates[*state]
			if !ok {
				return fmt.Errorf("calls: unknown state %s (want started, in_doubt, awaiting_approval, succeeded, failed or submitted)", shown(*state))
			}
			f.State = st
		}
		return calls(ctx, w, store, f, *limit)
	case "show":
		if *backend == "" || sub.NArg() != 1 {
			return fmt.Errorf("show: name the backend (-backend) and one thread\n%s", usage)
		}
		return show(ctx, w, store, *backend, sub.Arg(0))
	case "prune":
		if *older <= 0 {
			return fmt.Errorf("prune: say how old (-older 720h)\n%s", usage)
		}
		n, err := store.Prune(ctx, time.Now().Add(-*older))
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "pruned %d calls (and the runs, approvals and notes that ended before %v)\n", n, time.Now().Add(-*older).Format(time.RFC3339))
		return nil
	}
	return nil
}

// commands are the commands run knows.
var commands = map[string]bool{"runs": true, "orphans": true, "calls": true, "show": true, "prune": true}

// plainRE matches the arguments an error may quote as they are.
var plainRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// shown returns an argument as an error quotes it: as it is when it is a
// plain word, else redacted, for it may be a journal URL or settings with
// a password given where a word goes.
func shown(arg string) string {
	if plainRE.MatchString(arg) {
		return strconv.Quote(arg)
	}
	return "(" + redact.ConnString(arg) + ")"
}

// runStates are the run states runs -state takes.
var runStates = map[journaldriver.RunState]bool{
	journaldriver.RunRunning: true, journaldriver.RunAwaiting: true, journaldriver.RunFinished: true, journaldriver.RunFailed: true, journaldriver.RunContinued: true,
}

// orphans returns the running runs whose lease expired at now.
func orphans(list []journaldriver.Run, now time.Time) []journaldriver.Run {
	var out []journaldriver.Run
	for _, r := range list {
		if r.State == journaldriver.RunRunning && !now.Before(r.LeaseUntil) {
			out = append(out, r)
		}
	}
	return out
}

func printRuns(w io.Writer, list []journaldriver.Run) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tTHREAD\tSTATE\tOWNER\tLEASE\tUPDATED\tERROR")
	for _, r := range list {
		lease := "-"
		if !r.LeaseUntil.IsZero() {
			lease = r.LeaseUntil.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Backend, r.Thread, r.State, r.Owner, lease, r.Updated.Format(time.RFC3339), r.Error)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d runs\n", len(list))
}

// entryStates are the call states calls -state takes.
var entryStates = map[string]journaldriver.State{
	"started": journaldriver.Started, "succeeded": journaldriver.Succeeded, "failed": journaldriver.Failed, "submitted": journaldriver.Submitted,
}

// calls prints the calls f selects.
func calls(ctx context.Context, w io.Writer, store journal.Store, f journaldriver.EntryFilter, limit int) error {
	es, ok := store.(journaldriver.Entries)
	if !ok {
		return fmt.Errorf("the journal (%T) does not list its calls", store)
	}
	list, err := es.ListEntries(ctx, f, limit)
	if err != nil {
		return err
	}
	now := time.Now()
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tTHREAD\tTURN\tCALL\tSTATE\tOWNER\tLEASE\tUPDATED\tOUTCOME")
	for _, e := range list {
		state, lease, outcome := e.State.String(), "-", "-"
		if e.State == journaldriver.Started {
			lease = e.LeaseUntil.Format(time.RFC3339)
			if !now.Before(e.LeaseUntil) {
				state = "in_doubt"
			}
		}
		if r := e.Result; r != nil {
			outcome = r.Outcome.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Key.Backend, e.Key.Thread, e.Key.Turn, e.Key.Call, state, e.Owner, lease, e.Updated.Format(time.RFC3339), outcome)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d calls\n", len(list))
	return nil
}

// awaiting prints the calls that await a person's decision, of the runs
// paused for one (f's thread and backend, if set): they are in the
// journal's approvals, not yet among its calls.
func awaiting(ctx context.Context, w io.Writer, store journal.Store, f journaldriver.EntryFilter, limit int) error {
	runs, ok := store.(journaldriver.Runs)
	ap, ok2 := store.(journaldriver.Approvals)
	if !ok || !ok2 {
		return fmt.Errorf("the journal (%T) keeps no run records or no approvals", store)
	}
	paused, err := runs.ListRuns(ctx, f.Backend, journaldriver.RunAwaiting, 1<<20)
	if err != nil {
		return err
	}
	now := time.Now()
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tTHREAD\tTURN\tCALL\tSTATE\tTOOL\tEXPIRES\tREQUESTED\tWHY")
	n := 0
	for _, r := range paused {
		if f.Thread != "" && r.Thread != f.Thread {
			continue
		}
		list, err := ap.ListApprovals(ctx, r.Backend, r.Thread)
		if err != nil {
			return err
		}
		for _, a := range list {
			if !a.Pending(now) || n == limit {
				continue
			}
			n++
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Key.Backend, a.Key.Thread, a.Key.Turn, a.Key.Call, journaldriver.RunAwaiting,
				a.Tool, a.Expires.Format(time.RFC3339), a.Requested.Format(time.RFC3339), a.Why)
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "%d calls\n", n)
	return nil
}

// show prints a thread's run record, calls and approvals.
func show(ctx context.Context, w io.Writer, store journal.Store, backend, thread string) error {
	if runs, ok := store.(journaldriver.Runs); ok {
		list, err := runs.ListRuns(ctx, backend, "", 1<<20)
		if err != nil {
			return err
		}
		var mine []journaldriver.Run
		for _, r := range list {
			if r.Thread == thread {
				mine = append(mine, r)
			}
		}
		printRuns(w, mine)
	}
	if _, ok := store.(journaldriver.Entries); ok {
		if err := calls(ctx, w, store, journaldriver.EntryFilter{Backend: backend, Thread: thread}, 1<<20); err != nil {
			return err
		}
	}
	ap, ok := store.(journaldriver.Approvals)
	if !ok {
		return nil
	}
	list, err := ap.ListApprovals(ctx, backend, thread)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CALL\tTOOL\tWHY\tREQUESTED\tEXPIRES\tDECISION\tBY\tREASON")
	for _, a := range list {
		decision, by, reason := "pending", "", ""
		if d := a.Decision; d != nil {
			decision, by, reason = map[bool]string{true: "approved", false: "denied"}[d.Approved], d.Actor, d.Reason
		}
		expires := "-"
		if !a.Expires.IsZero() {
			expires = a.Expires.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Key.Call, a.Tool, a.Why, a.Requested.Format(time.RFC3339), expires, decision, by, reason)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d approvals\n", len(list))
	return nil
}
