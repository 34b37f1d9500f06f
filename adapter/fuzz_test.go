package adapter

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/errcode"
)

// FuzzLoadFile reads any bytes as a configuration file. It checks that
// nothing panics, that every refusal is InvalidArgument, and that the
// shared settings of a file read written back as a file read the same.
func FuzzLoadFile(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"backend":"openai","max_steps":3,"openai":{"api_key":"k"}}`, `{"run_timeout":"30m","journal_lease":"2s"}`,
		`{"tool_timeout":"soon"}`, `{"max_steps":"3"}`, `{"nope":1}`, `{"openai":[1]}`, `{} {}`, `{}]`, `[]`, `null`, ``,
		`{"max_event_bytes":-1,"idle_timeout":"-1s"}`, `{"backend":"a","backend":"b"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "c.json")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		var cfg Settings
		_, err := readFile(path, &cfg)
		if err == nil {
			err = cfg.check()
		}
		if err != nil {
			if errcode.Of(err) != errcode.InvalidArgument {
				t.Fatalf("readFile(%q) = %v (%v), want InvalidArgument", b, err, errcode.Of(err))
			}
			return
		}
		again, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, again, 0o600); err != nil {
			t.Fatal(err)
		}
		var back Settings
		if _, err := readFile(path, &back); err != nil {
			t.Fatalf("%s (written from %q) does not read: %v", again, b, err)
		}
		if diff := cmp.Diff(cfg, back); diff != "" {
			t.Fatalf("round trip of %q (-first +second):\n%s", b, diff)
		}
	})
}

// FuzzLoadEnv sets every shared setting from any text, as the environment
// would. It checks that nothing panics and that a refusal never repeats
// the text, which may be a secret put in the wrong variable. Text that is
// part of the refusal's fixed wording ("t tr" in "not true or false") is
// not repeated: the refusals of a few other bad values give that wording.
func FuzzLoadEnv(f *testing.F) {
	for _, seed := range []string{"3", "-1", "30s", "true", "sqlite:///x.db", "9223372036854775808", "1e3", "s3cr3t-value", "\x00", "5m0s"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v := reflect.ValueOf(new(Settings)).Elem()
		for i := range v.NumField() {
			err := setString(v.Field(i), s)
			if err == nil || len(s) < 4 || !strings.Contains(err.Error(), s) {
				continue
			}
			wording := false
			for _, other := range []string{"\x7f", "-1", "1e999", "99999999999999999999999", "{"} {
				if e := setString(reflect.New(v.Field(i).Type()).Elem(), other); e != nil && strings.Contains(e.Error(), s) {
					wording = true
				}
			}
			if !wording {
				t.Fatalf("setting %s from %q: the error %q repeats the text", v.Type().Field(i).Name, s, err)
			}
		}
	})
}
