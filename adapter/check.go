package adapter

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/replay"
)

// check refuses settings out of range. Every number and duration may be 0,
// which means its default; otherwise it must be at least the field's min
// tag (a number, or a Go duration), which is 0 when the field has none;
// min:"none" lets a field take any value (its doc says what a negative one
// means). The journal retention must also cover the run time limit.
func (c *Settings) check() error {
	if err := checkRanges(reflect.ValueOf(c).Elem(), ""); err != nil {
		return err
	}
	if c.Replay != "" {
		if _, _, err := replay.ParseSetting(c.Replay); err != nil {
			return invalidSetting("replay", replay.EnvVar, errors.Unwrap(err))
		}
	}
	if c.JournalRetention > 0 {
		run := core.DefaultRunTimeout
		if c.RunTimeout > 0 {
			run = time.Duration(c.RunTimeout)
		}
		if time.Duration(c.JournalRetention) < run {
			return invalidSetting("journal_retention", "TOOLRELAY_JOURNAL_RETENTION",
				fmt.Errorf("%v is shorter than the run time limit (%v): a result could be pruned before its run has sent it", time.Duration(c.JournalRetention), run))
		}
	}
	return nil
}

// checkRanges checks the numbers and durations of v, a struct whose
// settings have file keys under prefix.
func checkRanges(v reflect.Value, prefix string) error {
	t := v.Type()
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		key := prefix + name
		if f.Type.Kind() == reflect.Struct && f.Tag.Get("env") == "" {
			if err := checkRanges(fv, key+"."); err != nil {
				return err
			}
			continue
		}
		min := f.Tag.Get("min")
		if min == "none" {
			continue
		}
		var err error
		switch x := fv.Interface().(type) {
		case Duration:
			err = checkDuration(time.Duration(x), min)
		case int:
			err = checkInt(x, min)
		case float64:
			switch {
			case math.IsNaN(x) || math.IsInf(x, 0):
				err = fmt.Errorf("%v is not a finite number", x)
			case x < 0:
				err = fmt.Errorf("%v is negative (0 means no limit)", x)
			}
		case Prices:
			// core's rule, its error without core's prefix.
			if err = (&core.Budget{Prices: x}).Check(); err != nil {
				err = errors.Unwrap(err)
			}
		}
		if err != nil {
			return invalidSetting(key, f.Tag.Get("env"), err)
		}
	}
	return nil
}

func checkDuration(d time.Duration, min string) error {
	floor := time.Duration(0)
	if min != "" {
		floor, _ = time.ParseDuration(min)
	}
	switch {
	case d == 0 || d >= floor:
		return nil
	case floor == 0:
		return fmt.Errorf("%v is negative (0 means the default)", d)
	}
	return fmt.Errorf("%v is under the minimum, %v (0 means the default)", d, floor)
}

func checkInt(n int, min string) error {
	floor := 0
	if min != "" {
		floor, _ = strconv.Atoi(min)
	}
	switch {
	case n == 0 || n >= floor:
		return nil
	case floor == 0:
		return fmt.Errorf("%d is negative (0 means the default)", n)
	}
	return fmt.Errorf("%d is under the minimum, %d (0 means the default)", n, floor)
}

// invalidSetting returns the InvalidArgument error of the setting with file
// key key and environment variable env.
func invalidSetting(key, env string, err error) error {
	return &errcode.Error{Code: errcode.InvalidArgument, Op: fmt.Sprintf("adapter: %s (%s)", key, env), Err: err}
}
