package openaitest

import (
	"encoding/json"
	"strconv"
)

// The appendJSON methods below write the JSON shapes of wire.go the way
// encoding/json.Marshal does, byte for byte (TestAppendJSON checks it),
// without reflection: every event of every stream is encoded with them.

// appendKey appends `,"key":`.
func appendKey(b []byte, key string) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	return append(b, '"', ':')
}

// appendString appends s as encoding/json quotes it (escaping HTML).
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendRaw appends raw JSON as encoding/json writes a json.RawMessage
// (compacted, HTML escaped); nil is null.
func appendRaw(b []byte, raw json.RawMessage) []byte {
	if raw == nil {
		return append(b, "null"...)
	}
	if compact(raw) {
		return append(b, raw...)
	}
	q, err := json.Marshal(raw)
	if err != nil {
		panic(err)
	}
	return append(b, q...)
}

// compact reports whether raw (valid JSON) is as encoding/json writes it:
// no whitespace between tokens, and no character it escapes in strings
// (<, >, & and, conservatively, any character starting with the byte
// 0xE2, as U+2028 and U+2029 do).
func compact(raw []byte) bool {
	in := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if in {
			switch c {
			case '\\':
				i++
			case '"':
				in = false
			case '<', '>', '&', 0xE2:
				return false
			}
			continue
		}
		switch c {
		case '"':
			in = true
		case ' ', '\t', '\n', '\r':
			return false
		}
	}
	return true
}

func appendStringPtr(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendString(b, *s)
}

func (u *usageJSON) appendJSON(b []byte) []byte {
	if u == nil {
		return append(b, "null"...)
	}
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, u.InputTokens, 10)
	b = append(b, `,"input_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, u.InputTokensDetails.CachedTokens, 10)
	b = append(b, `},"output_tokens":`...)
	b = strconv.AppendInt(b, u.OutputTokens, 10)
	b = append(b, `,"output_tokens_details":{"reasoning_tokens":`...)
	b = strconv.AppendInt(b, u.OutputTokensDetails.ReasoningTokens, 10)
	b = append(b, `},"total_tokens":`...)
	b = strconv.AppendInt(b, u.TotalTokens, 10)
	return append(b, '}')
}

func (t *turnJSON) appendJSON(b []byte) []byte {
	if t == nil {
		return append(b, "null"...)
	}
	b = append(b, `{"id":`...)
	b = appendString(b, t.ID)
	b = append(b, `,"object":`...)
	b = appendString(b, t.Object)
	b = append(b, `,"agent_id":`...)
	b = appendString(b, t.AgentID)
	b = append(b, `,"session_id":`...)
	b = appendString(b, t.SessionID)
	b = append(b, `,"subagent_id":`...)
	b = appendStringPtr(b, t.SubagentID)
	b = append(b, `,"status":`...)
	b = appendString(b, t.Status)
	b = append(b, `,"created_at":`...)
	b = strconv.AppendInt(b, t.CreatedAt, 10)
	b = append(b, `,"started_at":`...)
	b = strconv.AppendInt(b, t.StartedAt, 10)
	b = append(b, `,"completed_at":`...)
	if t.CompletedAt == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, *t.CompletedAt, 10)
	}
	b = append(b, `,"error":`...)
	if t.Error == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"code":`...)
		b = appendString(b, t.Error.Code)
		b = append(b, `,"message":`...)
		b = appendString(b, t.Error.Message)
		b = append(b, '}')
	}
	b = append(b, `,"usage":`...)
	b = t.Usage.appendJSON(b)
	b = append(b, `,"prompt_cache_options":`...)
	if t.PromptCacheOptions == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, "{}"...)
	}
	return append(b, '}')
}

func (s *sessionJSON) appendJSON(b []byte) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	b = append(b, `{"id":`...)
	b = appendString(b, s.ID)
	b = append(b, `,"object":`...)
	b = appendString(b, s.Object)
	b = append(b, `,"status":`...)
	b = appendString(b, s.Status)
	b = append(b, `,"required_actions":`...)
	if s.RequiredActions == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, a := range s.RequiredActions {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"type":`...)
			b = appendString(b, a.Type)
			if a.EnvironmentID != "" {
				b = append(b, `,"environment_id":`...)
				b = appendString(b, a.EnvironmentID)
				b = append(b, '}')
				continue
			}
			b = append(b, `,"turn_id":`...)
			b = appendString(b, a.TurnID)
			if a.RequestID != "" {
				b = append(b, `,"request_id":`...)
				b = appendString(b, a.RequestID)
				b = append(b, `,"request":`...)
				b = appendRaw(b, a.Request)
				b = append(b, '}')
				continue
			}
			b = append(b, `,"call_id":`...)
			b = appendString(b, a.CallID)
			b = append(b, `,"name":`...)
			b = appendString(b, a.Name)
			b = append(b, `,"arguments":`...)
			b = appendRaw(b, a.Arguments)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"agent":`...)
	b = appendRaw(b, s.Agent)
	b = append(b, `,"environment":{"type":`...)
	b = appendString(b, s.Environment.Type)
	if e := &s.Environment; e.ID != "" {
		b = append(b, `,"id":`...)
		b = appendString(b, e.ID)
		b = append(b, `,"remote_url":`...)
		b = appendString(b, e.RemoteURL)
		b = append(b, `,"workspace_directory":`...)
		b = appendString(b, e.WorkspaceDirectory)
	}
	b = append(b, `},"error":`...)
	b = appendStringPtr(b, s.Error)
	b = append(b, `,"created_at":`...)
	b = strconv.AppendInt(b, s.CreatedAt, 10)
	b = append(b, `,"last_active_at":`...)
	b = strconv.AppendInt(b, s.LastActiveAt, 10)
	b = append(b, `,"metadata":`...)
	if len(s.Metadata) == 0 {
		b = append(b, `{}`...)
	} else {
		b = appendRaw(b, mustJSON(map[string]string(s.Metadata)))
	}
	b = append(b, `,"usage":`...)
	b = s.Usage.appendJSON(b)
	b = append(b, `,"vault_ids":`...)
	b = appendStrings(b, s.VaultIDs)
	b = append(b, `,"prompt_cache_options":`...)
	if s.PromptCacheOptions == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, "{}"...)
	}
	return append(b, '}')
}

