package web

import (
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"testing"
)

// TestListHandoffsCursor pages through every lead one at a time: each page
// but the last gives a next_cursor, the pages together are the one-page
// list in its order, and a cursor that the list did not give out is refused.
func TestListHandoffsCursor(t *testing.T) {
	e, _ := whSetup(t)
	all, _ := whList(t, e.url, "")
	if len(all) < 3 {
		t.Fatalf("the setup made %d leads; want at least 3", len(all))
	}
	for _, query := range []string{"", "status=received&"} {
		want, _ := whList(t, e.url, "?"+query)
		var got []string
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > len(want) {
				t.Fatalf("?%s: %d pages of one lead for %d leads: the cursor does not move on", query, pages, len(want))
			}
			code, raw := whGet(t, e.url, "/api/v1/handoffs?"+query+"limit=1&cursor="+url.QueryEscape(cursor))
			if code != http.StatusOK {
				t.Fatalf("?%slimit=1&cursor=%s: %d %s", query, cursor, code, raw)
			}
			var page struct {
				Handoffs []whLead `json:"handoffs"`
				Next     string   `json:"next_cursor"`
			}
			if err := json.Unmarshal(raw, &page); err != nil {
				t.Fatal(err)
			}
			for _, l := range page.Handoffs {
				got = append(got, l.Key)
			}
			if page.Next == "" {
				break
			}
			if len(page.Handoffs) != 1 {
				t.Fatalf("a page with next_cursor has %d leads; want the full page of 1", len(page.Handoffs))
			}
			cursor = page.Next
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("?%s paged one at a time: %v; want %v", query, got, want)
		}
	}
	if code, raw := whGet(t, e.url, "/api/v1/handoffs?cursor=not-a-cursor"); code != http.StatusBadRequest {
		t.Errorf("a made-up cursor: %d %s; want 400", code, raw)
	}
}
