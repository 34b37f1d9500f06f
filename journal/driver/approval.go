package driver

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"
)

// Approvals is implemented by journals that keep the calls awaiting a
// person's decision, so that a run paused for approval can be decided, and
// resumed, later. [Memory] implements it.
type Approvals interface {
	// RequestApproval records a for its key, pending, unless the key has
	// an approval already. It returns the approval as stored and whether
	// this call created it.
	RequestApproval(ctx context.Context, a Approval) (Approval, bool, error)
	// DecideApproval records d for the pending approval of key. It returns
	// an error matching ErrNoApproval when there is none, and ErrDecided
	// when it was decided before (the stored decision stays).
	DecideApproval(ctx context.Context, key Key, d Decision) (Approval, error)
	// GetApproval returns the approval of key, and whether there is one.
	GetApproval(ctx context.Context, key Key) (Approval, bool, error)
	// ListApprovals returns the approvals of a thread of backend, oldest
	// first.
	ListApprovals(ctx context.Context, backend, thread string) ([]Approval, error)
	// ExpiredApprovals returns at most limit approvals of backend, on any
	// thread, that are undecided and expired at t (Expires not zero and
	// not after t), those that expired first first.
	ExpiredApprovals(ctx context.Context, backend string, t time.Time, limit int) ([]Approval, error)
}

// ErrNoApproval is matched by errors about a call that awaits no approval.
var ErrNoApproval = errors.New("journal: no approval for that call")

// ErrDecided is matched by errors about an approval decided before.
var ErrDecided = errors.New("journal: the call was decided already")

// An Approval is a call that needs a person's decision before it runs.
type Approval struct {
	Key Key
	// Tool is the tool called, Arguments the call's arguments.
	Tool      string
	Arguments json.RawMessage
	// Why says why the call needs approval, as the tool's rule said.
	Why string
	// Requested is when the approval was asked for; Expires, if not zero,
	// when a call still undecided is answered as denied.
	Requested, Expires time.Time
	// Decision is nil while the approval is pending.
	Decision *Decision
}

// Pending reports whether the approval awaits a decision at t (it has none
// and has not expired).
func (a *Approval) Pending(t time.Time) bool {
	return a.Decision == nil && (a.Expires.IsZero() || t.Before(a.Expires))
}

// A Decision is what a person decided about a call.
type Decision struct {
	// Approved says whether the call may run.
	Approved bool
	// Reason is the person's reason (for a denial, the model is told it).
	Reason string
	// Arguments, if set, replace the call's arguments (an approval with
	// edits).
	Arguments json.RawMessage
	// Actor says who decided, for the audit trail.
	Actor string
	// At is when the decision was recorded.
	At time.Time
}

var _ Approvals = (*Memory)(nil)

// RequestApproval implements [Approvals].
func (j *Memory) RequestApproval(_ context.Context, a Approval) (Approval, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if old, ok := j.approvals[a.Key]; ok {
		return copyApproval(old), false, nil
	}
	if j.approvals == nil {
		j.approvals = map[Key]*Approval{}
	}
	a = copyApproval(&a)
	j.approvals[a.Key] = &a
	return copyApproval(&a), true, nil
}

// DecideApproval implements [Approvals].
func (j *Memory) DecideApproval(_ context.Context, key Key, d Decision) (Approval, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	a, ok := j.approvals[key]
	switch {
	case !ok:
		return Approval{}, ErrNoApproval
	case a.Decision != nil:
		return copyApproval(a), ErrDecided
	}
	if d.At.IsZero() {
		d.At = j.now()
	}
	d.Arguments = slices.Clone(d.Arguments)
	a.Decision = &d
	return copyApproval(a), nil
}

// GetApproval implements [Approvals].
func (j *Memory) GetApproval(_ context.Context, key Key) (Approval, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	a, ok := j.approvals[key]
	if !ok {
		return Approval{}, false, nil
	}
	return copyApproval(a), true, nil
}

// ListApprovals implements [Approvals].
func (j *Memory) ListApprovals(_ context.Context, backend, thread string) ([]Approval, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []Approval
	for k, a := range j.approvals {
		if k.Backend == backend && k.Thread == thread {
			out = append(out, copyApproval(a))
		}
	}
	slices.SortFunc(out, func(a, b Approval) int {
		if c := a.Requested.Compare(b.Requested); c != 0 {
			return c
		}
		return cmpKey(a.Key, b.Key)
	})
	return out, nil
}

// ExpiredApprovals implements [Approvals].
func (j *Memory) ExpiredApprovals(_ context.Context, backend string, t time.Time, limit int) ([]Approval, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []Approval
	for k, a := range j.approvals {
		if k.Backend == backend && a.Decision == nil && !a.Expires.IsZero() && !a.Expires.After(t) {
			out = append(out, copyApproval(a))
		}
	}
	slices.SortFunc(out, func(a, b Approval) int {
		if c := a.Expires.Compare(b.Expires); c != 0 {
			return c
		}
		return cmpKey(a.Key, b.Key)
	})
	if len(out) > limit {
		out = out[:max(limit, 0)]
	}
	return out, nil
}

func cmpKey(a, b Key) int {
	for _, p := range [][2]string{{a.Backend, b.Backend}, {a.Thread, b.Thread}, {a.Turn, b.Turn}, {a.Call, b.Call}} {
		if p[0] != p[1] {
			if p[0] < p[1] {
				return -1
			}
			return 1
		}
	}
	return 0
}

func copyApproval(a *Approval) Approval {
	c := *a
	c.Arguments = slices.Clone(a.Arguments)
	if a.Decision != nil {
		d := *a.Decision
		d.Arguments = slices.Clone(d.Arguments)
		c.Decision = &d
	}
	return c
}
