package openaitest

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
)

type entry struct {
	id string
	v  json.RawMessage
}

// paginate applies the list parameters after, limit (1 to 100, default
// 20) and order ("asc" or "desc", default "desc") to all, which is in
// creation order.
func paginate(all []entry, r *http.Request) (page []entry, more, ok bool) {
	q := r.URL.Query()
	limit := 20
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 100 {
			return nil, false, false
		}
		limit = n
	}
	list := slices.Clone(all)
	switch q.Get("order") {
	case "", "desc":
		slices.Reverse(list)
	case "asc":
	default:
		return nil, false, false
	}
	if after := q.Get("after"); after != "" {
		i := slices.IndexFunc(list, func(e entry) bool { return e.id == after })
		if i < 0 {
			return nil, false, false
		}
		list = list[i+1:]
	}
	if len(list) > limit {
		return list[:limit], true, true
	}
	return list, false, true
}

func cursorPage(page []entry, more bool) map[string]any {
	data := make([]json.RawMessage, len(page))
	for i, e := range page {
		data[i] = e.v
	}
	p := map[string]any{"object": "list", "data": data, "has_more": more, "first_id": nil, "last_id": nil}
	if len(page) > 0 {
		p["first_id"], p["last_id"] = page[0].id, page[len(page)-1].id
	}
	return p
}
