package core

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
)

// jsonSizeAtLeast returns a lower bound of the length of v's JSON encoding
// as encoding/json writes it, without encoding v: it adds up what every
// encoding of v must hold (each string with its quotes, one character per
// number, the brackets and commas of arrays and objects, the names of the
// struct fields that are always written). It stops, returning a number
// above limit, as soon as the bound passes limit, so that walking a huge
// value costs no more than walking limit bytes of it. What it cannot know
// without running code (a MarshalJSON or MarshalText method, an embedded
// struct, a field that may be omitted) counts as nothing, which keeps the
// result a lower bound.
func jsonSizeAtLeast(v any, limit int) int {
	w := sizeWalk{limit: limit}
	w.value(reflect.ValueOf(v), 0)
	return w.n
}

// maxSizeDepth is how deep the walk goes; encoding/json refuses deeper
// pointer cycles than that.
const maxSizeDepth = 1000

type sizeWalk struct{ n, limit int }

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	rawMessageType    = reflect.TypeFor[json.RawMessage]()
	numberType        = reflect.TypeFor[json.Number]()
)

// marshals reports whether values of t encode themselves (with a method
// on t or on *t), so their encoding cannot be told from their fields.
func marshals(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t.Implements(marshalerType) || t.Implements(textMarshalerType) ||
		p.Implements(marshalerType) || p.Implements(textMarshalerType)
}

func (w *sizeWalk) over() bool { return w.n > w.limit }

func (w *sizeWalk) value(v reflect.Value, depth int) {
	if w.over() || depth > maxSizeDepth {
		return
	}
	if !v.IsValid() {
		w.n += len("null")
		return
	}
	t := v.Type()
	if t == rawMessageType {
		if v.IsNil() {
			w.n += len("null")
			return
		}
		w.n += nonSpace(v.Bytes())
		return
	}
	if t == numberType {
		w.n += max(v.Len(), 1) // written as it is, without quotes; "" as 0
		return
	}
	if marshals(t) {
		return
	}
	switch v.Kind() {
	case reflect.String:
		w.n += v.Len() + 2
	case reflect.Bool:
		w.n += len("true")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		w.n++
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			w.n += len("null")
			return
		}
		w.value(v.Elem(), depth+1)
	case reflect.Slice:
		if v.IsNil() {
			w.n += len("null")
			return
		}
		if t.Elem().Kind() == reflect.Uint8 && !marshals(t.Elem()) {
			w.n += (v.Len()+2)/3*4 + 2 // base64, quoted
			return
		}
		w.elems(v, depth)
	case reflect.Array:
		w.elems(v, depth)
	case reflect.Map:
		if v.IsNil() {
			w.n += len("null")
			return
		}
		w.n += 2 + max(v.Len()-1, 0)
		stringKeys := t.Key().Kind() == reflect.String && !marshals(t.Key())
		for it := v.MapRange(); it.Next() && !w.over(); {
			w.n += len(`"":`)
			if stringKeys {
				w.n += it.Key().Len()
			}
			w.value(it.Value(), depth+1)
		}
	case reflect.Struct:
		fields := fieldsOf(t)
		w.n += 2 + max(len(fields)-1, 0)
		for _, f := range fields {
			if w.over() {
				return
			}
			w.n += len(f.name) + len(`"":`)
			w.value(v.Field(f.index), depth+1)
		}
	}
}

// elems adds the brackets, commas and elements of an array or slice.
func (w *sizeWalk) elems(v reflect.Value, depth int) {
	n := v.Len()
	w.n += 2 + max(n-1, 0)
	for i := 0; i < n && !w.over(); i++ {
		w.value(v.Index(i), depth+1)
	}
}

// nonSpace counts the bytes of b that are not JSON whitespace: compacting
// a JSON document keeps at least those.
func nonSpace(b []byte) int {
	n := 0
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
		default:
			n++
		}
	}
	return n
}

// sizeField is a struct field that encoding/json always writes, with the
// name it writes.
type sizeField struct {
	index int
	name  string
}

var structFields sync.Map // reflect.Type → []sizeField

// fieldsOf returns the fields of struct type t that encoding/json always
// writes under a name known here: exported, not embedded, not "-", without
// omitempty or omitzero, with a valid name that no other field of t has.
func fieldsOf(t reflect.Type) []sizeField {
	if fs, ok := structFields.Load(t); ok {
		return fs.([]sizeField)
	}
	var fields []sizeField
	count := map[string]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || f.Anonymous {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if strings.ContainsAny(name, "\"\\") {
			continue // encoding/json would use the Go name: unsure, count nothing
		}
		if name == "" {
			name = f.Name
		}
		count[name]++
		if hasOption(opts, "omitempty") || hasOption(opts, "omitzero") {
			continue
		}
		fields = append(fields, sizeField{index: i, name: name})
	}
	// Fields that share a name may all be dropped: count none of them.
	unique := fields[:0:0]
	for _, f := range fields {
		if count[f.name] == 1 {
			unique = append(unique, f)
		}
	}
	structFields.Store(t, unique)
	return unique
}

func hasOption(opts, name string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == name {
			return true
		}
	}
	return false
}
