package main

import (
	"bufio"
	"bytes"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// results holds, for each benchmark (named without its "Benchmark"
// prefix and "-GOMAXPROCS" suffix), each unit's values over the runs.
type results map[string]map[string][]float64

// procs matches the -GOMAXPROCS suffix of a benchmark's name.
var procs = regexp.MustCompile(`-\d+$`)

// parse reads benchmark result lines in the standard format:
//
//	BenchmarkName-2   100   12345 ns/op   678 B/op   9 allocs/op   1.5 x/op
func parse(text []byte) results {
	rs := results{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := procs.ReplaceAllString(strings.TrimPrefix(f[0], "Benchmark"), "")
		if rs[name] == nil {
			rs[name] = map[string][]float64{}
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			rs[name][f[i+1]] = append(rs[name][f[i+1]], v)
		}
	}
	return rs
}

// median returns the median of name's values in unit, and whether there
// are any.
func (rs results) median(name, unit string) (float64, bool) {
	vs := slices.Clone(rs[name][unit])
	if len(vs) == 0 {
		return 0, false
	}
	slices.Sort(vs)
	if n := len(vs); n%2 == 0 {
		return (vs[n/2-1] + vs[n/2]) / 2, true
	}
	return vs[len(vs)/2], true
}

// ratio returns the ratio of a's median to b's in unit, and whether both
// were measured.
func (rs results) ratio(a, b, unit string) (float64, bool) {
	x, ok1 := rs.median(a, unit)
	y, ok2 := rs.median(b, unit)
	if !ok1 || !ok2 || y == 0 {
		return 0, false
	}
	return x / y, true
}
