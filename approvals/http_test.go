package approvals

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// A bot token that cannot make a URL (a line break copied with it) and a
// server that is not there: neither error spells the URL, and so the
// token, out.
func TestPostNeverQuotesTheURL(t *testing.T) {
	a := &Approvals{http: &http.Client{}}
	const secret = "123456:AAF-secret-token-value"
	for _, u := range []string{
		"http://127.0.0.1:1/bot" + secret + "\n/sendMessage", // does not parse
		"http://127.0.0.1:1/bot" + secret + "/sendMessage",   // nobody listens
	} {
		resp, err := a.post(context.Background(), u, nil, []byte("{}"))
		if err == nil {
			resp.Body.Close()
			t.Fatalf("post %q: no error", u)
		}
		if strings.Contains(err.Error(), "secret-token") {
			t.Errorf("post's error quotes the token: %v", err)
		}
	}
}