// appendStrings appends a []string (nil is null).
func appendStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

func (e *eventJSON) appendJSON(b []byte) []byte {
	b = append(b, `{"type":`...)
	b = appendString(b, e.Type)
	b = append(b, `,"event_id":`...)
	b = appendString(b, e.EventID)
	if e.SessionID != "" {
		b = appendKey(b, "session_id")
		b = appendString(b, e.SessionID)
	}
	if e.TurnID != "" {
		b = appendKey(b, "turn_id")
		b = appendString(b, e.TurnID)
	}
	if e.Session != nil {
		b = appendKey(b, "session")
		b = e.Session.appendJSON(b)
	}
	if e.Turn != nil {
		b = appendKey(b, "turn")
		b = e.Turn.appendJSON(b)
	}
	if e.OutputIndex != nil {
		b = appendKey(b, "output_index")
		b = strconv.AppendInt(b, int64(*e.OutputIndex), 10)
	}
	if e.ItemID != "" {
		b = appendKey(b, "item_id")
		b = appendString(b, e.ItemID)
	}
	if e.ContentIndex != nil {
		b = appendKey(b, "content_index")
		b = strconv.AppendInt(b, int64(*e.ContentIndex), 10)
	}
	if e.SummaryIndex != nil {
		b = appendKey(b, "summary_index")
		b = strconv.AppendInt(b, int64(*e.SummaryIndex), 10)
	}
	if e.Delta != "" {
		b = appendKey(b, "delta")
		b = appendString(b, e.Delta)
	}
	if e.Text != nil {
		b = appendKey(b, "text")
		b = appendString(b, *e.Text)
	}
	if e.Part != nil {
		b = appendKey(b, "part")
		b = e.Part.appendJSON(b)
	}
	if len(e.Item) > 0 {
		b = appendKey(b, "item")
		b = appendRaw(b, e.Item)
	}
	if e.Usage != nil {
		b = appendKey(b, "usage")
		b = e.Usage.appendJSON(b)
	}
	if e.Error != nil {
		b = appendKey(b, "error")
		b = append(b, mustJSON(e.Error)...)
	}
	if len(e.Subagent) > 0 {
		b = appendKey(b, "subagent")
		b = appendRaw(b, e.Subagent)
	}
	return append(b, '}')
}

func (it *itemJSON) appendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, it.ID)
	b = append(b, `,"type":`...)
	b = appendString(b, it.Type)
	b = append(b, `,"turn_id":`...)
	b = appendString(b, it.TurnID)
	if it.Role != "" {
		b = append(b, `,"role":`...)
		b = appendString(b, it.Role)
	}
	switch {
	case it.Phase != "":
		b = append(b, `,"phase":`...)
		b = appendString(b, it.Phase)
	case it.Type == "message":
		b = append(b, `,"phase":null`...) // a user's message has none
	}
	if it.CallID != "" {
		b = append(b, `,"call_id":`...)
		b = appendString(b, it.CallID)
	}
	if it.Name != "" {
		b = append(b, `,"name":`...)
		b = appendString(b, it.Name)
	}
	if len(it.Arguments) > 0 {
		b = append(b, `,"arguments":`...)
		b = appendRaw(b, it.Arguments)
	}
	switch {
	case len(it.Output) > 0:
		b = append(b, `,"output":`...)
		b = appendRaw(b, it.Output)
	case it.Type == "function_call_output":
		b = append(b, `,"output":null`...) // a failed call's
	}
	switch {
	case it.Error != nil:
		b = append(b, `,"error":`...)
		b = appendString(b, *it.Error)
	case it.Type == "function_call_output":
		b = append(b, `,"error":null`...)
	}
	b = append(b, `,"status":`...)
	b = appendString(b, it.Status)
	if len(it.Content) > 0 || it.Type == "message" {
		b = append(b, `,"content":[`...)
		for i, c := range it.Content {
			if i > 0 {
				b = append(b, ',')
			}
			b = c.appendJSON(b)
		}
		b = append(b, ']')
	}
	if it.Summary != nil {
		b = append(b, `,"summary":[`...)
		for i, c := range it.Summary {
			if i > 0 {
				b = append(b, ',')
			}
			b = c.appendJSON(b)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

func (c *contentJSON) appendJSON(b []byte) []byte {
	b = append(b, `{"type":`...)
	b = appendString(b, c.Type)
	b = append(b, `,"text":`...)
	b = appendString(b, c.Text)
	if c.Annotations != nil {
		b = append(b, `,"annotations":`...)
		b = appendStrings(b, *c.Annotations)
	}
	return append(b, '}')
}

// json renders the item.
func (it *itemJSON) json() json.RawMessage { return it.appendJSON(nil) }
