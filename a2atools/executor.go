package a2atools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/toolrelay/toolrelay/core"
)

// executor runs the tasks of a server on its runner: a2a-go's
// AgentExecutor.
type executor struct {
	s *server
}

var _ a2asrv.AgentExecutor = (*executor)(nil)

// Execute implements a2asrv.AgentExecutor: it runs the turn of a new
// task, or, for a message on a task awaiting input, records its
// decisions and resumes the turn.
func (e *executor) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	s := e.s
	who := identity(ctx)
	var text string
	thread := ""
	resume := rc.StoredTask != nil
	if !resume {
		var err error
		if text, err = input(rc.Message, s.opts.MaxInputBytes); err != nil {
			return err
		}
		task := a2a.NewSubmittedTask(rc, rc.Message)
		if thread, err = s.reg.start(who, task); err != nil {
			return err
		}
		if err := q.Write(ctx, task); err != nil {
			return err
		}
	} else {
		thread = s.reg.thread(rc.TaskID)
		if rc.StoredTask.Status.State != a2a.TaskStateInputRequired || thread == "" {
			return fmt.Errorf("task %q is %s, not awaiting input: %w", rc.TaskID, rc.StoredTask.Status.State, a2a.ErrInvalidParams)
		}
		pending, err := s.pending(ctx, thread)
		if err != nil {
			return e.fail(ctx, rc, q, err)
		}
		decisions, why := decisions(rc.Message, pending)
		if decisions == nil {
			// Not understood: the task stays awaiting input, told how
			// to answer.
			return q.Write(ctx, awaiting(rc, pending, why))
		}
		for _, d := range decisions {
			d.Decision.Actor = who
			if err := s.r.Decide(ctx, thread, d.callID, d.Decision); err != nil {
				return e.fail(ctx, rc, q, err)
			}
		}
	}
	var ro core.RunOptions
	if s.opts.RunOptions != nil {
		if o := s.opts.RunOptions(ctx); o != nil {
			ro = *o
		}
	}
	ro.Thread, ro.NoWait = thread, true
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	run := s.reg.begin(rc.TaskID, stop)
	if run == nil {
		return errNoTask(rc.TaskID)
	}
	var st *core.Stream
	if resume {
		st = s.r.ResumeStream(runCtx, thread, &ro)
	} else {
		st = s.r.Stream(runCtx, text, &ro)
	}
	// The working status comes before any artifact: a2a-go (v0.3.3)
	// appends an artifact to the task event last written, which a stream
	// may be encoding (a data race); a status update replaces it by a
	// copy.
	if err := q.Write(ctx, a2a.NewStatusUpdateEvent(rc, a2a.TaskStateWorking, nil)); err != nil {
		stop()
		s.reg.end(rc.TaskID, run)
		return err
	}
	out := &artifacts{rc: rc, q: q, ids: map[string]a2a.ArtifactID{}}
	named := thread != ""
	if t := st.Thread(); t != "" && !named {
		s.reg.setThread(rc.TaskID, t)
		named = true
	}
	var werr error
	for ev := range st.Events() {
		if len(ev.Path) > 0 {
			// An event of the run of an agent tool's child
			// (core.Event.Path), its thread the child's: the child's
			// answer is the output of the run's call, and its approvals
			// are the run's own (under the run's ids for them).
			continue
		}
		if !named && ev.Thread != "" {
			s.reg.setThread(rc.TaskID, ev.Thread)
			named = true
		}
		if werr = out.event(ctx, ev); werr != nil {
			break
		}
	}
	res, err := st.Result()
	if res != nil && res.Thread != "" && !named {
		s.reg.setThread(rc.TaskID, res.Thread)
	}
	if canceled := s.reg.end(rc.TaskID, run); canceled {
		// Cancel writes the task's end: wait for it, so that the
		// execution does not end without it.
		select {
		case <-run.ended:
		case <-ctx.Done():
			return nil
		}
		if !run.wrote {
			ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCanceled, nil)
			ev.Final = true
			return q.Write(ctx, ev)
		}
		return nil
	}
	if werr != nil {
		return werr
	}
	switch {
	case errors.Is(err, core.ErrAwaitingApproval):
		pending := res.Pending
		if len(pending) == 0 {
			pending, _ = s.pending(ctx, s.reg.thread(rc.TaskID))
		}
		return q.Write(ctx, awaiting(rc, pending, ""))
	case err != nil:
		return e.fail(ctx, rc, q, err)
	}
	ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCompleted, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// fail ends the task failed, its status message the client's text for
// err, err going to the logger.
func (e *executor) fail(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue, err error) error {
	e.s.opts.Logger.WarnContext(ctx, "a2atools: task failed", "task", rc.TaskID, "error", err)
	ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateFailed, a2a.NewMessageForTask(a2a.MessageRoleAgent, rc, a2a.TextPart{Text: e.s.opts.ErrorText(err)}))
	ev.Final = true
	return q.Write(ctx, ev)
}

// Cancel implements a2asrv.AgentExecutor: it stops the task's run if one
// goes on, abandons the turn (Runner.Cancel) and ends the task canceled.
func (e *executor) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	s := e.s
	run := s.reg.stop(rc.TaskID)
	if run != nil {
		defer close(run.ended)
		select {
		case <-run.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if thread := s.reg.thread(rc.TaskID); thread != "" {
		if err := s.r.Cancel(ctx, thread); err != nil {
			// The run is stopped; its turn, not abandoned, is left to
			// a resume or to expire.
			s.opts.Logger.WarnContext(ctx, "a2atools: the canceled task's turn could not be abandoned", "task", rc.TaskID, "error", err)
		}
	}
	ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCanceled, nil)
	ev.Final = true
	if err := q.Write(ctx, ev); err != nil {
		return err
	}
	if run != nil {
		run.wrote = true
	}
	return nil
}

