package journaltest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core/driver"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// cases are the rules of the contract, each a subtest of [Run].
var cases = []testCase{
	{
		name:        "ClaimNew",
		explanation: "Claim of an unknown key creates it Started, owned by the claimer with a lease of the given length, with the digest and idempotency key given; Get returns the same entry.",
		f: func(t *testing.T, j journaldriver.Journal) {
			k := key("a")
			before := time.Now()
			e, created := claim(t, j, k, "owner-a", live)
			after := time.Now()
			if !created {
				t.Fatalf("Claim of a new key: created = false, want true")
			}
			want := journaldriver.Entry{Key: k, Digest: digest(k), IdempotencyKey: idem(k), State: journaldriver.Started, Owner: "owner-a"}
			checkEntry(t, "Claim", want, e)
			within(t, "Claim: LeaseUntil", e.LeaseUntil, before.Add(live), after.Add(live))
			within(t, "Claim: Created", e.Created, before, after)
			if !e.Updated.Equal(e.Created) {
				t.Errorf("Claim: Updated = %v, want Created (%v)", e.Updated, e.Created)
			}
			got := mustGet(t, j, k)
			if diff := cmp.Diff(e, got, equateTimes); diff != "" {
				t.Errorf("Get after Claim (-claim +get):\n%s", diff)
			}
		},
	},
	{
		name:        "ClaimExisting",
		explanation: "Claim of a key that has an entry creates nothing and returns the entry as stored, whatever digest, idempotency key, owner and lease it is given.",
		f: func(t *testing.T, j journaldriver.Journal) {
			k := key("a")
			first, _ := claim(t, j, k, "owner-a", live)
			e, created, err := j.Claim(t.Context(), k, "other-digest", "other-idem", "owner-b", expired)
			if err != nil {
				t.Fatalf("second Claim: %v", err)
			}
			if created {
				t.Errorf("second Claim: created = true, want false")
			}
			if diff := cmp.Diff(first, e, equateTimes); diff != "" {
				t.Errorf("second Claim returned (-first claim +second claim):\n%s", diff)
			}
			if diff := cmp.Diff(first, mustGet(t, j, k), equateTimes); diff != "" {
				t.Errorf("entry after second Claim (-first claim +get):\n%s", diff)
			}
		},
	},
	{
		name:        "ClaimFinished",
		explanation: "Claim of a finished key returns the entry with its state and result, so the result is re-sent and not recomputed.",
		f: func(t *testing.T, j journaldriver.Journal) {
			k := key("a")
			claim(t, j, k, "owner-a", live)
			r := textResult("21 °C")
			finish(t, j, k, "owner-a", r)
			e, created, err := j.Claim(t.Context(), k, digest(k), idem(k), "owner-b", live)
			if err != nil {
				t.Fatalf("Claim of a finished key: %v", err)
			}
			if created {
				t.Errorf("Claim of a finished key: created = true, want false")
			}
			want := journaldriver.Entry{Key: k, Digest: digest(k), IdempotencyKey: idem(k), State: journaldriver.Succeeded, Owner: "owner-a", Result: &r}
			checkEntry(t, "Claim of a finished key", want, e)
		},
	},
	{
		name:        "GetMissing",
		explanation: "Get of a key that has no entry reports none, without an error.",
		f: func(t *testing.T, j journaldriver.Journal) {
			claim(t, j, key("a"), "owner-a", live)
			if e, ok, err := j.Get(t.Context(), key("b")); err != nil || ok {
				t.Errorf("Get of an unknown key = %+v, %v, %v; want no entry and no error", e, ok, err)
			}
		},
	},
	{
		name:        "DistinctKeys",
		explanation: "Keys that differ in any one field (backend, thread, turn, call) are different entries, even when their fields run together to the same text; an empty turn is a turn like any other; fields may hold any Unicode text but NUL.",
		f: func(t *testing.T, j journaldriver.Journal) {
			keys := []journaldriver.Key{
				{Backend: "b", Thread: "t", Turn: "u", Call: "c"},
				{Backend: "b2", Thread: "t", Turn: "u", Call: "c"},
				{Backend: "b", Thread: "t2", Turn: "u", Call: "c"},
				{Backend: "b", Thread: "t", Turn: "u2", Call: "c"},
				{Backend: "b", Thread: "t", Turn: "u", Call: "c2"},
				{Backend: "b", Thread: "t", Turn: "", Call: "c"},
				{Backend: "b", Thread: "t", Turn: "uc", Call: ""},
				{Backend: "b", Thread: "tu", Turn: "", Call: "c"},
				{Backend: "b|t", Thread: "u", Turn: "c", Call: "x"},
				{Backend: "b", Thread: "t|u", Turn: "c", Call: "x"},
				{Backend: "b", Thread: "t", Turn: "u", Call: "C"},
				{Backend: "fake-openai", Thread: "sess_日本語", Turn: "turn 'quoted' \"and\" %_", Call: "call_🙂"},
			}
			for i, k := range keys {
				e, created := claim(t, j, k, fmt.Sprintf("owner-%d", i), live)
				if !created {
					t.Errorf("Claim(%q): created = false, want true (it collides with %+v)", k, e.Key)
				}
			}
			for i, k := range keys {
				e := mustGet(t, j, k)
				if e.Key != k || e.Owner != fmt.Sprintf("owner-%d", i) || e.Digest != digest(k) {
					t.Errorf("Get(%q) = key %q, owner %q, digest %q; want the entry claimed for it (owner-%d)", k, e.Key, e.Owner, e.Digest, i)
				}
			}
		},
	},
	{
		name:        "FinishSucceeded",
		explanation: "Finish by the owner of a Started entry moves it to Succeeded with the result, and sets Updated to the time of the change (Created stays).",
		f: func(t *testing.T, j journaldriver.Journal) {
			k := key("a")
			c, _ := claim(t, j, k, "owner-a", live)
			r := textResult(`{"temperature":21,"unit":"C"}`)
			before := time.Now()
			finish(t, j, k, "owner-a", r)
			after := time.Now()
			e := mustGet(t, j, k)
			want := journaldriver.Entry{Key: k, Digest: digest(k), IdempotencyKey: idem(k), State: journaldriver.Succeeded, Owner: "owner-a", Result: &r}
			checkEntry(t, "after Finish", want, e)
			if !e.Created.Equal(c.Created) {
				t.Errorf("after Finish: Created = %v, want %v (unchanged)", e.Created, c.Created)
			}
			within(t, "after Finish: Updated", e.Updated, before, after)
			if e.Updated.Before(e.Created) {
				t.Errorf("after Finish: Updated %v is before Created %v", e.Updated, e.Created)
			}
		},
	},
	{
		name:        "FinishFailed",
		explanation: "Finish with a failed result moves the entry to Failed, keeping the model-visible message and the outcome.",
		f: func(t *testing.T, j journaldriver.Journal) {
			for _, o := range []driver.Outcome{driver.ToolError, driver.Panicked, driver.TimedOut, driver.InDoubt, driver.InvalidArguments, driver.UnknownTool, driver.TooLarge} {
				k := key(o.String())
				claim(t, j, k, "owner-a", live)
				r := journaldriver.Result{Failed: true, Error: "the " + o.String() + " failure, as the model reads it", Outcome: o}
				finish(t, j, k, "owner-a", r)
				want := journaldriver.Entry{Key: k, Digest: digest(k), IdempotencyKey: idem(k), State: journaldriver.Failed, Owner: "owner-a", Result: &r}
				checkEntry(t, "after Finish with a failed result", want, mustGet(t, j, k))
			}
		},
	},
	{
		name:        "ResultRoundTrip",
		explanation: "A result reads back exactly as it was written: text of any Unicode (quotes, newlines, NUL, emoji), content arrays with every kind of part, an empty content array apart from none, null, and large outputs.",
		f: func(t *testing.T, j journaldriver.Journal) {
			results := map[string]journaldriver.Result{
				"empty":   {},
				"text":    textResult("line 1\nline \"2\"\t\\ \x00 ü 日本 🙂 </script> & <b>"),
				"json":    textResult(`{"a":[1,2.5,"x"],"b":null,"c":{"d":true}}`),
				"null":    {Output: driver.Output{Null: true}},
				"parts":   {Output: driver.Output{Parts: []driver.Part{driver.TextPart("see the chart"), driver.ImagePart("data:image/png;base64,iVBORw0KGgo="), driver.FilePart("file-123"), {Type: driver.PartFile, URL: "https://example.com/a.pdf", Filename: "a.pdf", Data: "JVBERi0="}}}},
				"noparts": {Output: driver.Output{Parts: []driver.Part{}}},
				"large":   textResult(strings.Repeat("0123456789abcdef", 1<<16)),
				"failed":  {Failed: true, Error: "city \"Atlantis\" not found", Outcome: driver.ToolError},
			}
			for name, r := range results {
				k := key(name)
				claim(t, j, k, "owner-a", live)
				finish(t, j, k, "owner-a", r)
				e := mustGet(t, j, k)
				if e.Result == nil {
					t.Errorf("%s: Result = nil after Finish", name)
					continue
				}
				if diff := cmp.Diff(r, *e.Result); diff != "" {
					t.Errorf("%s: result read back (-written +read):\n%s", name, diff)
				}
			}
		},
	},
	{
		name:        "FinishNotOwned",
		explanation: "Finish fails with an error matching core.ErrLeaseLost, and changes nothing, when the entry is another owner's, does not exist, or is finished already (even for its owner).",
		f: func(t *testing.T, j journaldriver.Journal) {
			ctx := t.Context()
			k := key("a")
			c, _ := claim(t, j, k, "owner-a", live)
			if err := j.Finish(ctx, k, "owner-b", textResult("b's")); !errors.Is(err, journaldriver.ErrLeaseLost) {
				t.Errorf("Finish by another owner: error %v, want ErrLeaseLost", err)
			}
			checkEntry(t, "after Finish by another owner", c, mustGet(t, j, k))
			if err := j.Finish(ctx, key("missing"), "owner-a", textResult("x")); !errors.Is(err, journaldriver.ErrLeaseLost) {
				t.Errorf("Finish of a missing key: error %v, want ErrLeaseLost", err)
			}
			if _, ok := get(t, j, key("missing")); ok {
				t.Errorf("Finish of a missing key created an entry")
			}
			r := textResult("first")
			finish(t, j, k, "owner-a", r)
			if err := j.Finish(ctx, k, "owner-a", textResult("second")); !errors.Is(err, journaldriver.ErrLeaseLost) {
				t.Errorf("second Finish by the owner: error %v, want ErrLeaseLost", err)
			}
			if e := mustGet(t, j, k); e.Result == nil || e.Result.Output.Text != "first" {
				t.Errorf("after a second Finish: result %+v, want the first", e.Result)
			}
		},
	},
	{
		name:        "FinishAfterExpiry",
		explanation: "An owner whose lease has expired may still finish, as long as nobody took the call over.",
		f: func(t *testing.T, j journaldriver.Journal) {
			k := key("a")
			claim(t, j, k, "owner-a", expired)
			finish(t, j, k, "owner-a", textResult("late"))
			if e := mustGet(t, j, k); e.State != journaldriver.Succeeded {
				t.Errorf("after a late Finish: state %v, want succeeded", e.State)
			}
		},
	},
	{
		name:        "Renew",
		explanation: "Renew by the owner sets the lease to end the given time from now, without changing anything else: an expired claim, renewed, cannot be taken over.",
		f: func(t *testing.T, j journaldriver.Journal) {
			ctx := t.Context()
			k := key("a")
			c, _ := claim(t, j, k, "owner-a", expired)
			before := time.Now()
			if err := j.Renew(ctx, k, "owner-a", live); err != nil {
				t.Fatalf("Renew: %v", err)
			}
			after := time.Now()
			e := mustGet(t, j, k)
			within(t, "after Renew: LeaseUntil", e.LeaseUntil, before.Add(live), after.Add(live))
			checkEntry(t, "after Renew", c, e)
			if took, err := j.TakeOver(ctx, k, "owner-b", live); err != nil || took {
				t.Errorf("TakeOver of a renewed claim = %v, %v; want false, nil", took, err)
			}
			// A renewal can also shorten the lease.
			if err := j.Renew(ctx, k, "owner-a", expired); err != nil {
				t.Fatalf("Renew with an expired lease: %v", err)
			}
			if took, err := j.TakeOver(ctx, k, "owner-b", live); err != nil || !took {
				t.Errorf("TakeOver after the lease was renewed to the past = %v, %v; want true, nil", took, err)
			}
		},
	},
	{
		name:        "RenewNotOwned",
		explanation: "Renew fails with an error matching core.ErrLeaseLost, and changes nothing, when the entry is another owner's, does not exist, or is finished.",
		f: func(t *testing.T, j journaldriver.Journal) {
			ctx := t.Context()
			k := key("a")
			c, _ := claim(t, j, k, "owner-a", expired)
			if err := j.Renew(ctx, k, "owner-b", live); !errors.Is(err, journaldriver.ErrLeaseLost) {
				t.Errorf("Renew by another owner: error %v, want ErrLeaseLost", err)
			}
			e := mustGet(t, j, k)
			checkEntry(t, "after Renew by another owner", c, e)
			if !e.LeaseUntil.Equal(c.LeaseUntil) {
				t.Errorf("Renew by another owner moved the lease from %v to %v", c.LeaseUntil, e.LeaseUntil)
			}
			if err := j.Renew(ctx, key("missing"), "owner-a", live); !errors.Is(err, journaldriver.ErrLeaseLost) {
				t.Errorf("Renew of a missing key: error %v, want ErrLeaseLost", err)
			}
			if _, ok := get(t, j, key("missing")); ok {
				t.Errorf("Renew of a missing key created an entry")
			}
			finish(t, j, k, "owner-a", textResult("done"))
			if err := j.Renew(ctx, k, "owner-a", live); !errors.Is(err, journaldriver.ErrLeaseLost) {
				t.Errorf("Renew of a finished entry: error %v, want ErrLeaseLost", err)
			}
			if e := mustGet(t, j, k); e.State != journaldriver.Succeeded {
				t.Errorf("after Renew of a finished entry: state %v, want succeeded", e.State)
			}
		},
	},
	{
		// Guards against a takeover with slack (a comparison off by some
		// interval): a lease of seconds, as workers use, is not taken
		// before it ends.
		name:        "TakeOverShortLease",
		explanation: "TakeOver of a Started entry whose lease of a few seconds has not ended reports false.",
		f: func(t *testing.T, j journaldriver.Journal) {
			k := key("a")
			claim(t, j, k, "owner-a", 10*time.Second)
			if took, err := j.TakeOver(t.Context(), k, "owner-b", live); err != nil || took {
				t.Errorf("TakeOver of a claim with 10s of lease left = %v, %v; want false, nil", took, err)
			}
			if e := mustGet(t, j, k); e.Owner != "owner-a" {
				t.Errorf("after TakeOver of a live claim: owner %q, want owner-a", e.Owner)
			}
		},
	},
	{
		name:        "TakeOverLive",
		explanation: "TakeOver of a Started entry whose lease has not ended reports false and changes nothing.",
		f: func(t *testing.T, j journaldriver.Journal) {
			k := key("a")
			c, _ := claim(t, j, k, "owner-a", live)
			if took, err := j.TakeOver(t.Context(), k, "owner-b", live); err != nil || took {
				t.Errorf("TakeOver of a live claim = %v, %v; want false, nil", took, err)
			}
			e := mustGet(t, j, k)
			checkEntry(t, "after TakeOver of a live claim", c, e)
			if !e.LeaseUntil.Equal(c.LeaseUntil) || !e.Updated.Equal(c.Updated) {
				t.Errorf("TakeOver of a live claim changed LeaseUntil %v→%v or Updated %v→%v", c.LeaseUntil, e.LeaseUntil, c.Updated, e.Updated)
			}
		},
	},
	{
		name:        "TakeOverExpired",
		explanation: "TakeOver of a Started entry whose lease has ended gives it to the new owner with a new lease (Updated moves; digest and idempotency key stay); the old owner can no longer finish, renew or release it, the new one can finish it.",
		f: func(t *testing.T, j journaldriver.Journal) {
			ctx := t.Context()
			k := key("a")
			c, _ := claim(t, j, k, "owner-a", expired)
			before := time.Now()
			took, err := j.TakeOver(ctx, k, "owner-b", live)
			after := time.Now()
			if err != nil || !took {
				t.Fatalf("TakeOver of an expired claim = %v, %v; want true, nil", took, err)
			}
			e := mustGet(t, j, k)
			want := c
			want.Owner = "owner-b"
			checkEntry(t, "after TakeOver", want, e)
			within(t, "after TakeOver: LeaseUntil", e.LeaseUntil, before.Add(live), after.Add(live))
			within(t, "after TakeOver: Updated", e.Updated, before, after)
			if !e.Created.Equal(c.Created) {
				t.Errorf("after TakeOver: Created = %v, want %v (unchanged)", e.Created, c.Created)
			}
			if err := j.Finish(ctx, k, "owner-a", textResult("a's")); !errors.Is(err, journaldriver.ErrLeaseLost) {
				t.Errorf("Finish by the previous owner: error %v, want ErrLeaseLost", err)
			}
			if err := j.Renew(ctx, k, "owner-a", live); !errors.Is(err, journaldriver.ErrLeaseLost) {
				t.Errorf("Renew by the previous owner: error %v, want ErrLeaseLost", err)
			}
			if err := j.Release(ctx, k, "owner-a"); !errors.Is(err, journaldriver.ErrLeaseLost) {
				t.Errorf("Release by the previous owner: error %v, want ErrLeaseLost", err)
			}
			r := textResult("b's")
			finish(t, j, k, "owner-b", r)
			want.State, want.Result = journaldriver.Succeeded, &r
			checkEntry(t, "after Finish by the new owner", want, mustGet(t, j, k))
		},
	},
	{
		name:        "TakeOverOnce",
		explanation: "Of two takeovers of the same expired entry, the first wins and the second finds the new lease live (false), whoever asks.",
		f: func(t *testing.T, j journaldriver.Journal) {
			ctx := t.Context()
			k := key("a")
			claim(t, j, k, "owner-a", expired)
			if took, err := j.TakeOver(ctx, k, "owner-b", live); err != nil || !took {
				t.Fatalf("first TakeOver = %v, %v; want true, nil", took, err)
			}
			for _, owner := range []string{"owner-c", "owner-b", "owner-a"} {
				if took, err := j.TakeOver(ctx, k, owner, live); err != nil || took {
					t.Errorf("TakeOver by %s after owner-b took over = %v, %v; want false, nil", owner, took, err)
				}
			}
			if e := mustGet(t, j, k); e.Owner != "owner-b" {
				t.Errorf("owner = %q, want owner-b", e.Owner)
			}
		},
	},
	{
		name:        "TakeOverNotStarted",
		explanation: "TakeOver of a key that has no entry, or whose entry is finished or submitted, reports false and changes nothing (it never creates an entry).",
		f: func(t *testing.T, j journaldriver.Journal) {
			ctx := t.Context()
			if took, err := j.TakeOver(ctx, key("missing"), "owner-b", live); err != nil || took {
				t.Errorf("TakeOver of a missing key = %v, %v; want false, nil", took, err)
			}
			if _, ok := get(t, j, key("missing")); ok {
				t.Errorf("TakeOver of a missing key created an entry")
			}
			done, sub := key("done"), key("submitted")
			for _, k := range []journaldriver.Key{done, sub} {
				claim(t, j, k, "owner-a", expired)
				finish(t, j, k, "owner-a", textResult("r"))
			}
			markSubmitted(t, j, sub)
			for _, k := range []journaldriver.Key{done, sub} {
				before := mustGet(t, j, k)
				if took, err := j.TakeOver(ctx, k, "owner-b", live); err != nil || took {
					t.Errorf("TakeOver of %s entry = %v, %v; want false, nil", before.State, took, err)
				}
				checkEntry(t, "after TakeOver of a "+before.State.String()+" entry", before, mustGet(t, j, k))
			}
		},
	},
	{
		name:        "Release",
		explanation: "Release by the owner deletes a Started entry, so the call can be claimed again (by anyone, with new arguments).",
		f: func(t *testing.T, j journaldriver.Journal) {
			k := key("a")
			claim(t, j, k, "owner-a", live)
			if err := j.Release(t.Context(), k, "owner-a"); err != nil {
				t.Fatalf("Release: %v", err)
			}
			if e, ok := get(t, j, k); ok {
				t.Fatalf("after Release: Get found %+v, want no entry", e)
			}
			e, created, err := j.Claim(t.Context(), k, "new-digest", "new-idem", "owner-b", live)
			if err != nil || !created {
				t.Fatalf("Claim after Release = %v, %v; want created", created, err)
			}
			if e.Owner != "owner-b" || e.Digest != "new-digest" || e.IdempotencyKey != "new-idem" {
				t.Errorf("Claim after Release = %+v, want owner-b's new entry", e)
			}
		},
	},
	{
		name:        "ReleaseNotOwned",
		explanation: "Release fails with an error matching core.ErrLeaseLost, and deletes nothing, when the entry is another owner's, does not exist, or is finished.",
		f: func(t *testing.T, j journaldriver.Journal) {
			ctx := t.Context()
			k := key("a")
			claim(t, j, k, "owner-a", live)
			if err := j.Release(ctx, k, "owner-b"); !errors.Is(err, journaldriver.ErrLeaseLost) {
				t.Errorf("Release by another owner: error %v, want ErrLeaseLost", err)
			}
			if _, ok := get(t, j, k); !ok {
				t.Errorf("Release by another owner deleted the entry")
			}
			if err := j.Release(ctx, key("missing"), "owner-a"); !errors.Is(err, journaldriver.ErrLeaseLost) {
				t.Errorf("Release of a missing key: error %v, want ErrLeaseLost", err)
			}
			finish(t, j, k, "owner-a", textResult("kept"))
			if err := j.Release(ctx, k, "owner-a"); !errors.Is(err, journaldriver.ErrLeaseLost) {
				t.Errorf("Release of a finished entry: error %v, want ErrLeaseLost", err)
			}
			if e, ok := get(t, j, k); !ok || e.State != journaldriver.Succeeded {
				t.Errorf("after Release of a finished entry: %+v, %v; want it kept, succeeded", e, ok)
			}
		},
	},
	{
		name:        "MarkSubmitted",
		explanation: "MarkSubmitted moves finished entries (Succeeded or Failed) to Submitted, keeping their result and setting Updated; it leaves Started entries alone and ignores keys without an entry.",
		f: func(t *testing.T, j journaldriver.Journal) {
			ok, bad, started, missing := key("ok"), key("failed"), key("started"), key("missing")
			rOK, rBad := textResult("fine"), journaldriver.Result{Failed: true, Error: "no", Outcome: driver.ToolError}
			claim(t, j, ok, "owner-a", live)
			finish(t, j, ok, "owner-a", rOK)
			claim(t, j, bad, "owner-a", live)
			finish(t, j, bad, "owner-a", rBad)
			cs, _ := claim(t, j, started, "owner-a", live)
			before := time.Now()
			markSubmitted(t, j, ok, bad, started, missing)
			after := time.Now()
			for k, r := range map[journaldriver.Key]journaldriver.Result{ok: rOK, bad: rBad} {
				e := mustGet(t, j, k)
				want := journaldriver.Entry{Key: k, Digest: digest(k), IdempotencyKey: idem(k), State: journaldriver.Submitted, Owner: "owner-a", Result: &r}
				checkEntry(t, "after MarkSubmitted", want, e)
				within(t, "after MarkSubmitted: Updated", e.Updated, before, after)
			}
			checkEntry(t, "Started entry after MarkSubmitted", cs, mustGet(t, j, started))
			if _, found := get(t, j, missing); found {
				t.Errorf("MarkSubmitted of a missing key created an entry")
			}
		},
	},
	{
		name:        "MarkSubmittedRepeat",
		explanation: "MarkSubmitted accepts an empty or nil list and a key listed twice, and marking a submitted entry again keeps it submitted with its result.",
		f: func(t *testing.T, j journaldriver.Journal) {
			ctx := t.Context()
			if err := j.MarkSubmitted(ctx, nil); err != nil {
				t.Errorf("MarkSubmitted(nil): %v", err)
			}
			if err := j.MarkSubmitted(ctx, []journaldriver.Key{}); err != nil {
				t.Errorf("MarkSubmitted(empty): %v", err)
			}
			k := key("a")
			claim(t, j, k, "owner-a", live)
			r := textResult("r")
			finish(t, j, k, "owner-a", r)
			markSubmitted(t, j, k, k)
			markSubmitted(t, j, k)
			want := journaldriver.Entry{Key: k, Digest: digest(k), IdempotencyKey: idem(k), State: journaldriver.Submitted, Owner: "owner-a", Result: &r}
			checkEntry(t, "after MarkSubmitted twice", want, mustGet(t, j, k))
		},
	},
	{
		name:        "SubmittedIsFinal",
		explanation: "A submitted entry cannot be finished, renewed or released (ErrLeaseLost), nor taken over or claimed anew: it stays as it is.",
		f: func(t *testing.T, j journaldriver.Journal) {
			ctx := t.Context()
			k := key("a")
			claim(t, j, k, "owner-a", expired)
			finish(t, j, k, "owner-a", textResult("r"))
			markSubmitted(t, j, k)
			s := mustGet(t, j, k)
			for name, err := range map[string]error{
				"Finish":  j.Finish(ctx, k, "owner-a", textResult("again")),
				"Renew":   j.Renew(ctx, k, "owner-a", live),
				"Release": j.Release(ctx, k, "owner-a"),
			} {
				if !errors.Is(err, journaldriver.ErrLeaseLost) {
					t.Errorf("%s of a submitted entry: error %v, want ErrLeaseLost", name, err)
				}
			}
			if took, err := j.TakeOver(ctx, k, "owner-b", live); err != nil || took {
				t.Errorf("TakeOver of a submitted entry = %v, %v; want false, nil", took, err)
			}
			e, created := claim(t, j, k, "owner-b", live)
			if created {
				t.Errorf("Claim of a submitted entry: created = true")
			}
			checkEntry(t, "Claim of a submitted entry", s, e)
			checkEntry(t, "submitted entry at the end", s, mustGet(t, j, k))
		},
	},
	{
		name:        "Prune",
		explanation: "Prune deletes the finished and submitted entries last updated before the given time and returns how many it deleted; it never deletes a Started entry, however old.",
		f: func(t *testing.T, j journaldriver.Journal) {
			ctx := t.Context()
			started, ok, bad, sub := key("started"), key("ok"), key("failed"), key("submitted")
			claim(t, j, started, "owner-a", expired)
			for _, k := range []journaldriver.Key{ok, bad, sub} {
				claim(t, j, k, "owner-a", live)
			}
			finish(t, j, ok, "owner-a", textResult("ok"))
			finish(t, j, bad, "owner-a", journaldriver.Result{Failed: true, Error: "bad", Outcome: driver.ToolError})
			finish(t, j, sub, "owner-a", textResult("sub"))
			markSubmitted(t, j, sub)
			if n, err := j.Prune(ctx, time.Now().Add(-slack)); err != nil || n != 0 {
				t.Errorf("Prune(a minute ago) = %d, %v; want 0, nil", n, err)
			}
			for _, k := range []journaldriver.Key{started, ok, bad, sub} {
				if _, found := get(t, j, k); !found {
					t.Errorf("Prune(a minute ago) deleted %q", k.Call)
				}
			}
			if n, err := j.Prune(ctx, time.Now().Add(slack)); err != nil || n != 3 {
				t.Errorf("Prune(in a minute) = %d, %v; want 3, nil", n, err)
			}
			for _, k := range []journaldriver.Key{ok, bad, sub} {
				if e, found := get(t, j, k); found {
					t.Errorf("after Prune: %q is still there (%v)", k.Call, e.State)
				}
			}
			if _, found := get(t, j, started); !found {
				t.Errorf("Prune deleted a Started entry")
			}
			if n, err := j.Prune(ctx, time.Now().Add(slack)); err != nil || n != 0 {
				t.Errorf("second Prune = %d, %v; want 0, nil", n, err)
			}
			if _, created := claim(t, j, ok, "owner-b", live); !created {
				t.Errorf("Claim of a pruned key: created = false, want true")
			}
		},
	},
	{
		name:        "ConcurrentClaims",
		explanation: "Of many owners claiming the same keys at once, exactly one creates each key, and every owner gets back the winner's entry.",
		f: func(t *testing.T, j journaldriver.Journal) {
			const owners, keys = 8, 25
			var wg sync.WaitGroup
			wins := make([][]string, keys)
			var mu sync.Mutex
			for o := range owners {
				owner := fmt.Sprintf("owner-%d", o)
				wg.Go(func() {
					for i := range keys {
						k := key(fmt.Sprint(i))
						e, created, err := j.Claim(t.Context(), k, digest(k), idem(k), owner, live)
						if err != nil {
							t.Errorf("Claim by %s: %v", owner, err)
							return
						}
						mu.Lock()
						if created {
							wins[i] = append(wins[i], owner)
						}
						mu.Unlock()
						if e.Digest != digest(k) || e.State != journaldriver.Started {
							t.Errorf("Claim by %s returned %+v", owner, e)
						}
					}
				})
			}
			wg.Wait()
			for i, w := range wins {
				if len(w) != 1 {
					t.Errorf("key %d created by %v, want exactly one owner", i, w)
					continue
				}
				if e := mustGet(t, j, key(fmt.Sprint(i))); e.Owner != w[0] {
					t.Errorf("key %d: owner %q, but %q created it", i, e.Owner, w[0])
				}
			}
		},
	},
	{
		name:        "ConcurrentTakeOvers",
		explanation: "Of many owners taking over the same expired entries at once, exactly one wins each.",
		f: func(t *testing.T, j journaldriver.Journal) {
			const owners, keys = 8, 25
			for i := range keys {
				claim(t, j, key(fmt.Sprint(i)), "dead-owner", expired)
			}
			var wg sync.WaitGroup
			wins := make([][]string, keys)
			var mu sync.Mutex
			for o := range owners {
				owner := fmt.Sprintf("owner-%d", o)
				wg.Go(func() {
					for i := range keys {
						took, err := j.TakeOver(t.Context(), key(fmt.Sprint(i)), owner, live)
						if err != nil {
							t.Errorf("TakeOver by %s: %v", owner, err)
							return
						}
						if took {
							mu.Lock()
							wins[i] = append(wins[i], owner)
							mu.Unlock()
						}
					}
				})
			}
			wg.Wait()
			for i, w := range wins {
				if len(w) != 1 {
					t.Errorf("key %d taken over by %v, want exactly one owner", i, w)
					continue
				}
				if e := mustGet(t, j, key(fmt.Sprint(i))); e.Owner != w[0] {
					t.Errorf("key %d: owner %q, but %q took it over", i, e.Owner, w[0])
				}
			}
		},
	},
}
