package drill

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/handoff/handoff/proc"
)

const (
	// startTimeout bounds how long a run may take to log its address and
	// answer /readyz; opening bbolt takes milliseconds, so this only matters
	// when something is badly wrong.
	startTimeout = 20 * time.Second
	// stopGrace is how long a run gets after SIGTERM before SIGKILL.
	stopGrace = 10 * time.Second
)

// instance is the temporary handoff installation under drill: one folder
// holding the config file and the data folder, and one API token, that
// outlive any single process, so a fixture can kill the process and start
// another on the same files. start, kill and stop must not run concurrently
// with requests.
type instance struct {
	files  *proc.Instance
	token  string
	client *http.Client
}

func newInstance(bin, dir, configYAML, token, password string, log io.Writer) *instance {
	return &instance{
		files: &proc.Instance{
			Binary: bin,
			Dir:    dir,
			Config: configYAML,
			// An admin password of our own, so that none is generated and printed.
			Env:    []string{"HANDOFF_API_TOKEN=" + token, "HANDOFF_ADMIN_PASSWORD=" + password},
			Log:    log,
			Within: startTimeout,
		},
		token: token,
		client: &http.Client{
			Timeout: 20 * time.Second, // a hung instance fails a fixture, not the drill
			Transport: &http.Transport{
				Proxy:               nil, // only 127.0.0.1 is ever contacted
				MaxIdleConnsPerHost: 256,
			},
		},
	}
}

// cur is the current run; nil before the first start.
func (i *instance) cur() *proc.Process { return i.files.Current() }

// running reports whether the current run is alive.
func (i *instance) running() bool { return i.cur() != nil && !i.cur().Exited() }

// start runs the binary on the instance's files, with extra environment
// variables for this run only, and waits until /readyz answers 200.
func (i *instance) start(ctx context.Context, extraEnv ...string) error {
	_, err := i.files.Start(ctx, extraEnv...)
	return err
}

// kill sends SIGKILL to the current run and waits until it is reaped: the
// crash that nothing in-process can imitate.
func (i *instance) kill() error {
	if i.cur() == nil {
		return nil
	}
	if err := i.cur().Kill(); err != nil {
		return fmt.Errorf("run %d: %w", i.cur().Number(), err)
	}
	i.client.CloseIdleConnections()
	return nil
}

// stop ends the current run with SIGTERM, and with SIGKILL when it has not
// exited stopGrace later; it is nil only for exit status 0.
func (i *instance) stop() error {
	if i.cur() == nil {
		return errNotRunning
	}
	// Idle keep-alive connections would make the server's graceful
	// shutdown wait for them; hang up first.
	i.client.CloseIdleConnections()
	err := i.cur().Stop(stopGrace)
	i.client.CloseIdleConnections()
	return err
}

// ---- the API, as the drill uses it ----

// errNotRunning is every request's answer while no run is alive.
var errNotRunning = errors.New("the instance is not running")

// do sends one request with the API token to the current run and returns
// the status and body.
func (i *instance) do(method, path string, body any) (int, []byte, error) {
	if i.cur() == nil || i.cur().Addr() == "" {
		return 0, nil, errNotRunning
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, i.cur().URL()+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+i.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := i.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%s %s: reading the %d answer: %w", method, path, resp.StatusCode, err)
	}
	return resp.StatusCode, raw, nil
}

// getJSON decodes a 200 answer of GET path into v; other statuses are errors.
func (i *instance) getJSON(path string, v any) error {
	code, raw, err := i.do(http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", path, code, bytes.TrimSpace(raw))
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("GET %s: decoding %s: %w", path, raw, err)
	}
	return nil
}

// hookAnswer is the body of an answer from POST /hooks/{channel}.
type hookAnswer struct {
	Status   string `json:"status"`
	EventKey string `json:"event_key"`
	Error    string `json:"error"`
}