// pending returns the approvals of thread awaiting a decision.
func (s *server) pending(ctx context.Context, thread string) ([]core.Approval, error) {
	all, err := s.r.Approvals(ctx, thread)
	if err != nil {
		return nil, err
	}
	var out []core.Approval
	now := time.Now()
	for _, a := range all {
		if a.Pending(now) {
			out = append(out, a)
		}
	}
	return out, nil
}

// approvalData is an approval as the input-required status tells it.
type approvalData struct {
	CallID    string          `json:"callId"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Why       string          `json:"why,omitempty"`
}

// awaiting returns the final status of a task awaiting decisions about
// pending, its message saying what to decide and how (hint, if set,
// says why the last answer was not understood).
func awaiting(rc *a2asrv.RequestContext, pending []core.Approval, hint string) *a2a.TaskStatusUpdateEvent {
	var b strings.Builder
	if hint != "" {
		b.WriteString(hint + " ")
	}
	b.WriteString("Approval needed before the agent goes on:")
	data := make([]any, 0, len(pending))
	for _, a := range pending {
		fmt.Fprintf(&b, "\n- %s %s", a.Tool, string(a.Arguments))
		if a.Why != "" {
			fmt.Fprintf(&b, " (%s)", a.Why)
		}
		d := approvalData{CallID: a.Key.Call, Name: a.Tool, Why: a.Why}
		if json.Valid(a.Arguments) {
			d.Arguments = a.Arguments
		}
		m := map[string]any{"callId": d.CallID, "name": d.Name}
		if d.Arguments != nil {
			m["arguments"] = d.Arguments
		}
		if d.Why != "" {
			m["why"] = d.Why
		}
		data = append(data, m)
	}
	b.WriteString("\nAnswer \"approve\" or \"deny\" (or a data part {\"approve\": true|false, \"reason\": \"…\"}, or {\"decisions\": [{\"callId\": \"…\", \"approve\": true|false}]}).")
	msg := a2a.NewMessageForTask(a2a.MessageRoleAgent, rc, a2a.TextPart{Text: b.String()}, a2a.DataPart{Data: map[string]any{"approvals": data}})
	ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateInputRequired, msg)
	ev.Final = true
	return ev
}

// decision is a decision about one call.
type decision struct {
	callID string
	core.Decision
}

// decisions reads the decisions of message m about the calls pending:
// nil, with the reason, if it says none that can be applied.
func decisions(m *a2a.Message, pending []core.Approval) ([]decision, string) {
	all := func(approve bool, reason string) []decision {
		out := make([]decision, len(pending))
		for i, a := range pending {
			out[i] = decision{callID: a.Key.Call, Decision: core.Decision{Approved: approve, Reason: reason}}
		}
		return out
	}
	for _, p := range m.Parts {
		switch p := p.(type) {
		case a2a.DataPart:
			if v, ok := p.Data["approve"].(bool); ok {
				reason, _ := p.Data["reason"].(string)
				return all(v, reason), ""
			}
			if list, ok := p.Data["decisions"].([]any); ok {
				known := map[string]bool{}
				for _, a := range pending {
					known[a.Key.Call] = true
				}
				var out []decision
				for _, item := range list {
					d, _ := item.(map[string]any)
					id, _ := d["callId"].(string)
					v, ok := d["approve"].(bool)
					if !known[id] || !ok {
						return nil, fmt.Sprintf("The answer's decision about call %q was not understood (no such call awaits one, or no approve).", id)
					}
					reason, _ := d["reason"].(string)
					out = append(out, decision{callID: id, Decision: core.Decision{Approved: v, Reason: reason}})
				}
				if len(out) > 0 {
					return out, ""
				}
			}
		case a2a.TextPart:
			switch strings.ToLower(strings.Trim(strings.TrimSpace(p.Text), ".!")) {
			case "approve", "approved", "yes", "y", "ok":
				return all(true, ""), ""
			case "deny", "denied", "no", "n", "reject":
				return all(false, ""), ""
			}
		}
	}
	return nil, "The answer was not understood."
}

// artifacts turns a run's text into artifact updates: one artifact per
// message of the model, its pieces appended as they come, then replaced
// by the whole text.
type artifacts struct {
	rc  *a2asrv.RequestContext
	q   eventqueue.Queue
	ids map[string]a2a.ArtifactID // by the message's item
}

func (a *artifacts) event(ctx context.Context, ev core.Event) error {
	if ev.Commentary {
		return nil
	}
	switch ev.Kind {
	case core.EventTextDelta:
		if ev.Text == "" {
			return nil
		}
		id, ok := a.ids[ev.Item]
		var up *a2a.TaskArtifactUpdateEvent
		if ok {
			up = a2a.NewArtifactUpdateEvent(a.rc, id, a2a.TextPart{Text: ev.Text})
		} else {
			up = a2a.NewArtifactEvent(a.rc, a2a.TextPart{Text: ev.Text})
			a.ids[ev.Item] = up.Artifact.ID
		}
		return a.q.Write(ctx, up)
	case core.EventTextDone:
		id, ok := a.ids[ev.Item]
		var up *a2a.TaskArtifactUpdateEvent
		if ok {
			up = a2a.NewArtifactUpdateEvent(a.rc, id, a2a.TextPart{Text: ev.Text})
			up.Append = false
		} else {
			up = a2a.NewArtifactEvent(a.rc, a2a.TextPart{Text: ev.Text})
		}
		up.LastChunk = true
		delete(a.ids, ev.Item)
		return a.q.Write(ctx, up)
	}
	return nil
}
