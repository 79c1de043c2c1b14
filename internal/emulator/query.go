package emulator

import (
	"encoding/base64"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Pagination defaults. The real limits are unpublished; the emulator uses
// 100 as both default and maximum and caps larger requests.
const (
	defaultLimit = 100
	maxLimit     = 100
)

// pageToken is the opaque cursor: the sort key of the last item returned
// plus the listing it belongs to. Keyset cursors (not offsets) mean an item
// that arrives later with an older timestamp sorts onto an earlier page, as
// with the real API.
type pageToken struct {
	Kind string `json:"k"`
	Asc  bool   `json:"a"`
	T    int64  `json:"t"`
	Seq  uint64 `json:"s"`
}

func encodeToken(t pageToken) string {
	b, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeToken(s, kind string, asc bool) (*pageToken, error) {
	if s == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, errValidation("Invalid page_token")
	}
	var t pageToken
	if err := json.Unmarshal(b, &t); err != nil || t.Kind != kind || t.Asc != asc {
		return nil, errValidation("Invalid page_token")
	}
	return &t, nil
}

// sortKey orders list items by a time then a creation sequence number.
type sortKey struct {
	t   time.Time
	seq uint64
}

func (a sortKey) less(b sortKey) bool {
	if !a.t.Equal(b.t) {
		return a.t.Before(b.t)
	}
	return a.seq < b.seq
}

// listParams are the common list query parameters.
type listParams struct {
	limit  int
	token  string
	asc    bool
	before *time.Time
	after  *time.Time
}

func (c *call) listParams() (listParams, error) {
	lp := listParams{limit: defaultLimit, token: c.q.Get("page_token")}
	if v := c.q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return lp, errValidation("limit must be a positive integer")
		}
		lp.limit = min(n, maxLimit)
	}
	if m := int(c.s.pageMax.Load()); m > 0 {
		lp.limit = min(lp.limit, m)
	}
	var err error
	if lp.asc, err = c.boolParam("ascending"); err != nil {
		return lp, err
	}
	for _, name := range []string{"before", "after"} {
		v := c.q.Get(name)
		if v == "" {
			continue
		}
		t, perr := parseTimeParam(v)
		if perr != nil {
			return lp, errValidation(name + " must be an ISO 8601 datetime")
		}
		if name == "before" {
			lp.before = &t
		} else {
			lp.after = &t
		}
	}
	return lp, nil
}

func parseTimeParam(v string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	return time.Parse("2006-01-02", v)
}

func (c *call) boolParam(name string) (bool, error) {
	v := c.q.Get(name)
	switch strings.ToLower(v) {
	case "":
		return false, nil
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, errValidation(name + " must be true or false")
}

// listParam returns an array query parameter in any of the forms clients
// send: repeated keys (labels=a&labels=b), comma-joined (labels=a,b, the
// Go SDK), a JSON array (labels=["a","b"], the Node SDK), or indexed keys
// (labels[0]=a).
func (c *call) listParam(name string) []string {
	var raw []string
	raw = append(raw, c.q[name]...)
	raw = append(raw, c.q[name+"[]"]...)
	var indexed []string
	for k, v := range c.q {
		if strings.HasPrefix(k, name+"[") && strings.HasSuffix(k, "]") && k != name+"[]" {
			indexed = append(indexed, k)
			_ = v
		}
	}
	sort.Strings(indexed)
	for _, k := range indexed {
		raw = append(raw, c.q[k]...)
	}
	var out []string
	for _, v := range raw {
		v = strings.TrimSpace(v)
		if strings.HasPrefix(v, "[") {
			var arr []string
			if json.Unmarshal([]byte(v), &arr) == nil {
				out = append(out, arr...)
				continue
			}
		}
		if strings.HasPrefix(v, `"`) {
			var one string
			if json.Unmarshal([]byte(v), &one) == nil {
				out = append(out, one)
				continue
			}
		}
		for _, part := range strings.Split(v, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

// paginate sorts items by key (descending unless asc), skips past the
// cursor, and returns one page plus the next cursor ("" on the last page).
func paginate[T any](items []T, key func(T) sortKey, kind string, lp listParams) ([]T, string, error) {
	tok, err := decodeToken(lp.token, kind, lp.asc)
	if err != nil {
		return nil, "", err
	}
	sort.SliceStable(items, func(i, j int) bool {
		if lp.asc {
			return key(items[i]).less(key(items[j]))
		}
		return key(items[j]).less(key(items[i]))
	})
	start := 0
	if tok != nil {
		cur := sortKey{t: time.Unix(0, tok.T), seq: tok.Seq}
		start = sort.Search(len(items), func(i int) bool {
			k := key(items[i])
			if lp.asc {
				return cur.less(k)
			}
			return k.less(cur)
		})
	}
	end := min(start+lp.limit, len(items))
	page := items[start:end]
	next := ""
	if end < len(items) && len(page) > 0 {
		last := key(page[len(page)-1])
		next = encodeToken(pageToken{Kind: kind, Asc: lp.asc, T: last.t.UnixNano(), Seq: last.seq})
	}
	return page, next, nil
}
