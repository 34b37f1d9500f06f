package openaitest

import (
	"encoding/json"
	"net/http"

	"github.com/toolrelay/toolrelay/internal/fakeapi"
)

type entry struct {
	id string
	v  json.RawMessage
}

func entryID(e entry) string { return e.id }

// paginate applies the list parameters of r (after, limit, order) to all,
// which is in creation order; ok is false when one is invalid.
func paginate(all []entry, r *http.Request) (page []entry, more, ok bool) {
	page, more, err := fakeapi.Page(all, entryID, r.URL.Query())
	return page, more, err == nil
}

func cursorPage(page []entry, more bool) map[string]any {
	data := make([]json.RawMessage, len(page))
	for i, e := range page {
		data[i] = e.v
	}
	return fakeapi.List(page, more, entryID, data)
}
