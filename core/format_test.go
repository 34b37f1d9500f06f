package core_test

import (
	"strings"
	"testing"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/errcode"
)

// TestFormat checks the making of formats and the decoding of answers.
func TestFormat(t *testing.T) {
	type point struct {
		X int `json:"x"`
		Y int `json:"y,omitempty"`
	}
	if _, err := core.NewFormat[int]("n", nil); err == nil {
		t.Error("NewFormat of an int: no error, want one (a format is an object)")
	}
	if _, err := core.NewFormat[point]("bad name", nil); err == nil {
		t.Error("NewFormat with a space in the name: no error")
	}
	f, err := core.NewFormat[point]("point", nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.Strict() {
		t.Error("Strict() of a format made without ToolOptions.Strict = true")
	}
	if sf, err := core.NewFormat[point]("point", &core.ToolOptions{Strict: true}); err != nil || !sf.Strict() {
		t.Errorf("Strict() of a strict format = false (err %v)", err)
	}
	for _, tc := range []struct {
		text string
		want point
		msg  string // the error's text, if any
	}{
		{text: `{"x": 1, "y": 2}`, want: point{1, 2}},
		{text: `{"x": 1}`, want: point{X: 1}},
		{text: `{"y": 1}`, msg: "does not match"},
		{text: `{"x": "1"}`, msg: "does not match"},
		{text: `Sure! {"x": 1}`, msg: "not JSON"},
		{text: ``, msg: "not JSON"},
	} {
		got, err := core.Decode[point](f, &core.Result{Text: tc.text})
		switch {
		case tc.msg == "" && (err != nil || got != tc.want):
			t.Errorf("Decode(%q) = %+v, %v; want %+v", tc.text, got, err, tc.want)
		case tc.msg != "" && (err == nil || !strings.Contains(err.Error(), tc.msg) || errcode.Of(err) != errcode.Internal):
			t.Errorf("Decode(%q) error = %v, want an Internal error saying %q", tc.text, err, tc.msg)
		}
	}
}
