package core_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/toolrelay/toolrelay/core"
)

func TestErrorCodes(t *testing.T) {
	orig := &apiError{429}
	tests := []struct {
		name string
		err  error
		code core.Code
		is   []error
		not  []error
	}{
		{"coded", &core.Error{Code: core.ResourceExhausted, Op: "x", Err: orig}, core.ResourceExhausted,
			[]error{core.ErrResourceExhausted, orig}, []error{core.ErrNotFound, core.ErrUnknown}},
		{"wrapped coded", fmt.Errorf("outer: %w", &core.Error{Code: core.NotFound}), core.NotFound,
			[]error{core.ErrNotFound}, []error{core.ErrInternal}},
		{"Errorf", core.Errorf(core.PermissionDenied, "no token for %s", "x"), core.PermissionDenied,
			[]error{core.ErrPermissionDenied}, nil},
		{"context canceled", context.Canceled, core.Canceled, []error{context.Canceled}, nil},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), core.DeadlineExceeded, nil, nil},
		{"unavailable", fmt.Errorf("submit: %w", &core.Error{Code: core.Unavailable, Op: "x", Err: orig}), core.Unavailable,
			[]error{core.ErrUnavailable, orig}, []error{core.ErrUnknown, core.ErrInternal}},
		{"plain", errors.New("plain"), core.Unknown, nil, []error{core.ErrUnknown}},
		{"nil", nil, core.Unknown, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := core.CodeOf(tt.err); got != tt.code {
				t.Errorf("CodeOf = %v, want %v", got, tt.code)
			}
			for _, target := range tt.is {
				if !errors.Is(tt.err, target) {
					t.Errorf("errors.Is(%v, %v) = false", tt.err, target)
				}
			}
			for _, target := range tt.not {
				if errors.Is(tt.err, target) {
					t.Errorf("errors.Is(%v, %v) = true", tt.err, target)
				}
			}
		})
	}
	var ae *apiError
	if !errors.As(&core.Error{Code: core.Unknown, Err: fmt.Errorf("w: %w", orig)}, &ae) || ae != orig {
		t.Error("errors.As does not reach the original error")
	}
	if got := (&core.Error{Code: core.NotFound, Op: "openai: resume", Err: orig}).Error(); got != "openai: resume: API error 429 (NotFound)" {
		t.Errorf("Error() = %q", got)
	}
	if got := core.Unavailable.String(); got != "Unavailable" {
		t.Errorf("Unavailable.String() = %q", got)
	}
	if got := core.Code(42).String(); got != "Code(42)" {
		t.Errorf("String of an unknown code = %q", got)
	}
}

func TestModelError(t *testing.T) {
	inner := errors.New("row locked")
	err := fmt.Errorf("book: %w", &core.ModelError{Message: "table 7 is taken; try another table", Err: inner})
	var me *core.ModelError
	if !errors.As(err, &me) || me.Message != "table 7 is taken; try another table" || !errors.Is(err, inner) {
		t.Errorf("ModelError not reachable or not unwrapping: %v", err)
	}
}