// post delivers one inbound event to a channel.
func (i *instance) post(channel string, ev inbound) (int, hookAnswer, error) {
	var a hookAnswer
	code, raw, err := i.do(http.MethodPost, "/hooks/"+channel, ev)
	if err != nil {
		return code, a, err
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return code, a, fmt.Errorf("POST /hooks/%s: %d %s", channel, code, bytes.TrimSpace(raw))
	}
	return code, a, nil
}

// timeline is GET /api/v1/events/{key}, reduced to what the drill reads.
type timeline struct {
	Event struct {
		Key           string `json:"key"`
		CorrelationID string `json:"correlation_id"`
	} `json:"event"`
	Jobs []struct {
		ID       string    `json:"id"`
		Kind     string    `json:"kind"`
		State    string    `json:"state"`
		Attempt  int       `json:"attempt"`
		Attempts []attempt `json:"attempts"`
	} `json:"jobs"`
	Draft *struct {
		ID       string   `json:"id"`
		Status   string   `json:"status"`
		OutboxID string   `json:"outbox_id"`
		Answers  []string `json:"answers"` // the messages of the turn it answers
	} `json:"draft"`
	Outbox  *outboxRow `json:"outbox"`
	Handoff *struct {
		Status string `json:"status"`
	} `json:"handoff"`
}

// attempt is one attempt of a job.
type attempt struct {
	Outcome string `json:"outcome"`
}

// outboxRow is GET /api/v1/outbox/{id}, reduced.
type outboxRow struct {
	ID         string `json:"id"`
	Status     string `json:"status"`
	ProviderID string `json:"provider_id"`
	Note       string `json:"note"`
	Attempts   []struct {
		Action  string `json:"action"`
		Outcome string `json:"outcome"`
	} `json:"attempts"`
}

func (i *instance) event(key string) (timeline, error) {
	var t timeline
	err := i.getJSON("/api/v1/events/"+url.PathEscape(key), &t)
	return t, err
}

func (i *instance) outbox(id string) (outboxRow, error) {
	var o outboxRow
	err := i.getJSON("/api/v1/outbox/"+url.PathEscape(id), &o)
	return o, err
}

// sandboxMessage is one message the sandbox provider received.
type sandboxMessage struct {
	Ref      string `json:"client_ref"`
	Provider string `json:"provider"`
	ID       string `json:"id"`
	Repeats  int    `json:"repeats"`
}

// sandbox lists what the sandbox providers received, by our reference. The
// sandbox keeps one record per reference and counts later sends of it as
// repeats.
func (i *instance) sandbox() (map[string]sandboxMessage, error) {
	var v struct {
		Messages []sandboxMessage `json:"messages"`
	}
	if err := i.getJSON("/api/v1/sandbox/messages?limit=1000", &v); err != nil {
		return nil, err
	}
	out := make(map[string]sandboxMessage, len(v.Messages))
	for _, m := range v.Messages {
		out[m.Ref] = m
	}
	return out, nil
}

// deadLetter is one item of GET /api/v1/dead-letters, reduced.
type deadLetter struct {
	ID       string `json:"id"`
	Kind     string `json:"kind"`
	Channel  string `json:"channel"`
	EventKey string `json:"event_key"`
	State    string `json:"state"`
	Safe     bool   `json:"safe"`
	Why      string `json:"why"`
}

func (i *instance) deadLetters(kind, channel string) ([]deadLetter, error) {
	var v struct {
		DeadLetters []deadLetter `json:"dead_letters"`
	}
	q := url.Values{"kind": {kind}, "channel": {channel}}
	err := i.getJSON("/api/v1/dead-letters?"+q.Encode(), &v)
	return v.DeadLetters, err
}

// replay asks for a replay of a dead letter; body may be nil.
func (i *instance) replay(id string, body any) (int, string, error) {
	code, raw, err := i.do(http.MethodPost, "/api/v1/dead-letters/"+url.PathEscape(id)+"/replay", body)
	return code, string(bytes.TrimSpace(raw)), err
}
