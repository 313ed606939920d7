package approvals

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/handoff/handoff/provider"
)

// post sends one POST of body to u with header through the surfaces'
// client. Its errors never spell u out: a *url.Error repeats the whole URL
// in its message, and the Bot API's URL (the bot token in its path) and
// Slack's response_url (a secret in its path) must not reach a log line or
// a job's recorded error; the cause underneath is kept for errors.Is.
func (a *Approvals) post(ctx context.Context, u string, header http.Header, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, withoutURL(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return nil, withoutURL(err)
	}
	return resp, nil
}

func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// do makes one call of a surface's API under the wire's rules
// (provider.Caller: its own pool, no replays): a failure is
// *provider.NotSent when not one byte left this machine, else
// *provider.Ambiguous, which tells a post that was never made from one
// that may have been.
func (a *Approvals) do(ctx context.Context, u string, header http.Header, body []byte) (provider.Answer, error) {
	return a.wire.Do(ctx, http.MethodPost, u, header, body)
}
