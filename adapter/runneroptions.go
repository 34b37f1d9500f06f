package adapter

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/toolrelay/toolrelay/core"
)

// A runnerSetting is a setting of core's: the index of its field in
// Settings, and that of the field of core.Options it sets (its runner
// tag, resolved).
type runnerSetting struct {
	from, to []int
}

// runnerSettings are the settings of core's, read from the runner tags of
// Settings once. A tag that names no field of core.Options, or one that a
// setting's value cannot be converted to, panics: a mistake of this
// package, which its tests meet first.
var runnerSettings = func() []runnerSetting {
	var out []runnerSetting
	opts := reflect.TypeFor[core.Options]()
	for _, f := range reflect.VisibleFields(reflect.TypeFor[Settings]()) {
		path := f.Tag.Get("runner")
		if path == "" {
			continue
		}
		var to []int
		t := opts
		for name := range strings.SplitSeq(path, ".") {
			sf, ok := t.FieldByName(name)
			if !ok {
				panic(fmt.Sprintf("adapter: Settings.%s: core.Options has no field %s", f.Name, path))
			}
			to, t = append(to, sf.Index...), sf.Type
		}
		if !f.Type.ConvertibleTo(t) {
			panic(fmt.Sprintf("adapter: Settings.%s (%v) cannot set core.Options.%s (%v)", f.Name, f.Type, path, t))
		}
		out = append(out, runnerSetting{from: f.Index, to: to})
	}
	return out
}()

// runnerOptions returns ro overridden by the settings of core's that cfg
// sets: a number or duration above zero, true, or a price table (even an
// empty one).
func runnerOptions(cfg *Settings, ro core.Options) core.Options {
	src, dst := reflect.ValueOf(cfg).Elem(), reflect.ValueOf(&ro).Elem()
	for _, s := range runnerSettings {
		v := src.FieldByIndex(s.from)
		if !isSet(v) {
			continue
		}
		to := dst.FieldByIndex(s.to)
		to.Set(v.Convert(to.Type()))
	}
	return ro
}

// isSet reports whether the setting v is set: a number above zero (a
// negative one is refused by Load, unless its doc gives it a meaning),
// true, or a map that is not nil.
func isSet(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Int, reflect.Int64:
		return v.Int() > 0
	case reflect.Float64:
		return v.Float() > 0
	case reflect.Bool:
		return v.Bool()
	case reflect.Map:
		return !v.IsNil()
	}
	panic(fmt.Sprintf("adapter: a runner setting of kind %v", v.Kind()))
}
