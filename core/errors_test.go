package core_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/errcode"
)

func TestErrorCodes(t *testing.T) {
	orig := &apiError{429}
	tests := []struct {
		name string
		err  error
		code errcode.Code
		is   []error
		not  []error
	}{
		{"coded", &errcode.Error{Code: errcode.ResourceExhausted, Op: "x", Err: orig}, errcode.ResourceExhausted,
			[]error{errcode.ResourceExhausted, orig}, []error{errcode.NotFound, errcode.Unknown}},
		{"wrapped coded", fmt.Errorf("outer: %w", &errcode.Error{Code: errcode.NotFound}), errcode.NotFound,
			[]error{errcode.NotFound}, []error{errcode.Internal}},
		{"Errorf", errcode.Errorf(errcode.PermissionDenied, "no token for %s", "x"), errcode.PermissionDenied,
			[]error{errcode.PermissionDenied}, nil},
		{"context canceled", context.Canceled, errcode.Canceled, []error{context.Canceled}, nil},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), errcode.DeadlineExceeded, nil, nil},
		{"unavailable", fmt.Errorf("submit: %w", &errcode.Error{Code: errcode.Unavailable, Op: "x", Err: orig}), errcode.Unavailable,
			[]error{errcode.Unavailable, orig}, []error{errcode.Unknown, errcode.Internal}},
		{"plain", errors.New("plain"), errcode.Unknown, nil, []error{errcode.Unknown}},
		{"nil", nil, errcode.Unknown, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errcode.Of(tt.err); got != tt.code {
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
	if !errors.As(&errcode.Error{Code: errcode.Unknown, Err: fmt.Errorf("w: %w", orig)}, &ae) || ae != orig {
		t.Error("errors.As does not reach the original error")
	}
	if got := (&errcode.Error{Code: errcode.NotFound, Op: "openai: resume", Err: orig}).Error(); got != "openai: resume: API error 429 (NotFound)" {
		t.Errorf("Error() = %q", got)
	}
	if got := errcode.Unavailable.String(); got != "Unavailable" {
		t.Errorf("Unavailable.String() = %q", got)
	}
	if got := errcode.Code(42).String(); got != "Code(42)" {
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
